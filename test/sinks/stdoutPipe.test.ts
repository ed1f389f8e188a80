import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, runTs, waitForHttp } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';

const { dir, cleanup } = tempDir('receiver-stdout-');
afterAll(cleanup);

/** `serve` as a child process, with the sinks of `configFile`, its stdout a pipe to this test. */
const serveWithStdoutSink = (o: { secret: string; dbPath: string; configFile: string; port: number }, extra: Record<string, string> = {}) =>
  runTs('src/cli/main.ts', ['serve'], {
    HIRING_API_URL: 'http://127.0.0.1:9',
    HIRING_API_KEY: 'sk-test.unused',
    WEBHOOK_SECRET: o.secret,
    DATABASE_PATH: o.dbPath,
    CONFIG_FILE: o.configFile,
    PORT: String(o.port),
    HOST: '127.0.0.1',
    LOG_LEVEL: 'silent',
    ...extra,
  });

describe('stdout sink whose reader goes away', () => {
  it('keeps the receiver up (ingest answers, health is fine) and records the deliveries as failing, not lost', async () => {
    const secret = newSecret();
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const dbPath = join(dir, 'r.db');
    const configFile = join(dir, 'sinks.json');
    writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'console', type: 'stdout' }] }));
    // As `serve | head -n 1`: the reader takes the first line, then closes the pipe.
    const child = serveWithStdoutSink({ secret, dbPath, configFile, port });
    try {
      await waitForHttp(`${url}/healthz`, undefined, child);
      const post = async () => {
        const e = envelope({ event_type: 'application.created' });
        return (await postSigned(url, secret, JSON.stringify(e))).status;
      };
      expect(await post()).toBe(200);
      const deadline = Date.now() + 10_000;
      while (child.stdout.join('').length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
      expect(child.stdout.join('')).toMatch(/"event_type":"application.created"/);
      child.proc.stdout!.destroy();

      const statuses: number[] = [];
      for (let i = 0; i < 3; i++) {
        statuses.push(await post());
        await new Promise((r) => setTimeout(r, 200));
      }
      expect(statuses).toEqual([200, 200, 200]);
      const db = new BetterSqlite3(dbPath, { readonly: true });
      let rows: { state: string; last_error: string | null }[] = [];
      while (Date.now() < deadline + 5_000) {
        rows = db.prepare("SELECT state, last_error FROM deliveries WHERE state != 'delivered'").all() as typeof rows;
        if (rows.length === 3 && rows.every((r) => r.state === 'retrying')) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      db.close();
      expect(rows).toHaveLength(3);
      for (const r of rows) expect(r).toEqual({ state: 'retrying', last_error: expect.stringMatching(/^stdout (write failed|is closed).*EPIPE/) });
      expect((await fetch(`${url}/healthz`)).status).toBe(200);
      expect(child.proc.exitCode).toBe(null);
    } finally {
      child.proc.kill('SIGTERM');
      await child.exited;
    }
  });

  it('a reader that stops reading (a full pipe, not a closed one) does not hold the receiver past SHUTDOWN_GRACE_MS', async () => {
    const secret = newSecret();
    const port = await freePort();
    const url = `http://127.0.0.1:${port}`;
    const configFile = join(dir, 'stall.json');
    writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'console', type: 'stdout' }] }));
    // At the default log level: the receiver's own logs must not block on the stalled stdout either.
    const child = serveWithStdoutSink({ secret, dbPath: join(dir, 'stall.db'), configFile, port }, { SHUTDOWN_GRACE_MS: '1000', LOG_LEVEL: 'info' });
    try {
      await waitForHttp(`${url}/healthz`, undefined, child);
      // The reader stops reading: the pipe (64 KB) fills with the first messages, the next write never completes.
      child.proc.stdout!.pause();
      // About 8 KB a message, 80 of them: well past the pipe's buffer and the reading side's.
      const big = 'x'.repeat(8000);
      for (let i = 0; i < 80; i++) {
        const base = envelope({ event_type: 'application.created' });
        const e = { ...base, payload: { ...(base.payload as Record<string, unknown>), note: big } };
        expect((await postSigned(url, secret, JSON.stringify(e))).status).toBe(200);
      }
      await new Promise((r) => setTimeout(r, 1000)); // the sink's write is stuck by now
      const started = Date.now();
      child.proc.kill('SIGTERM');
      const exited = await Promise.race([child.exited, new Promise<null>((r) => setTimeout(() => r(null), 10_000))]);
      expect(exited, 'still running 10 s after SIGTERM').not.toBeNull();
      expect(Date.now() - started).toBeLessThan(10_000);
      // With a stdout sink the logs are on stderr: stdout holds messages only.
      expect(child.stderr.join('')).toMatch(/"msg":"receiver stopped"/);
    } finally {
      if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGKILL');
      child.proc.stdout!.resume();
      await child.exited;
    }
  });
});
