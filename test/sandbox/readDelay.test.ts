import { afterEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/sandbox/clock.js';
import { randomUUID } from 'node:crypto';
import { ACME_KEY, ACME_ORG, GLOBEX_KEY, startSandbox, type Running } from './helpers.js';

/** A slow service: every scoring read waits the read delay before it is answered, and is counted. */
describe('read delay and read counts (docs/sandbox.md)', () => {
  let run: Running | undefined;
  afterEach(async () => {
    await run?.sandbox.stop();
    run = undefined;
  });
  const control = (r: Running, path: string, method = 'POST', body?: unknown) =>
    r.api(`/_sandbox${path}`, { method, key: null, ...(body === undefined ? {} : { body }) });
  const waitFor = async (r: Running, want: { in_flight: number; answered: number }) => {
    const deadline = Date.now() + 5_000;
    let last: unknown;
    while (Date.now() < deadline) {
      last = (await control(r, '/reads', 'GET')).body;
      if (JSON.stringify(last) === JSON.stringify(want)) return;
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    expect(last).toEqual(want);
  };

  it('holds every scoring read (v2 and v1, results, faults and 404s alike) for the delay over timeFactor, counting it while held', async () => {
    const r = (run = await startSandbox({ timeFactor: 4 }));
    const job = r.sandbox.control.createJob({});
    const id = r.sandbox.control.createApplication({ jobId: job.id }).id;
    r.sandbox.control.completeInterview(id);
    expect((await control(r, '/reads', 'GET')).body).toEqual({ in_flight: 0, answered: 0 });
    // Nominal 8 s, so 2 s of real time at timeFactor 4.
    expect((await control(r, '/settings', 'PATCH', { read_delay_ms: 8_000 })).status).toBe(204);
    r.sandbox.control.injectFault({ target: 'cv-evaluation', status: 503 });

    const started = performance.now();
    const reads = Promise.all([
      r.api(`/api/v2/applications/${id}/interview`),
      r.api(`/api/v2/applications/${id}/cv-evaluation`),
      r.api('/api/v2/applications/00000000-0000-4000-8000-000000000000/insights'),
      r.api(`/api/v1/applications/${id}/interview`),
    ]);
    await waitFor(r, { in_flight: 4, answered: 0 });
    const [interview, faulted, unknown, v1] = await reads;
    const elapsed = performance.now() - started;

    expect([interview.status, interview.body.status]).toEqual([200, 'completed']);
    expect(faulted.status).toBe(503);
    expect(unknown.status).toBe(404);
    expect(v1.status).toBe(200);
    // Held the 2 s, divided by timeFactor (8 s undivided would pass 6 s).
    expect(elapsed).toBeGreaterThanOrEqual(1_995);
    expect(elapsed).toBeLessThan(6_000);
    expect((await control(r, '/reads', 'GET')).body).toEqual({ in_flight: 0, answered: 4 });

    // Back to 0: answered at once, not after the 2 s.
    r.sandbox.control.setReadDelay(0);
    const quick = performance.now();
    expect((await r.api(`/api/v2/applications/${id}/interview`)).status).toBe(200);
    expect(performance.now() - quick).toBeLessThan(1_000);
    expect(r.sandbox.control.reads()).toEqual({ inFlight: 0, answered: 5 });
  });

  it('counts HEAD and a v1 read without an interview (404), but not what is refused before the read nor other endpoints', async () => {
    const r = (run = await startSandbox({ readDelayMs: 1 }));
    const job = r.sandbox.control.createJob({});
    const id = r.sandbox.control.createApplication({ jobId: job.id }).id;
    expect((await r.api(`/api/v2/applications/${id}/interview`, { key: null })).status).toBe(401);
    expect((await r.api(`/api/v2/applications/${id}/interview`, { method: 'POST', body: {} })).status).toBe(405);
    expect((await r.api('/api/v2/jobs')).status).toBe(200);
    expect(r.sandbox.control.reads()).toEqual({ inFlight: 0, answered: 0 });
    const v1 = await r.api(`/api/v1/applications/${id}/interview`);
    expect([v1.status, v1.body[0].detail]).toEqual([404, 'No interview for this application yet.']);
    expect((await fetch(`${r.url}/api/v2/applications/${id}/interview`, { method: 'HEAD', headers: { authorization: `Bearer ${ACME_KEY}` } })).status).toBe(200);
    expect(r.sandbox.control.reads()).toEqual({ inFlight: 0, answered: 2 });
  });

  it('stop() ends reads still held and later ones do not wait, so no timer outlives the sandbox; a delay past setTimeout\'s range still holds', async () => {
    // About 35 days: beyond 2^31-1 ms, where a bare setTimeout would fire at once.
    const r = (run = await startSandbox({ readDelayMs: 3e9 }));
    const job = r.sandbox.control.createJob({});
    const id = r.sandbox.control.createApplication({ jobId: job.id }).id;
    const held = r.api(`/api/v2/applications/${id}/interview`).catch((err: unknown) => err);
    await waitFor(r, { in_flight: 1, answered: 0 });
    await r.sandbox.stop();
    run = undefined;
    // The request was cut with the server; the held read itself was released and finished.
    expect(await held).toBeInstanceOf(Error);
    expect(r.sandbox.control.reads()).toEqual({ inFlight: 0, answered: 1 });
    // Through the app after stop(): answered, not held for the delay.
    const late = await r.sandbox.app.request(`/api/v2/applications/${id}/interview`, { headers: { authorization: `Bearer ${ACME_KEY}` } });
    expect(late.status).toBe(200);
    expect(r.sandbox.control.reads()).toEqual({ inFlight: 0, answered: 2 });
  });

  it('read gaps (spec 8): per organization, application and resource, the GETs and the shortest time between two on the sandbox clock', async () => {
    const clock = createManualClock(Date.parse('2026-03-01T09:00:00Z'));
    const r = (run = await startSandbox({ clock }));
    const job = r.sandbox.control.createJob({});
    const a = r.sandbox.control.createApplication({ jobId: job.id }).id;
    const b = r.sandbox.control.createApplication({ jobId: job.id }).id;
    expect(r.sandbox.control.readGaps()).toEqual([]);
    await r.api(`/api/v2/applications/${a}/interview`);
    clock.advance(1_000);
    // Not polls of this organization's result: another organization's read (404), an unknown id,
    // a HEAD (no result read), a read refused before it (no key).
    expect((await r.api(`/api/v2/applications/${a}/interview`, { key: GLOBEX_KEY })).status).toBe(404);
    expect((await r.api(`/api/v2/applications/${randomUUID()}/interview`)).status).toBe(404);
    expect((await fetch(`${r.url}/api/v2/applications/${a}/interview`, { method: 'HEAD', headers: { authorization: `Bearer ${ACME_KEY}` } })).status).toBe(200);
    await r.api(`/api/v2/applications/${b}/interview`, { key: null });
    clock.advance(44_000);
    await r.api(`/api/v2/applications/${a}/interview`);
    clock.advance(12_000);
    // A fault answered instead of the result is still a poll.
    r.sandbox.control.injectFault({ target: 'interview', applicationId: a, status: 503, times: 1 });
    expect((await r.api(`/api/v2/applications/${a}/interview`)).status).toBe(503);
    await r.api(`/api/v2/applications/${a}/insights`);
    await r.api(`/api/v1/applications/${b}/interview`);
    expect(r.sandbox.control.readGaps()).toEqual([
      { organizationId: ACME_ORG, applicationId: a, resource: 'interview', reads: 3, shortestGapMs: 12_000 },
      { organizationId: ACME_ORG, applicationId: a, resource: 'insights', reads: 1, shortestGapMs: null },
      { organizationId: ACME_ORG, applicationId: b, resource: 'v1-interview', reads: 1, shortestGapMs: null },
    ]);
    expect((await control(r, '/read-gaps', 'GET')).body).toEqual([
      { organization_id: ACME_ORG, application_id: a, resource: 'interview', reads: 3, shortest_gap_ms: 12_000 },
      { organization_id: ACME_ORG, application_id: a, resource: 'insights', reads: 1, shortest_gap_ms: null },
      { organization_id: ACME_ORG, application_id: b, resource: 'v1-interview', reads: 1, shortest_gap_ms: null },
    ]);
  });

  it('PATCH /_sandbox/settings names what is wrong', async () => {
    const r = (run = await startSandbox());
    expect((await control(r, '/settings', 'PATCH', {})).body).toEqual([{ code: 'invalid_input', detail: 'Give result_delay_ms, read_delay_ms or both.', attr: null }]);
    const negative = await control(r, '/settings', 'PATCH', { read_delay_ms: -1 });
    expect([negative.status, negative.body[0].attr]).toEqual([400, 'read_delay_ms']);
    expect((await control(r, '/settings', 'PATCH', { result_delay_ms: 10, read_delay_ms: 0 })).status).toBe(204);
  });
});
