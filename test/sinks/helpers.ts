import { writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Webhook } from 'standardwebhooks';
import type { SinkFile } from '../../src/sinks/kinds/file.js';
import { ManualClock } from '../../src/util/clock.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { newSecret, signDelivery } from '../helpers/signing.js';

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

const readBody = (req: IncomingMessage) =>
  new Promise<string>((resolve) => {
    const parts: Buffer[] = [];
    req.on('data', (c: Buffer) => parts.push(c));
    req.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
  });

export interface Received {
  path: string;
  headers: Record<string, string>;
  body: string;
  /** Parsed by standardwebhooks' verify with the secret of that path; null when verification failed. */
  message: Record<string, any> | null;
}

export type Reply = { status: number; headers?: Record<string, string>; hangMs?: number };

/**
 * A consumer on 127.0.0.1 verifying every request with the standardwebhooks
 * package (the reference implementation consumers use). `secrets` maps a
 * path to the secret its sink signs with; `reply` decides the answer.
 */
export async function startConsumer(secrets: Record<string, string>) {
  const received: Received[] = [];
  let reply: (r: Received, n: number) => Reply = () => ({ status: 204 });
  const server = createServer(async (req, res) => {
    const body = await readBody(req);
    const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
    const path = req.url ?? '/';
    let message: Record<string, any> | null = null;
    try {
      message = new Webhook(secrets[path] ?? 'whsec_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA').verify(body, headers) as Record<string, any>;
    } catch {
      message = null;
    }
    const r: Received = { path, headers, body, message };
    received.push(r);
    const out = reply(r, received.filter((x) => x.path === path).length);
    if (out.hangMs) await new Promise((ok) => setTimeout(ok, out.hangMs));
    if (!res.destroyed) res.writeHead(out.status, out.headers ?? {}).end();
  });
  const url = await listen(server);
  return {
    url,
    received,
    reply: (fn: (r: Received, n: number) => Reply) => (reply = fn),
    on: (path: string) => received.filter((r) => r.path === path),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
export type Consumer = Awaited<ReturnType<typeof startConsumer>>;

/** A stand-in of the hiring service's scoring GETs: path -> JSON body (200); unknown paths 404. */
export async function startFakeHiringApi(results: Record<string, unknown>) {
  const calls: string[] = [];
  const server = createServer((req, res) => {
    calls.push(req.url ?? '');
    const body = results[req.url ?? ''];
    if (body === undefined) return res.writeHead(404, { 'content-type': 'application/json' }).end('[{"code":"not_found","detail":"no","attr":null}]');
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
  });
  const url = await listen(server);
  return { url, calls, results, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

/** Collects what a stdout sink writes. */
export class LineSink extends Writable {
  readonly lines: string[] = [];
  override _write(chunk: Buffer, _enc: string, cb: () => void): void {
    this.lines.push(...chunk.toString('utf8').split('\n').filter((l) => l.length > 0));
    cb();
  }
  messages(): Record<string, any>[] {
    return this.lines.map((l) => JSON.parse(l) as Record<string, any>);
  }
}

export interface Harness {
  r: TestReceiver;
  clock: ManualClock;
  secret: string;
  stdout: LineSink;
  dir: string;
  /** Deliver an envelope through the public ingest path, signed as the service does. */
  post(envelope: Record<string, unknown>, secret?: string): Promise<void>;
  /** Run processing and every sink until nothing is due (bounded). */
  settle(): Promise<void>;
  deliveries(sink?: string): Record<string, any>[];
  close(): Promise<void>;
}

/**
 * A receiver (not listening; workers driven by runUntilIdle) whose CONFIG_FILE
 * holds `file` (sinks, extra sources). Retries back off exactly `retryMs`; with `retryMs: null`,
 * on the sinks' own schedule (SINK_BACKOFF).
 */
export async function startHarness(
  file: Record<string, unknown>,
  opts: { env?: Record<string, string>; hiringApiUrl?: string; retryMs?: number | null; pollIntervalMs?: number } = {},
): Promise<Harness> {
  const { dir, cleanup } = tempDir('sinks-test-');
  const configPath = join(dir, 'config.json');
  writeFileSync(configPath, JSON.stringify(file));
  const secret = newSecret();
  // Near real time: consumers verify webhook-timestamp against their own clock (5 min tolerance).
  const clock = new ManualClock(Date.now());
  const stdout = new LineSink();
  const retryMs = opts.retryMs === undefined ? 1000 : opts.retryMs;
  const r = await startReceiver(
    {
      WEBHOOK_SECRET: secret,
      CONFIG_FILE: configPath,
      ...(opts.hiringApiUrl ? { HIRING_API_URL: opts.hiringApiUrl } : {}),
      ...opts.env,
    },
    {
      clock,
      listen: false,
      sinks: { stdout, ...(retryMs === null ? {} : { backoff: { baseMs: retryMs, capMs: retryMs, jitter: 0 } }), pollIntervalMs: opts.pollIntervalMs ?? 20 },
    },
  );
  const sqlite = r.app.database.ingestSqlite;
  return {
    r,
    clock,
    secret,
    stdout,
    dir,
    async post(envelope, withSecret = secret) {
      const d = signDelivery(withSecret, JSON.stringify(envelope), { timestampSeconds: Math.floor(clock.now() / 1000) });
      const res = await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body });
      if (res.status !== 200) throw new Error(`ingest answered ${res.status}: ${await res.text()}`);
    },
    async settle() {
      for (let i = 0; i < 50; i++) {
        const ran = (await r.app.worker.runUntilIdle()) + (await r.app.fanOut.runUntilIdle());
        if (ran === 0) return;
      }
      throw new Error('did not settle in 50 rounds');
    },
    deliveries(sink) {
      return (sink
        ? sqlite.prepare('SELECT * FROM deliveries WHERE sink = ? ORDER BY created_at, event_id').all(sink)
        : sqlite.prepare('SELECT * FROM deliveries ORDER BY sink, created_at, event_id').all()) as Record<string, any>[];
    },
    async close() {
      await r.close();
      cleanup();
    },
  };
}

/** A file sink's file over a real one (a FileHandle), with some operations replaced (to fail as a full disk or a dying disk does). */
export function sinkFileOf(fh: SinkFile, replace: Partial<SinkFile> = {}): SinkFile {
  return {
    stat: () => fh.stat(),
    read: (b, o, l, pos) => fh.read(b, o, l, pos),
    write: (b) => fh.write(b),
    truncate: (n) => fh.truncate(n),
    sync: () => fh.sync(),
    close: () => fh.close(),
    ...replace,
  };
}
