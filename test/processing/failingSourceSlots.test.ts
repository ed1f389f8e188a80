import { writeFileSync } from 'node:fs';
import { createServer, type ServerResponse, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';

const READY = JSON.stringify({ status: 'completed', overall_score: 3, is_eligible: true, ineligibility_reasons: [] });
const servers: Server[] = [];
const held: ServerResponse[] = [];
let r: TestReceiver | undefined;
const { dir, cleanup } = tempDir('failing-source-slots-');
afterAll(async () => {
  for (const res of held) if (!res.writableEnded) res.writeHead(503).end('[]');
  await r?.close();
  for (const s of servers) s.close();
  cleanup();
});

async function listen(handler: (res: ServerResponse) => void): Promise<string> {
  const s = createServer((req, res) => {
    req.resume();
    handler(res);
  });
  servers.push(s);
  await new Promise<void>((ok) => s.listen(0, '127.0.0.1', () => ok()));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}

/** Polls `check` every 20 ms until it holds, for at most `ms`; returns its last value. */
async function waitFor<T>(check: () => T, done: (v: T) => boolean, ms = 5000): Promise<T> {
  const until = Date.now() + ms;
  let v = check();
  for (let i = 0; i < ms / 20 && !done(v) && Date.now() < until; i++) {
    await new Promise((ok) => setTimeout(ok, 20));
    v = check();
  }
  return v;
}

/**
 * A receiver with two sources: Acme, whose API fails the first read at once (an outage begins)
 * and leaves every later one hanging (kept in `held`), and Globex, whose API answers `globexDelayMs` on.
 */
async function twoSources(concurrency: string, globexDelayMs: number) {
  const acmeSecret = newSecret();
  const globexSecret = newSecret();
  const acme = { requests: 0 };
  const acmeUrl = await listen((res) => {
    acme.requests++;
    if (acme.requests === 1) res.writeHead(503, { 'content-type': 'application/json' }).end('[{"code":"error","detail":"down","attr":null}]');
    else held.push(res);
  });
  const answer = (res: ServerResponse) => res.writeHead(200, { 'content-type': 'application/json' }).end(READY);
  const globexUrl = await listen((res) => (globexDelayMs > 0 ? void setTimeout(() => answer(res), globexDelayMs) : answer(res)));
  const cfg = join(dir, `sources-${concurrency}.json`);
  writeFileSync(
    cfg,
    JSON.stringify({
      sources: [
        { name: 'acme', secrets: [acmeSecret], api_url: acmeUrl, api_key: 'sk-acme.key' },
        { name: 'globex', secrets: [globexSecret], api_url: globexUrl, api_key: 'sk-globex.key' },
      ],
    }),
  );
  const receiver = await startReceiver({ CONFIG_FILE: cfg, WORKER_CONCURRENCY: concurrency, LOG_LEVEL: 'warn' });
  const db = new BetterSqlite3(receiver.dbPath, { readonly: true });
  const post = async (source: 'acme' | 'globex') => {
    const res = await postSigned(receiver.url, source === 'acme' ? acmeSecret : globexSecret, JSON.stringify(envelope({ event_type: 'interview.completed' })));
    expect(res.status).toBe(200);
  };
  const count = (q: string) => () => (db.prepare(q).get() as { n: number }).n;
  return {
    receiver,
    db,
    acme,
    post,
    failed: count("SELECT count(*) AS n FROM jobs WHERE source = 'acme' AND last_error IS NOT NULL AND state = 'pending'"),
    globexReady: count("SELECT count(*) AS n FROM interview_results WHERE source = 'globex' AND state = 'ready'"),
  };
}

describe('one organization whose hiring API fails slowly', () => {
  // Its reads, all due at once, took every worker slot for as long as the service kept each one
  // waiting (up to the 10 s timeout), and the other organizations' reads waited behind them.
  it('takes one worker slot while it is failing: the other sources\' reads go on meanwhile', async () => {
    const t = await twoSources('4', 0);
    r = t.receiver;
    try {
      await t.post('acme');
      expect(await waitFor(() => t.acme.requests, (n) => n === 1)).toBe(1);
      // Let its failure be recorded (the read rescheduled) before more of its reads are due.
      expect(await waitFor(t.failed, (n) => n === 1)).toBe(1);

      for (let i = 0; i < 6; i++) await t.post('acme');
      expect(await waitFor(() => t.acme.requests, (n) => n >= 2)).toBeGreaterThanOrEqual(2);
      for (let i = 0; i < 10; i++) await t.post('globex');
      expect(await waitFor(t.globexReady, (n) => n === 10)).toBe(10);
      // One of Acme's reads waits on its service; the others wait their turn, not a slot each.
      expect(held.length).toBe(1);
    } finally {
      t.db.close();
    }
  }, 30_000);

  // Its one read at a time was claimed ahead of every other due read (a probe's place in the
  // claim): with one slot free (WORKER_CONCURRENCY=1, or the pacer holding the reads to one at a
  // time under a burst of deliveries), each of its reads, hanging up to the 10 s timeout, went
  // before the other organizations' reads queued earlier.
  it("takes its turn by run_at when one slot is free: the other sources' reads queued first go first", async () => {
    // Globex slow enough that the events below are all stored and folded while its first read runs.
    const heldBefore = held.length;
    const t = await twoSources('1', 150);
    try {
      await t.post('acme');
      expect(await waitFor(t.failed, (n) => n === 1)).toBe(1);

      for (let i = 0; i < 3; i++) await t.post('globex');
      for (let i = 0; i < 3; i++) await t.post('acme');
      expect(await waitFor(t.globexReady, (n) => n === 3)).toBe(3);
      // Then Acme's next read, and only one.
      expect(await waitFor(() => held.length - heldBefore, (n) => n === 1)).toBe(1);
    } finally {
      t.db.close();
      for (const res of held) if (!res.writableEnded) res.writeHead(503).end('[]');
      await t.receiver.close();
    }
  }, 30_000);
});
