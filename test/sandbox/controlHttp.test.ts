import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/sandbox/clock.js';
import { ACME_KEY_2, ACME_ORG, GLOBEX_ORG, startReceiver, startSandbox, subscribe, type Receiver, type Running } from './helpers.js';

/** The /_sandbox control endpoints drive the same life as the programmatic API (docs/sandbox.md). */
describe('control endpoints over HTTP', () => {
  let run: Running;
  let receiver: Receiver;
  beforeEach(async () => {
    run = await startSandbox();
    receiver = await startReceiver();
  });
  afterEach(async () => {
    await run.sandbox.stop();
    await receiver.close();
  });
  const control = (path: string, method = 'POST', body?: unknown) => run.api(`/_sandbox${path}`, { method, key: null, ...(body === undefined ? {} : { body }) });

  it('lists organizations with their keys and revokes a key', async () => {
    const orgs = await control('/organizations', 'GET');
    expect(orgs.body.map((o: any) => o.id)).toEqual([ACME_ORG, GLOBEX_ORG]);
    expect((await control('/keys/revoke', 'POST', { key: ACME_KEY_2 })).status).toBe(204);
    expect((await run.api('/api/v2/jobs', { key: ACME_KEY_2 })).body[0].code).toBe('authentication_failed');
    const added = await control(`/organizations/${GLOBEX_ORG}/keys`, 'POST', {});
    expect(added.body.key).toMatch(/^sk-[a-f0-9]+\.[A-Za-z0-9_-]+$/);
    expect((await run.api('/api/v2/jobs', { key: added.body.key })).status).toBe(200);
  });

  it('moves an application through its life, step by step', async () => {
    await subscribe(run, receiver);
    const job = await control('/jobs', 'POST', { title: 'Picker' });
    expect(job.status).toBe(201);
    const app = await control('/applications', 'POST', { job_id: job.body.id, external_id: 'crm-9', candidate: { first_name: 'Ada' } });
    expect(app.body).toMatchObject({ external_id: 'crm-9', status: 'applied', candidate: { first_name: 'Ada' } });
    const id = app.body.id;
    expect((await control(`/applications/${id}/status`, 'POST', { status: 'screened' })).body.status).toBe('screened');
    expect((await control(`/applications/${id}/status`, 'POST', { status: 'screened' })).status).toBe(400);
    expect((await control(`/applications/${id}/interview`, 'POST', { eligible: false })).body.is_eligible).toBe(false);
    expect((await control(`/applications/${id}/cv-evaluation`, 'POST', { overall_score: 2.5 })).body.overall_score).toBe(2.5);
    expect((await control(`/applications/${id}/insights`, 'POST', {})).status).toBe(200);
    // A ready result never turns unavailable (spec 3.6): refused, with the spec's error body.
    const refused = await control(`/applications/${id}/unavailable`, 'POST', { resource: 'insights', reason: 'no_result' });
    expect(refused.status).toBe(409);
    expect(refused.body).toEqual([{ code: 'conflict', detail: expect.stringContaining('cannot become unavailable'), attr: null }]);
    expect((await control(`/applications/${id}`, 'DELETE')).status).toBe(204);
    expect((await control('/deliveries/wait', 'POST', {})).body).toEqual({ pending: 0 });
    expect(receiver.requests.map((r) => r.body.event_type)).toEqual([
      'application.created', 'application.status_changed', 'interview.completed', 'cv_evaluation.completed', 'insights.completed', 'job_application.deleted',
    ]);
    // Spec 6.4: every application block carries external_id; the deleted snapshot has none.
    for (const r of receiver.requests) {
      if (r.body.event_type === 'job_application.deleted') expect(r.body.payload).not.toHaveProperty('external_id');
      else expect(r.body.payload.application.external_id).toBe('crm-9');
    }
    const deliveries = await control(`/deliveries?event_id=${receiver.requests[0]!.body.id}`, 'GET');
    expect(deliveries.body).toHaveLength(1);
    // The documented form with empty values filters nothing; one empty, the other set, filters by that one.
    expect((await control('/deliveries?webhook_id=&event_id=', 'GET')).body).toHaveLength(6);
    expect((await control(`/deliveries?webhook_id=&event_id=${receiver.requests[0]!.body.id}`, 'GET')).body).toHaveLength(1);
  });

  it('refuses insights with nothing to combine instead of inventing a score of 0 ("no")', async () => {
    await subscribe(run, receiver);
    const job = await control('/jobs', 'POST', { title: 'Picker' });
    const id = (await control('/applications', 'POST', { job_id: job.body.id })).body.id;
    // Insights combine the interview and the CV evaluation (spec 2.10, 6.4): with neither scored
    // there is no score to report, so the instruction is refused and nothing changes.
    const refused = await control(`/applications/${id}/insights`, 'POST', {});
    expect([refused.status, refused.body]).toEqual([409, [{ code: 'conflict', detail: expect.stringContaining('nothing to combine'), attr: null }]]);
    await control(`/applications/${id}/interview`, 'POST', { outcome: 'unreachable' });
    expect((await control(`/applications/${id}/insights`, 'POST', {})).status).toBe(409);
    expect((await run.api(`/api/v2/applications/${id}/insights`)).body).toEqual({ status: 'processing', reason: 'insights_pending', result: null });
    // A score given by the test is used as given; a CV evaluation alone is enough to combine.
    expect((await control(`/applications/${id}/insights`, 'POST', { overall_score: 1.5 })).body).toMatchObject({ overall_score: 1.5, hiring_recommendation: 'no' });
    const other = (await control('/applications', 'POST', { job_id: job.body.id })).body.id;
    await control(`/applications/${other}/cv-evaluation`, 'POST', { overall_score: 4.5 });
    expect((await control(`/applications/${other}/insights`, 'POST', {})).body).toMatchObject({ overall_score: 4.5, hiring_recommendation: 'strong_yes' });
    await control('/deliveries/wait', 'POST', {});
    expect(receiver.requests.filter((r) => r.body.event_type === 'insights.completed').map((r) => r.body.payload.insights.overall_score)).toEqual([1.5, 4.5]);
  });

  it('a wait that ends with deliveries still pending (the webhook is down) is 504 timeout, saying how many', async () => {
    const down = await startReceiver();
    await subscribe(run, down);
    await down.close();
    await control('/jobs', 'POST', { title: 'Picker' });
    await control('/applications', 'POST', { job_id: (await control('/jobs', 'POST', { title: 'Packer' })).body.id });
    const waited = await control('/deliveries/wait', 'POST', { timeout_ms: 300 });
    expect([waited.status, waited.body]).toEqual([504, [{ code: 'timeout', detail: expect.stringMatching(/^deliveries still pending after 300 ms: [1-9]\d*$/), attr: null }]]);
  });

  it('runs named scenarios, emits arbitrary events, injects faults and sets chaos', async () => {
    await subscribe(run, receiver);
    const sc = await control('/scenarios/scoring_failed', 'POST', { external_id: 'x-1' });
    expect(sc.status).toBe(201);
    expect((await run.api(`/api/v2/applications/${sc.body.application.id}/interview`)).body).toEqual({ status: 'unavailable', reason: 'scoring_failed', result: null });
    expect((await control('/scenarios/nope', 'POST', {})).body[0]).toMatchObject({ code: 'invalid_input', attr: 'name' });
    const ev = await control('/events', 'POST', { event_type: 'interview.completed', payload: { application: { id: sc.body.application.id, external_id: 'x-1' } } });
    expect(ev.status).toBe(201);
    await control('/faults', 'POST', { target: 'interview', status: 429, times: 1, headers: { 'Retry-After': '5' } });
    const throttled = await run.api(`/api/v2/applications/${sc.body.application.id}/interview`);
    expect([throttled.status, throttled.headers.get('retry-after')]).toEqual([429, '5']);
    await control('/faults', 'POST', { target: '*', status: 503, times: 5 });
    expect((await control('/faults', 'DELETE')).status).toBe(204);
    expect((await run.api(`/api/v2/applications/${sc.body.application.id}/interview`)).status).toBe(200);
    expect((await control('/chaos', 'PATCH', { duplicateRate: 1 })).body.duplicateRate).toBe(1);
    // A knob spelled as /settings spells its own (snake_case) is refused, not ignored.
    const typo = await control('/chaos', 'PATCH', { duplicate_rate: 0.5 });
    expect([typo.status, typo.body]).toEqual([400, [{ code: 'invalid_input', detail: 'Unrecognized key: "duplicate_rate"', attr: null }]]);
    await control('/deliveries/wait', 'POST', {});
    expect(receiver.requests.some((r) => r.body.id === ev.body.id)).toBe(true);
    // A real clock cannot be advanced.
    expect((await control('/clock/advance', 'POST', { ms: 1000 })).status).toBe(400);
    expect((await control('/applications', 'POST', {})).body[0]).toMatchObject({ code: 'required', attr: 'job_id' });
  });

  it('a fault no HTTP answer can carry is refused with 400 when injected, not served as a 500 or a dropped connection', async () => {
    // It was accepted with 204; the read it was meant for then failed: a 1xx status dropped the
    // connection, a header name with a space answered 500 with Node's plain-text error, and a 204
    // without a body of the test's own got the default error array, which a 204 cannot carry.
    const job = await control('/jobs', 'POST', {});
    const app = await control('/applications', 'POST', { job_id: job.body.id });
    const read = () => run.api(`/api/v2/applications/${app.body.id}/interview`);
    for (const [fault, attr] of [
      [{ status: 150 }, 'status'],
      [{ status: 503, headers: { 'bad header': 'x' } }, 'headers'],
      [{ status: 503, headers: { 'x-note': 'two\nlines' } }, 'headers'],
      [{ status: 304, body: { no: 'body' } }, 'body'],
    ] as const) {
      const refused = await control('/faults', 'POST', { target: 'interview', ...fault });
      expect([refused.status, refused.body[0]?.code, refused.body[0]?.attr]).toEqual([400, 'invalid_input', attr]);
      expect((await read()).status).toBe(200);
    }
    expect(() => run.sandbox.control.injectFault({ target: 'interview', status: 150 })).toThrow(/200 to 599/);
    // A 204 (or 205) is served, with no body.
    expect((await control('/faults', 'POST', { target: 'interview', status: 204 })).status).toBe(204);
    expect(await read()).toMatchObject({ status: 204, body: null });
    expect((await read()).status).toBe(200);
  });

  it('an interview instruction the job cannot apply is 400 invalid_input naming the field, and changes nothing', async () => {
    const job = await control('/jobs', 'POST', { title: 'Picker' });
    const id = (await control('/applications', 'POST', { job_id: job.body.id })).body.id;
    const refused: [unknown, string][] = [
      [{ eligible: false, failed_qualifications: ['Right to drive'] }, 'failed_qualifications'],
      [{ failed_qualifications: ['Communication'] }, 'failed_qualifications'], // a competency has no pass/fail
      [{ eligible: false, failed_qualifications: [] }, 'failed_qualifications'],
      [{ eligible: true, failed_qualifications: ['Right to work'] }, 'eligible'],
      [{ eligible: false, not_assessed: ['Right to work', 'Weekend availability'] }, 'eligible'],
      [{ failed_qualifications: ['Right to work'], not_assessed: ['right to work'] }, 'failed_qualifications'],
      [{ not_assessed: ['communications'] }, 'not_assessed'],
      [{ competency_scores: [5, 5, 5, 1] }, 'competency_scores'],
      [{ outcome: 'unreachable', eligible: false }, 'eligible'],
    ];
    for (const [body, attr] of refused) {
      const res = await control(`/applications/${id}/interview`, 'POST', body);
      expect([res.status, res.body], JSON.stringify(body)).toEqual([400, [{ code: 'invalid_input', detail: expect.any(String), attr }]]);
    }
    expect((await run.api(`/api/v2/applications/${id}/interview`)).body).toMatchObject({ status: 'processing', result: null });
    // Names are matched case-insensitively and shown as the job spells them.
    const done = await control(`/applications/${id}/interview`, 'POST', { eligible: false, failed_qualifications: ['Right to Work'], not_assessed: ['COMMUNICATION'] });
    expect(done.status).toBe(200);
    expect(done.body).toMatchObject({ is_eligible: false, ineligibility_reasons: ['Right to work'] });
    expect(done.body.criteria_results.find((c: any) => c.name === 'Communication')).toMatchObject({ outcome: 'not_assessed' });
  });
});

describe('the manual clock over HTTP', () => {
  it('an advance past the last instant a date can hold is 400 on ms, and the sandbox keeps working', async () => {
    // It moved the clock to 1e16 ms and answered 500; from then on every route that writes a
    // time (a webhook, a job, a delivery record) was a 500 too, until the sandbox was restarted.
    const start = Date.parse('2025-06-01T00:00:00Z');
    const run = await startSandbox({ clock: createManualClock(start) });
    try {
      const control = (path: string, body: unknown) => run.api(`/_sandbox${path}`, { method: 'POST', key: null, body });
      const refused = await control('/clock/advance', { ms: 1e16 });
      expect(refused.status).toBe(400);
      expect(refused.body).toMatchObject([{ code: 'invalid_input', attr: 'ms' }]);
      expect(run.sandbox.control.now()).toBe(start);
      expect((await run.api('/api/v2/webhooks', { method: 'POST', body: { url: 'http://127.0.0.1:9/h' } })).status).toBe(201);
      // Up to that instant is fine.
      expect((await control('/clock/advance', { ms: 8.64e15 - start })).body).toEqual({ now: '+275760-09-13T00:00:00.000Z' });
      expect((await control('/clock/advance', { ms: 1 })).status).toBe(400);
      expect((await run.api('/api/v2/jobs', { method: 'POST', body: { title: 'Picker' } })).status).toBe(201);
    } finally {
      await run.sandbox.stop();
    }
  });

  it('a wait that would fast-forward past that instant stops short of it, the task still pending', async () => {
    const run = await startSandbox({ clock: createManualClock(Date.parse('2025-06-01T00:00:00Z')), chaos: { delayMs: 1e300 } });
    try {
      expect((await run.api('/api/v2/webhooks', { method: 'POST', body: { url: 'http://127.0.0.1:9/h' } })).status).toBe(201);
      run.sandbox.control.emitEvent({ eventType: 'application.created', payload: {} });
      const waited = await run.api('/_sandbox/deliveries/wait', { method: 'POST', key: null, body: {} });
      expect([waited.status, waited.body]).toEqual([200, { pending: 1 }]);
      expect((await run.api('/api/v2/jobs', { method: 'POST', body: { title: 'Picker' } })).status).toBe(201);
    } finally {
      await run.sandbox.stop();
    }
  });
});
