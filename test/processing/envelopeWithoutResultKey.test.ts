import { afterEach, describe, expect, it } from 'vitest';
import { startPairBehindFront } from '../helpers/sandboxFront.js';

/**
 * The readiness envelope of spec 3.6 is `{status, reason, result: null}`. A service, or a gateway
 * in front of it, that leaves null fields out sends `{"status": "processing"}`: no result key, no
 * field of a result. Taken for the result, that was stored as a final `ready` result of nothing
 * and never read again, the real result lost; an `unavailable` one likewise became `ready`.
 */

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

/** A pair whose API host answers the v2 interview read with `api.state.answer` while it is set; everything else comes from the sandbox. */
async function setUp() {
  const api = { state: { answer: null as string | null, answered: 0 } };
  const started = await startPairBehindFront((req, res) => {
    if (api.state.answer === null || !/^\/api\/v2\/applications\/[^/]+\/interview$/.test(req.url!)) return false;
    api.state.answered++;
    res.writeHead(200, { 'content-type': 'application/json' }).end(api.state.answer);
    return true;
  });
  close = started.close;
  const p = started.pair;
  const c = p.sandbox.control;
  const app = c.createApplication({ jobId: c.createJob({}).id });
  const db = p.receiver.app.database.ingestSqlite;
  const row = () => db.prepare('SELECT state, reason, data FROM interview_results WHERE application_id = ?').get(app.id) as { state: string; reason: string | null; data: string | null };
  const settled = () => (db.prepare("SELECT ep.state FROM event_processing ep JOIN events e ON e.id = ep.event_id WHERE e.event_type = 'interview.completed'").get() as { state: string }).state;
  return { p, api, app, row, settled };
}

describe('a readiness envelope whose null fields were left out', () => {
  it('{"status": "processing"} is read again, and the result read later is the one stored', async () => {
    const { p, api, app, row, settled } = await setUp();
    api.state.answer = '{"status":"processing"}';
    p.sandbox.control.completeInterview(app.id);
    await p.settle();
    expect(api.state.answered).toBe(1);
    expect(row()).toMatchObject({ state: 'processing', data: null });
    expect(settled()).toBe('awaiting_result');

    // The service has the result now: the next poll (30 s later at the earliest) reads it.
    api.state.answer = null;
    p.clock.advance(30_000);
    await p.settle();
    expect(row().state).toBe('ready');
    expect(JSON.parse(row().data!)).toMatchObject({ status: 'completed' });
    expect(settled()).toBe('settled');
  }, 60_000);

  it('{"status": "unavailable", "reason": "scoring_failed"} is unavailable, not a ready result', async () => {
    const { p, api, app, row, settled } = await setUp();
    api.state.answer = '{"status":"unavailable","reason":"scoring_failed"}';
    p.sandbox.control.completeInterview(app.id);
    await p.settle();
    expect(row()).toEqual({ state: 'unavailable', reason: 'scoring_failed', data: null });
    expect(settled()).toBe('settled');
  }, 60_000);
});
