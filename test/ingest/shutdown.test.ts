import { Agent, createServer, request, type ServerResponse } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it } from 'vitest';
import { openIngestWaitSignal } from '../../src/db/ingestWaitSignal.js';
import { ManualClock } from '../../src/util/clock.js';
import { cli } from '../cli/helpers.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';
import { startSilentServer } from '../helpers/silentServer.js';
import { envelope, newSecret, postSigned, signDelivery, type SignedDelivery } from '../helpers/signing.js';
import { waitFor } from '../helpers/waitFor.js';

/** stop(), begun at `started` (performance.now), ended without waiting out the 5 s of SHUTDOWN_GRACE_MS, and warned of no request in progress. */
function expectStoppedWithoutGrace(r: TestReceiver, started: number): void {
  expect(performance.now() - started).toBeLessThan(2500);
  expect(r.logs.lines.some((l) => /closing connections with a request still in progress/.test(String(l.msg)))).toBe(false);
}

describe('stop() and keep-alive connections', () => {
  it('a keep-alive connection whose request ends during the grace is closed once idle: stop() does not wait out SHUTDOWN_GRACE_MS, and warns of nothing', async () => {
    const secret = newSecret();
    const r = await startReceiver({ WEBHOOK_SECRET: secret, SHUTDOWN_GRACE_MS: '5000', WORKER_CONCURRENCY: '0' });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const d = signDelivery(secret, JSON.stringify(envelope()));
      const u = new URL(r.url);
      let connected!: () => void;
      const connectedP = new Promise<void>((ok) => (connected = ok));
      const answered = new Promise<number>((resolve, reject) => {
        const req = request(
          { host: u.hostname, port: u.port, path: '/webhooks', method: 'POST', agent, headers: { ...d.headers, 'content-length': Buffer.byteLength(d.body) } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode!));
          },
        );
        req.on('error', reject);
        req.on('socket', (socket) => socket.once('connect', connected));
        req.write(d.body.slice(0, 10));
        setTimeout(() => req.end(d.body.slice(10)), 200); // the rest 200 ms into the shutdown
      });
      // Connected (a stop before the server took the connection in would reset it), then time to read the head.
      await connectedP;
      await new Promise((res) => setTimeout(res, 50));
      const started = performance.now();
      const stopped = r.app.stop();
      expect(await answered).toBe(200);
      await stopped;
      expectStoppedWithoutGrace(r, started);
    } finally {
      agent.destroy();
      await r.close();
    }
  });
});

/** The head of a POST /webhooks of `d` on HTTP/1.1 (keep-alive), up to the body. */
const requestHead = (host: string, d: SignedDelivery): string => {
  const head = Object.entries({ ...d.headers, 'content-length': String(Buffer.byteLength(d.body)) })
    .map(([k, v]) => `${k}: ${v}\r\n`)
    .join('');
  return `POST /webhooks HTTP/1.1\r\nhost: ${host}\r\n${head}\r\n`;
};

/** A receiver with no workers and a raw connection to it; `answers` is all it has sent on that connection; `close` ends both. */
async function receiverWithConnection() {
  const secret = newSecret();
  const r = await startReceiver({ WEBHOOK_SECRET: secret, SHUTDOWN_GRACE_MS: '5000', WORKER_CONCURRENCY: '0' });
  const u = new URL(r.url);
  const socket = connect(Number(u.port), u.hostname);
  let received = '';
  socket.on('data', (d: Buffer) => (received += d.toString()));
  await new Promise((ok) => socket.once('connect', ok));
  const close = async () => {
    socket.destroy();
    await r.close();
  };
  return { secret, r, u, socket, answers: () => received, close };
}

describe('stop() and a connection on which nothing was sent', () => {
  it('a connection opened and not used yet (a sender\'s or a proxy\'s spare one) is closed at once: stop() does not wait out SHUTDOWN_GRACE_MS for it, nor warns of a request in progress', async () => {
    const { r, socket, close } = await receiverWithConnection();
    try {
      const closed = new Promise<void>((ok) => socket.once('close', () => ok()));
      const started = performance.now();
      await r.app.stop();
      await closed;
      expectStoppedWithoutGrace(r, started);
    } finally {
      await close();
    }
  });
});

describe('stop() and a sender reusing its connection', () => {
  it('a delivery answered during the stop is answered with Connection: close, so the sender does not write its next one on a connection about to be closed', async () => {
    const { secret, r, u, socket, answers, close } = await receiverWithConnection();
    try {
      const ended = new Promise<void>((ok) => socket.once('end', ok));
      const d = signDelivery(secret, JSON.stringify(envelope()));
      // HTTP/1.1: a keep-alive connection unless the answer says otherwise.
      socket.write(`${requestHead(u.host, d)}${d.body.slice(0, 10)}`);
      await new Promise((ok) => setTimeout(ok, 100)); // the server takes the head in
      const stopped = r.app.stop();
      socket.write(d.body.slice(10));
      await ended;
      await stopped;
      expect(answers()).toMatch(/^HTTP\/1\.1 200 /);
      expect(answers()).toMatch(/\r\nconnection: close\r\n/i);
    } finally {
      await close();
    }
  });
});

describe('stop() and deliveries pipelined on one connection', () => {
  it('two deliveries read back to back, both waiting for the write lock when the stop begins: both are answered, and only the last answer closes the connection', async () => {
    const { secret, r, u, socket, answers, close } = await receiverWithConnection();
    const other = new BetterSqlite3(r.dbPath);
    try {
      const closed = new Promise<void>((ok) => socket.once('close', () => ok()));
      other.exec('BEGIN IMMEDIATE');
      const envs = [envelope(), envelope()];
      const requests = envs.map((e) => {
        const d = signDelivery(secret, JSON.stringify(e));
        return `${requestHead(u.host, d)}${d.body}`;
      });
      // Pipelined: the second written before the first is answered (HTTP/1.1 allows it; Node reads both).
      socket.write(requests.join(''));
      // Both read and in one batch waiting for the lock.
      for (let i = 0; i < 1000 && !r.logs.lines.some((l) => l.msg === 'ingest write lock busy; retrying' && l.batch === 2); i++) {
        await new Promise((ok) => setTimeout(ok, 5));
      }
      expect(r.logs.lines.some((l) => l.msg === 'ingest write lock busy; retrying' && l.batch === 2)).toBe(true);
      const stopped = r.app.stop();
      other.exec('ROLLBACK');
      await closed;
      await stopped;
      const heads = answers().split(/\r\n\r\n\{[^}]*\}/).filter((h) => h.startsWith('HTTP/'));
      // Each read delivery answered: the first answer leaves the connection open for the one behind it.
      expect(heads.map((h) => h.split('\r\n')[0])).toEqual(['HTTP/1.1 200 OK', 'HTTP/1.1 200 OK']);
      expect(heads[0]).not.toMatch(/\r\nconnection: close/i);
      expect(heads[1]).toMatch(/\r\nconnection: close/i);
      const stored = new BetterSqlite3(r.dbPath, { readonly: true });
      expect(envs.map((e) => stored.prepare('SELECT COUNT(*) FROM events WHERE id = ?').pluck().get(e.id))).toEqual([1, 1]);
      stored.close();
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
      await close();
    }
  });
});

describe('stop() and a result read in flight', () => {
  it('a delivery waiting for a write lock another process holds does not hold stop() past SHUTDOWN_GRACE_MS: it fails uncommitted and is answered 503, to be redelivered', async () => {
    const secret = newSecret();
    const r = await startReceiver({ WEBHOOK_SECRET: secret, SHUTDOWN_GRACE_MS: '500', WRITE_TIMEOUT_MS: '8000', WORKER_CONCURRENCY: '0' });
    const other = new BetterSqlite3(r.dbPath);
    try {
      other.exec('BEGIN IMMEDIATE');
      const e = envelope();
      const answer = postSigned(r.url, secret, JSON.stringify(e)).then(
        (res) => res.status,
        () => 'cut',
      );
      // It waits for the lock (the signal serve raises for `work` while it retries), not still on its way in.
      const wait = openIngestWaitSignal(r.dbPath);
      try {
        const deadline = Date.now() + 10_000;
        while (!wait.isWaiting(Date.now())) {
          if (Date.now() > deadline) throw new Error('the delivery never waited for the lock');
          await new Promise((ok) => setTimeout(ok, 5));
        }
      } finally {
        wait.close();
      }
      const started = performance.now();
      await r.app.stop();
      // The grace (500 ms), not WRITE_TIMEOUT_MS (8 s).
      expect(performance.now() - started).toBeLessThan(3_000);
      // Answered 503, with the Retry-After every storage failure carries, before its connection
      // closed: a clean refusal the service retries, not a reset.
      expect(await answer).toBe(503);
      // Counted and logged as a stop's doing, not a storage fault (a deploy must not page as one).
      expect(r.logs.lines.find((l) => l.outcome === 'unavailable')).toMatchObject({ storage_error: 'shutdown' });
      other.exec('ROLLBACK');
      expect(other.prepare('SELECT COUNT(*) FROM events WHERE id = ?').pluck().get(e.id)).toBe(0);
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
      await r.close();
    }
  });

  it('a hiring API that never answers does not hold stop() past SHUTDOWN_GRACE_MS; the read runs again later, no attempt counted', async () => {
    const api = await startSilentServer();
    const secret = newSecret();
    const r = await startReceiver({ WEBHOOK_SECRET: secret, SHUTDOWN_GRACE_MS: '300', HIRING_API_URL: api.url }, { listen: false });
    try {
      const e = envelope({ event_type: 'interview.completed' });
      const d = signDelivery(secret, JSON.stringify(e));
      expect((await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
      await r.app.startWorkers();
      await api.waitForRequest();
      expect(api.held).toHaveLength(1);
      const started = Date.now();
      await r.app.stop();
      expect(Date.now() - started).toBeLessThan(5000); // the read's own timeout is 10 s
      const db = new BetterSqlite3(r.dbPath, { readonly: true });
      const job = db.prepare("SELECT state, attempts, last_error, run_at FROM jobs WHERE kind = 'fetch_result'").get() as Record<string, unknown>;
      // The request reached the service: its poll slot is kept, so the read after a restart still
      // waits 30 s from it (spec 8); only the poll count is given back (no further backoff).
      const slot = db.prepare('SELECT polls, last_polled_at FROM interview_results').get() as { polls: number; last_polled_at: string };
      db.close();
      expect(job).toMatchObject({ state: 'pending', attempts: 0, last_error: 'interrupted: the receiver was stopping (SHUTDOWN_GRACE_MS passed)' });
      expect(slot.polls).toBe(0);
      expect(slot.last_polled_at).not.toBeNull();
      expect(Date.parse(job.run_at as string) - Date.parse(slot.last_polled_at)).toBe(30_000);
    } finally {
      api.close();
      await r.close(); // stop() runs once: this only removes the files
    }
  });

  it('a read that was failing before (an outage) and is cut by the shutdown keeps its failure in last_error: status still counts it as failing', async () => {
    let requests = 0;
    const held: ServerResponse[] = [];
    const api = createServer((_req, res) => {
      if (++requests === 1) res.writeHead(503, { 'content-type': 'application/json' }).end('[{"code":"error","detail":"down for maintenance","attr":null}]');
      else held.push(res);
    });
    await new Promise<void>((ok) => api.listen(0, '127.0.0.1', ok));
    const clock = new ManualClock(Date.now());
    const secret = newSecret();
    const r = await startReceiver(
      { WEBHOOK_SECRET: secret, SHUTDOWN_GRACE_MS: '300', HIRING_API_URL: `http://127.0.0.1:${(api.address() as AddressInfo).port}` },
      { listen: false, clock },
    );
    const job = () => r.app.database.ingestSqlite.prepare("SELECT state, attempts, last_error FROM jobs WHERE kind = 'fetch_result'").get() as Record<string, unknown> | undefined;
    try {
      const d = signDelivery(secret, JSON.stringify(envelope({ event_type: 'interview.completed' })));
      expect((await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
      await r.app.startWorkers();
      await waitFor(() => /HTTP 503/.test(String(job()?.last_error)), 'the read failing with the 503');
      // Past the 30 s floor after a 503 and its spread (up to a quarter more).
      clock.advance(38_000);
      await waitFor(() => held.length === 1, 'the retried read held');
      expect(held).toHaveLength(1);
      await r.app.stop();
      const after = new BetterSqlite3(r.dbPath, { readonly: true });
      const row = after.prepare("SELECT state, attempts, last_error FROM jobs WHERE kind = 'fetch_result'").get();
      after.close();
      expect(row).toEqual({
        state: 'pending',
        attempts: 1,
        last_error: 'interrupted: the receiver was stopping (SHUTDOWN_GRACE_MS passed); it failed before: interview: HTTP 503 server_error (error: down for maintenance)',
      });
      const status = await cli(['status', '--json'], { DATABASE_PATH: r.dbPath });
      expect(JSON.parse(status.stdout).result_reads).toMatchObject({ pending: 1, failing: 1 });
    } finally {
      held.forEach((res) => res.destroy());
      api.close();
      await r.close();
    }
  });
});
