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

describe('one organization whose hiring API fails slowly', () => {
  // Its reads, all due at once, took every worker slot for as long as the service kept each one
  // waiting (up to the 10 s timeout), and the other organizations' reads waited behind them.
  it('takes one worker slot while it is failing: the other sources\' reads go on meanwhile', async () => {
    const acmeSecret = newSecret();
    const globexSecret = newSecret();
    let acmeRequests = 0;
    // Acme's API: the first read fails at once (an outage begins), every later one hangs.
    const acmeUrl = await listen((res) => {
      acmeRequests++;
      if (acmeRequests === 1) res.writeHead(503, { 'content-type': 'application/json' }).end('[{"code":"error","detail":"down","attr":null}]');
      else held.push(res);
    });
    const globexUrl = await listen((res) => res.writeHead(200, { 'content-type': 'application/json' }).end(READY));
    const cfg = join(dir, 'sources.json');
    writeFileSync(
      cfg,
      JSON.stringify({
        sources: [
          { name: 'acme', secrets: [acmeSecret], api_url: acmeUrl, api_key: 'sk-acme.key' },
          { name: 'globex', secrets: [globexSecret], api_url: globexUrl, api_key: 'sk-globex.key' },
        ],
      }),
    );
    r = await startReceiver({ CONFIG_FILE: cfg, WORKER_CONCURRENCY: '4', LOG_LEVEL: 'warn' });
    const db = new BetterSqlite3(r.dbPath, { readonly: true });
    const post = async (secret: string) => {
      const res = await postSigned(r!.url, secret, JSON.stringify(envelope({ event_type: 'interview.completed' })));
      expect(res.status).toBe(200);
    };
    try {
      await post(acmeSecret);
      expect(await waitFor(() => acmeRequests, (n) => n === 1)).toBe(1);
      // Let its failure be recorded (the read rescheduled) before more of its reads are due.
      const failed = () => (db.prepare("SELECT count(*) AS n FROM jobs WHERE source = 'acme' AND last_error IS NOT NULL AND state = 'pending'").get() as { n: number }).n;
      expect(await waitFor(failed, (n) => n === 1)).toBe(1);

      for (let i = 0; i < 6; i++) await post(acmeSecret);
      expect(await waitFor(() => acmeRequests, (n) => n >= 2)).toBeGreaterThanOrEqual(2);
      for (let i = 0; i < 10; i++) await post(globexSecret);
      const ready = () => (db.prepare("SELECT count(*) AS n FROM interview_results WHERE source = 'globex' AND state = 'ready'").get() as { n: number }).n;
      expect(await waitFor(ready, (n) => n === 10)).toBe(10);
      // One of Acme's reads waits on its service; the others wait their turn, not a slot each.
      expect(held.length).toBe(1);
    } finally {
      db.close();
    }
  }, 30_000);
});
