import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { sharedHttpClient, type HttpClient } from '../../src/http/httpClient.js';
import { createSandbox, type Sandbox } from '../../src/sandbox/createSandbox.js';
import { ManualClock } from '../../src/util/clock.js';
import { freePort } from './childServer.js';
import { startReceiver, type TestReceiver } from './receiver.js';

export const ACME_KEY = 'sk-acme0001.sandboxAcmeKeyOne0000000000';
export const ACME_KEY_2 = 'sk-acme0002.sandboxAcmeKeyTwo0000000000';

export interface ApiCall {
  at: number;
  path: string;
  status: number;
}

export interface Pair {
  clock: ManualClock;
  sandbox: Sandbox;
  sandboxUrl: string;
  receiver: TestReceiver;
  secret: string;
  /** Every request the receiver made to the hiring API, with the (injected) time it was made. */
  calls: ApiCall[];
  /** Sandbox sends everything due; then the receiver's worker runs every due job. */
  settle(): Promise<void>;
  /** A new receiver process on the same database (the old one stopped), e.g. with another key. */
  restartReceiver(env?: Record<string, string>): Promise<void>;
  close(): Promise<void>;
}

/**
 * The sandbox and a receiver registered with it, sharing one manual clock:
 * the receiver's URL is registered through the sandbox's webhook API with the
 * organization's key, and the receiver is started with the secret it returned.
 */
export async function startPair(
  opts: {
    env?: Record<string, string>;
    startAt?: number;
    /** Runs before each request to the hiring API leaves (time spent connecting, say: advance the clock here). */
    beforeRequest?: (url: string) => void | Promise<void>;
  } = {},
): Promise<Pair> {
  const clock = new ManualClock(opts.startAt ?? Date.parse('2026-11-02T09:00:00Z'));
  const sandbox = createSandbox({ clock });
  const { url: sandboxUrl } = await sandbox.start(0, '127.0.0.1');
  const port = await freePort();
  const reg = await fetch(`${sandboxUrl}/api/v2/webhooks`, {
    method: 'POST',
    headers: { authorization: `Bearer ${ACME_KEY}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `http://127.0.0.1:${port}/webhooks`, enabled: true, event_types: [] }),
  });
  const { secret } = (await reg.json()) as { secret: string };
  const calls: ApiCall[] = [];
  const countingHttp: HttpClient = {
    request: async (url, req) => {
      await opts.beforeRequest?.(url);
      const res = await sharedHttpClient().request(url, req);
      calls.push({ at: clock.now(), path: new URL(url).pathname, status: res.status });
      return res;
    },
  };
  const baseEnv = {
    WEBHOOK_SECRET: secret,
    HIRING_API_URL: sandboxUrl,
    HIRING_API_KEY: ACME_KEY,
    WORKER_CONCURRENCY: '0',
    ...opts.env,
  };
  let receiver = await startReceiver({ ...baseEnv, PORT: String(port) }, { clock, http: countingHttp });
  const firstDir = dirname(receiver.dbPath);
  const pair: Pair = {
    clock,
    sandbox,
    sandboxUrl,
    get receiver() {
      return receiver;
    },
    secret,
    calls,
    async settle() {
      for (let i = 0; i < 5; i++) {
        await sandbox.control.idle();
        await receiver.app.worker.runUntilIdle();
        if (sandbox.control.pendingDeliveries() === 0) break;
      }
    },
    async restartReceiver(env = {}) {
      await receiver.app.stop();
      const next = await startReceiver({ ...baseEnv, DATABASE_PATH: `${firstDir}/receiver.db`, ...env }, { clock, http: countingHttp });
      // startReceiver made a folder of its own for a database this one does not use: it was left
      // behind, empty, at every restart. close() removes the database's folder, firstDir.
      rmSync(dirname(next.dbPath), { recursive: true, force: true });
      receiver = { ...next, dbPath: `${firstDir}/receiver.db`, close: () => next.app.stop() };
    },
    async close() {
      await receiver.close();
      await sandbox.stop();
      rmSync(firstDir, { recursive: true, force: true });
    },
  };
  return pair;
}
