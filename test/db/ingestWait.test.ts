import { existsSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { INGEST_WAIT_SUFFIX, openIngestWaitSignal, type IngestWaitSignal } from '../../src/db/ingestWaitSignal.js';
import { openDatabase, type OpenDatabase } from '../../src/db/openDatabase.js';
import { immediateTransaction } from '../../src/queue/JobQueue.js';
import { startReceiver, tempDir } from '../helpers/receiver.js';
import { envelope, newSecret, signDelivery } from '../helpers/signing.js';

// Two processes on one database: `serve` (its ingest committer writes the signal) and `work`
// (its processing writes read it). Each side here opens the file on its own, as each process does.

const opened: { close(): void | Promise<void> }[] = [];
let cleanup = () => {};
afterEach(async () => {
  for (const o of opened.splice(0).reverse()) await o.close();
  cleanup();
});

function dbPath(): string {
  const t = tempDir();
  cleanup = t.cleanup;
  return join(t.dir, 'r.db');
}

function signal(path: string, staleMs?: number): IngestWaitSignal {
  const s = openIngestWaitSignal(path, staleMs);
  opened.push(s);
  return s;
}

const settledWithin = async (p: Promise<unknown>, ms: number) =>
  Promise.race([p.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), ms))]);

describe('the ingest-wait signal between processes', () => {
  it('says "waiting" to another handle on the same database until the commit, and forgets a stale one', () => {
    const path = dbPath();
    const serve = signal(path, 50);
    const work = signal(path, 50);
    expect(existsSync(`${path}${INGEST_WAIT_SUFFIX}`)).toBe(true);
    expect(work.isWaiting(1_000_000)).toBe(false);
    serve.waiting(1_000_000);
    expect(work.isWaiting(1_000_010)).toBe(true);
    // A `serve` killed while waiting never writes its commit: the value stops counting.
    expect(work.isWaiting(1_000_060)).toBe(false);
    serve.waiting(1_000_100);
    serve.committed();
    expect(work.isWaiting(1_000_101)).toBe(false);
  });

  it('has nothing to share for an in-memory database', () => {
    const s = signal(':memory:');
    s.waiting(Date.now());
    expect(s.isWaiting(Date.now())).toBe(false);
  });
});

describe('processing writes let a waiting ingest commit go first', () => {
  async function setUp() {
    const path = dbPath();
    const database: OpenDatabase = openDatabase(path);
    opened.push(database);
    database.sqlite.exec('CREATE TABLE t (v INTEGER)');
    return { database, serve: signal(path) };
  }

  it('holds an autocommit write and a BEGIN IMMEDIATE while ingest waits, and runs them once it committed', async () => {
    const { database, serve } = await setUp();
    // `serve` retries its commit every few ms and says so each time.
    serve.waiting(Date.now());
    const keepWaiting = setInterval(() => serve.waiting(Date.now()), 5);
    const write = sql`INSERT INTO t (v) VALUES (1)`.execute(database.db);
    const trx = immediateTransaction(database.db, async (t) => {
      await sql`INSERT INTO t (v) VALUES (2)`.execute(t);
    }, 0);
    expect(await settledWithin(Promise.all([write, trx]), 25)).toBe(false);
    expect(database.sqlite.prepare('SELECT COUNT(*) FROM t').pluck().get()).toBe(0);
    clearInterval(keepWaiting);
    serve.committed();
    await Promise.all([write, trx]);
    expect(database.sqlite.prepare('SELECT COUNT(*) FROM t').pluck().get()).toBe(2);
  });

  it('does not hold reads', async () => {
    const { database, serve } = await setUp();
    serve.waiting(Date.now());
    const keepWaiting = setInterval(() => serve.waiting(Date.now()), 5);
    try {
      expect(await settledWithin(sql`SELECT COUNT(*) AS n FROM t`.execute(database.db), 15)).toBe(true);
    } finally {
      clearInterval(keepWaiting);
    }
  });

  it('lets ingest go first for a bounded time only: a write still runs while ingest keeps waiting', async () => {
    const { database, serve } = await setUp();
    serve.waiting(Date.now());
    const keepWaiting = setInterval(() => serve.waiting(Date.now()), 5);
    try {
      const started = performance.now();
      await sql`INSERT INTO t (v) VALUES (3)`.execute(database.db);
      // 50 ms by default: held for it, then run.
      expect(performance.now() - started).toBeGreaterThanOrEqual(45);
      expect(database.sqlite.prepare('SELECT COUNT(*) FROM t').pluck().get()).toBe(1);
    } finally {
      clearInterval(keepWaiting);
    }
  });

  it('the CLI\'s connection (SQLite\'s own wait) does not create the file, and does not yield', async () => {
    const path = dbPath();
    const cli = openDatabase(path, { busyWait: 'sqlite' });
    opened.push(cli);
    cli.sqlite.exec('CREATE TABLE t (v INTEGER)');
    expect(existsSync(`${path}${INGEST_WAIT_SUFFIX}`)).toBe(false);
    const serve = signal(path);
    serve.waiting(Date.now());
    const keepWaiting = setInterval(() => serve.waiting(Date.now()), 5);
    try {
      expect(await settledWithin(sql`INSERT INTO t (v) VALUES (4)`.execute(cli.db), 15)).toBe(true);
    } finally {
      clearInterval(keepWaiting);
    }
  });
});

describe('the ingest committer writes the signal', () => {
  it('says "waiting" while a delivery waits for another process\'s lock, and clears it once the delivery is stored', async () => {
    const secret = newSecret();
    const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0', WRITE_TIMEOUT_MS: '5000' });
    opened.push(r);
    const work = signal(r.dbPath);
    const other = new BetterSqlite3(r.dbPath);
    opened.push({ close: () => void other.close() });
    other.exec('BEGIN IMMEDIATE');
    const d = signDelivery(secret, JSON.stringify(envelope()));
    const answer = fetch(`${r.url}/webhooks`, { method: 'POST', headers: d.headers, body: d.body });
    try {
      await new Promise((res) => setTimeout(res, 30));
      expect(work.isWaiting(Date.now())).toBe(true);
    } finally {
      other.exec('COMMIT');
    }
    expect((await answer).status).toBe(200);
    expect(work.isWaiting(Date.now())).toBe(false);
  });
});
