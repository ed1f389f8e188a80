import { afterEach, describe, expect, it } from 'vitest';
import { startPairBehindFront } from '../helpers/sandboxFront.js';

/**
 * A scoring read answered with JSON nested thousands of levels deep (a malformed answer: JSON.parse
 * takes it, JSON.stringify runs out of stack when the result is stored). The same answer comes
 * back on every read, so it is a dead letter at once, said as such, like a body over the cap: not
 * a `Maximum call stack size exceeded` retried for a day against the service.
 */

let close: (() => Promise<void>) | undefined;
afterEach(async () => {
  await close?.();
  close = undefined;
});

const DEPTH = 100_000;
const DEEP = `{"overall_score":4,"is_eligible":true,"nested":${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}}`;

describe('a scoring read answered with JSON nested too deeply', () => {
  it('is dead-lettered at its first answer, naming the problem, and the read is given up', async () => {
    // The API host on 127.0.0.1: the v2 interview read answers DEEP; everything else goes to the sandbox.
    const api = { state: { deepAnswers: 0 } };
    const started = await startPairBehindFront((req, res) => {
      if (!/^\/api\/v2\/applications\/[^/]+\/interview$/.test(req.url!)) return false;
      api.state.deepAnswers++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(DEEP);
      return true;
    });
    close = started.close;
    const p = started.pair;
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id);
    await p.settle();
    // Bounded: a retried read would come back within a few backoffs.
    for (let i = 0; i < 5; i++) {
      p.clock.advance(60_000);
      await p.settle();
    }
    const db = p.receiver.app.database.ingestSqlite;
    expect(api.state.deepAnswers).toBe(1);
    const jobs = db.prepare("SELECT state, attempts, last_error FROM jobs WHERE kind = 'fetch_result'").all() as { state: string; attempts: number; last_error: string }[];
    expect(jobs).toEqual([{ state: 'dead', attempts: 1, last_error: expect.stringMatching(/invalid response \(too_deep\): .*nested more than 1000 levels/) }]);
    expect(db.prepare('SELECT state, reason, data FROM interview_results WHERE application_id = ?').get(app.id)).toEqual({
      state: 'given_up',
      reason: expect.stringMatching(/^fetch failed: .*too_deep/),
      data: null,
    });
    expect(p.receiver.logs.raw.join('\n')).not.toContain('Maximum call stack');
  }, 60_000);
});
