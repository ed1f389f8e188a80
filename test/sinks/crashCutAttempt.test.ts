import BetterSqlite3 from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, runTs, waitForHttp, type Child } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { until } from '../cli/helpers.js';

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

describe('an http delivery cut by a crash', () => {
  it("counts on the deliveries row as on its job: killed during attempt 1 of 2, refused at attempt 2, the row is dead after 2 attempts", { timeout: 60_000 }, async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    // The consumer: the first POST is never answered (the receiver is killed during it), the others get 500.
    const requests: string[] = [];
    const hanging: ServerResponse[] = [];
    const consumer = createServer((req, res) => {
      req.resume();
      req.on('end', () => {
        requests.push(String(req.headers['webhook-id']));
        if (requests.length === 1) hanging.push(res);
        else res.writeHead(500).end();
      });
    });
    await new Promise<void>((r) => consumer.listen(0, '127.0.0.1', r));
    cleanups.push(() => new Promise<void>((r) => {
      consumer.closeAllConnections();
      consumer.close(() => r());
    }));
    const config = join(t.dir, 'config.json');
    const url = `http://127.0.0.1:${(consumer.address() as AddressInfo).port}/hook`;
    writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url, secret: newSecret(), max_attempts: 2, timeout_ms: 30_000 }] }));
    const dbPath = join(t.dir, 'receiver.db');
    const secret = newSecret();
    const port = await freePort();
    const env = { DATABASE_PATH: dbPath, CONFIG_FILE: config, WEBHOOK_SECRET: secret, HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', PORT: String(port), HOST: '127.0.0.1' };
    const start = async (): Promise<Child> => {
      const child = runTs('src/main.ts', [], env);
      cleanups.push(() => {
        if (child.proc.exitCode === null && child.proc.signalCode === null) child.proc.kill('SIGKILL');
      });
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 20_000, child);
      return child;
    };

    const first = await start();
    const event = envelope();
    expect((await postSigned(`http://127.0.0.1:${port}`, secret, JSON.stringify(event))).status).toBe(200);
    await until(() => requests.length >= 1, 'the first POST', 15_000);
    first.proc.kill('SIGKILL');
    await first.exited;
    await start();
    // The job left running is taken back at the start and sent again at once: its last attempt, refused.
    const db = new BetterSqlite3(dbPath, { readonly: true });
    cleanups.push(() => void db.close());
    const row = await until(
      () =>
        db.prepare("SELECT state, attempts, last_status_code, message_id FROM deliveries WHERE sink = 'crm' AND state = 'dead'").get() as
          | { state: string; attempts: number; last_status_code: number; message_id: string }
          | undefined,
      'the delivery to be dead',
      15_000,
    );
    const job = db.prepare("SELECT state, attempts, max_attempts FROM jobs WHERE kind = 'sink:crm'").get() as { state: string; attempts: number; max_attempts: number };
    expect(requests).toEqual([row.message_id, row.message_id]);
    expect(job).toEqual({ state: 'dead', attempts: 2, max_attempts: 2 });
    expect(row).toMatchObject({ state: 'dead', last_status_code: 500, attempts: 2 });
  });
});
