import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GLOBEX_KEY, startReceiver, startSandbox, subscribe, type Receiver, type Running } from './helpers.js';

/** The application endpoints are the sandbox's assumption (spec 2.10, 4.1: "not shown"); see docs/sandbox.md. */
describe('applications through the API (spec 2.10 "not shown", 3.4, 6.4)', () => {
  let run: Running;
  let receiver: Receiver;
  let jobId: string;
  beforeEach(async () => {
    run = await startSandbox();
    receiver = await startReceiver();
    await subscribe(run, receiver);
    jobId = (await run.api('/api/v2/jobs', { method: 'POST', body: { title: 'Line Cook' } })).body.id;
  });
  afterEach(async () => {
    await run.sandbox.stop();
    await receiver.close();
  });
  const candidate = { first_name: 'Ada', last_name: 'Okafor', email: 'ada.okafor@example.com', phone_number: '+447700900123' };
  const create = (body: unknown, headers?: Record<string, string>) => run.api('/api/v2/applications', { method: 'POST', body, ...(headers === undefined ? {} : { headers }) });
  const events = async () => {
    await run.sandbox.control.waitForDeliveries({ timeoutMs: 5_000 });
    return receiver.requests.map((r) => r.body);
  };

  it('6.4: POST /applications creates an application (201, status applied) and emits application.created', async () => {
    const res = await create({ job_id: jobId, candidate, external_id: 'ats-42' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ job_id: jobId, external_id: 'ats-42', status: 'applied', cv: null, candidate: { ...candidate, id: expect.any(String) } });
    const [event] = await events();
    expect(event.event_type).toBe('application.created');
    expect(event.payload).toMatchObject({ application: { id: res.body.id, external_id: 'ats-42', status: 'applied' }, candidate: { email: candidate.email }, job: { id: jobId, title: 'Line Cook' } });
    expect((await run.api(`/api/v2/applications/${res.body.id}`)).body).toEqual(res.body);
  });

  it('7, 8: job_id of another organization is 400 does_not_exist; missing fields are required; candidate limits hold', async () => {
    const foreignJob = (await run.api('/api/v2/jobs', { method: 'POST', key: GLOBEX_KEY, body: { title: 'Theirs' } })).body.id;
    const foreign = await create({ job_id: foreignJob, candidate });
    expect(foreign.status).toBe(400);
    expect(foreign.body[0]).toMatchObject({ code: 'does_not_exist', attr: 'job_id' });
    const missing = await create({});
    expect(missing.body.map((e: any) => [e.code, e.attr])).toEqual([['required', 'job_id'], ['required', 'candidate']]);
    // Spec 7: a missing field is `required` with attr naming it, nested ones too.
    const { first_name: _dropped, ...noFirstName } = candidate;
    const nested = await create({ job_id: jobId, candidate: noFirstName });
    expect(nested.body.map((e: any) => [e.code, e.attr])).toEqual([['required', 'candidate.first_name']]);
    const long = await create({ job_id: jobId, candidate: { ...candidate, first_name: 'x'.repeat(151) } });
    expect(long.body[0]).toMatchObject({ code: 'invalid_input', attr: 'candidate.first_name' });
    expect((await create({ job_id: jobId, candidate: { ...candidate, email: 'nope' } })).body[0].attr).toBe('candidate.email');
    expect(await events()).toEqual([]);
  });

  it('4.6: POST /applications honors Idempotency-Key: one application, one event', async () => {
    const headers = { 'Idempotency-Key': 'app-1' };
    const first = await create({ job_id: jobId, candidate }, headers);
    const replay = await create({ candidate, job_id: jobId }, headers);
    expect(replay.headers.get('idempotent-replay')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect((await create({ job_id: jobId, candidate: { ...candidate, first_name: 'Bea' } }, headers)).status).toBe(409);
    // The key decides before the new body is validated (spec 4.6): an invalid body is still a conflict.
    const invalid = await create({ job_id: jobId }, headers);
    expect([invalid.status, invalid.body[0].code]).toEqual([409, 'idempotency_key_conflict']);
    expect((await events()).filter((e) => e.event_type === 'application.created')).toHaveLength(1);
  });

  it('3.4: PATCH status emits one application.status_changed per change; the same status is a no-op without an event', async () => {
    const id = (await create({ job_id: jobId, candidate })).body.id;
    const screened = await run.api(`/api/v2/applications/${id}`, { method: 'PATCH', body: { status: 'screened' } });
    expect(screened.status).toBe(200);
    expect(screened.body.status).toBe('screened');
    expect((await run.api(`/api/v2/applications/${id}`, { method: 'PATCH', body: { status: 'screened' } })).status).toBe(200);
    await run.api(`/api/v2/applications/${id}`, { method: 'PATCH', body: { status: 'hired', external_id: 'ats-7' } });
    const changes = (await events()).filter((e) => e.event_type === 'application.status_changed');
    // Deliveries are unordered (6.1), so compare the transitions as a set.
    expect(changes.map((e) => `${e.payload.previous_status}->${e.payload.application.status}`).sort()).toEqual(['applied->screened', 'screened->hired']);
    expect(changes.find((e) => e.payload.application.status === 'hired').payload.application.external_id).toBe('ats-7');
    const bad = await run.api(`/api/v2/applications/${id}`, { method: 'PATCH', body: { status: 'archived' } });
    expect(bad.body[0]).toMatchObject({ code: 'invalid_input', attr: 'status' });
  });

  it('6.4: DELETE is 204, emits job_application.deleted, and later reads are 404', async () => {
    const id = (await create({ job_id: jobId, candidate })).body.id;
    expect((await run.api(`/api/v2/applications/${id}`, { method: 'DELETE', key: GLOBEX_KEY })).status).toBe(404);
    expect((await run.api(`/api/v2/applications/${id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await run.api(`/api/v2/applications/${id}`)).status).toBe(404);
    expect((await run.api(`/api/v2/applications/${id}/interview`)).status).toBe(404);
    expect((await events()).map((e) => e.event_type).sort()).toEqual(['application.created', 'job_application.deleted']);
  });

  it('2.2: GET /applications pages the organization\'s applications, newest first, filtered by job_id and status', async () => {
    const other = (await run.api('/api/v2/jobs', { method: 'POST', body: { title: 'Dishwasher' } })).body.id;
    const a = (await create({ job_id: jobId, candidate })).body.id;
    const b = (await create({ job_id: other, candidate })).body.id;
    const c = (await create({ job_id: jobId, candidate })).body.id;
    await run.api(`/api/v2/applications/${c}`, { method: 'PATCH', body: { status: 'screened' } });
    expect((await run.api('/api/v2/applications')).body.results.map((x: any) => x.id)).toEqual([c, b, a]);
    expect((await run.api(`/api/v2/applications?job_id=${jobId}`)).body.results.map((x: any) => x.id)).toEqual([c, a]);
    expect((await run.api('/api/v2/applications?status=screened')).body.results.map((x: any) => x.id)).toEqual([c]);
    expect((await run.api('/api/v2/applications', { key: GLOBEX_KEY })).body.count).toBe(0);
    expect((await run.api('/api/v2/applications?status=nope')).status).toBe(400);
  });
});
