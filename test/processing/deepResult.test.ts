import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { startPair, type Pair } from '../helpers/pair.js';

/**
 * A scoring read answered with JSON nested thousands of levels deep (a malformed answer: JSON.parse
 * takes it, JSON.stringify runs out of stack when the result is stored). The same answer comes
 * back on every read, so it is a dead letter at once, said as such, like a body over the cap: not
 * a `Maximum call stack size exceeded` retried for a day against the service.
 */

let pair: Pair | undefined;
let stub: Server | undefined;
afterEach(async () => {
  await pair?.close();
  pair = undefined;
  stub?.close();
  stub = undefined;
});

const DEPTH = 100_000;
const DEEP = `{"overall_score":4,"is_eligible":true,"nested":${'['.repeat(DEPTH)}${']'.repeat(DEPTH)}}`;

/** The API host on 127.0.0.1: the v2 interview read answers DEEP; everything else goes to the sandbox. */
async function startStub(sandboxUrl: () => string) {
  const state = { deepAnswers: 0 };
  stub = createServer((req, res) => {
    if (/^\/api\/v2\/applications\/[^/]+\/interview$/.test(req.url!)) {
      state.deepAnswers++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(DEEP);
      return;
    }
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'connection') headers[k] = v;
    fetch(`${sandboxUrl()}${req.url}`, { method: req.method!, headers })
      .then(async (answer) => res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' }).end(Buffer.from(await answer.arrayBuffer())))
      .catch(() => res.writeHead(502).end());
  });
  await new Promise<void>((r) => stub!.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(stub.address() as AddressInfo).port}`, state };
}

describe('a scoring read answered with JSON nested too deeply', () => {
  it('is dead-lettered at its first answer, naming the problem, and the read is given up', async () => {
    let sandboxUrl = '';
    const api = await startStub(() => sandboxUrl);
    const p = await startPair({ env: { HIRING_API_URL: api.url } });
    pair = p;
    sandboxUrl = p.sandboxUrl;
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
