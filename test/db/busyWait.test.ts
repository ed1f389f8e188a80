import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type OpenDatabase } from '../../src/db/openDatabase.js';
import { immediateTransaction } from '../../src/queue/JobQueue.js';
import { tempDir } from '../helpers/receiver.js';

// Another process's write lock, as the `replay` CLI or a `work` process holds it: a second
// connection to the same file inside BEGIN IMMEDIATE, released by a timer of this loop. If a
// waiting statement slept on the event loop (SQLite's busy_timeout), the release could not run
// until that sleep ended.

let database: OpenDatabase | undefined;
let other: BetterSqlite3.Database | undefined;
let cleanup = () => {};
afterEach(async () => {
  if (other?.inTransaction) other.exec('ROLLBACK');
  other?.close();
  other = undefined;
  await database?.close();
  database = undefined;
  cleanup();
});

function open(opts: Parameters<typeof openDatabase>[1] = {}): { database: OpenDatabase; other: BetterSqlite3.Database } {
  const t = tempDir();
  cleanup = t.cleanup;
  const path = join(t.dir, 'r.db');
  database = openDatabase(path, opts);
  database.sqlite.exec('CREATE TABLE t (v INTEGER)');
  other = new BetterSqlite3(path);
  return { database, other };
}

/** Longest gap between the ticks of a 5 ms interval while `p` runs: how long the event loop stalled. */
async function longestStall<T>(p: () => Promise<T>): Promise<{ result: PromiseSettledResult<T>; stallMs: number; tookMs: number }> {
  let last = performance.now();
  let stallMs = 0;
  const tick = setInterval(() => {
    const now = performance.now();
    stallMs = Math.max(stallMs, now - last);
    last = now;
  }, 5);
  const started = performance.now();
  const [result] = await Promise.allSettled([p()]);
  const tookMs = performance.now() - started;
  clearInterval(tick);
  stallMs = Math.max(stallMs, performance.now() - last);
  return { result, stallMs, tookMs };
}

describe('waiting for another connection\'s write lock', () => {
  it('waits for the lock on timers: the event loop keeps running, and the write lands once the lock is free', async () => {
    const { database, other } = open({ busyTimeoutMs: 2000 });
    other.exec('BEGIN IMMEDIATE');
    setTimeout(() => other.exec('COMMIT'), 300);
    const { result, stallMs, tookMs } = await longestStall(() => sql`INSERT INTO t (v) VALUES (1)`.execute(database.db));
    expect(result.status).toBe('fulfilled');
    expect(tookMs).toBeGreaterThanOrEqual(250);
    // Sleeping inside SQLite would have stalled the loop for the whole 2 s timeout (the release
    // runs on this loop), and then failed.
    expect(stallMs).toBeLessThan(150);
    expect(database.sqlite.prepare('SELECT COUNT(*) FROM t').pluck().get()).toBe(1);
  });

  it('takes a BEGIN IMMEDIATE transaction the same way', async () => {
    const { database, other } = open({ busyTimeoutMs: 2000 });
    other.exec('BEGIN IMMEDIATE');
    setTimeout(() => other.exec('COMMIT'), 300);
    const { result, stallMs } = await longestStall(() =>
      immediateTransaction(
        database.db,
        async (trx) => {
          await sql`INSERT INTO t (v) VALUES (2)`.execute(trx);
          return 'committed';
        },
        0, // no tries of its own: the first BEGIN waits for the lock, or this fails
      ),
    );
    expect(result).toEqual({ status: 'fulfilled', value: 'committed' });
    expect(stallMs).toBeLessThan(150);
    expect(database.sqlite.prepare('SELECT v FROM t').pluck().all()).toEqual([2]);
  });

  it('gives up with SQLITE_BUSY once busyTimeoutMs has passed, without stalling the loop', async () => {
    const { database, other } = open({ busyTimeoutMs: 400 });
    other.exec('BEGIN IMMEDIATE');
    const { result, stallMs, tookMs } = await longestStall(() => sql`INSERT INTO t (v) VALUES (3)`.execute(database.db));
    other.exec('COMMIT');
    expect(result.status).toBe('rejected');
    expect((result as PromiseRejectedResult).reason).toMatchObject({ code: expect.stringMatching(/^SQLITE_BUSY/) });
    expect(tookMs).toBeGreaterThanOrEqual(390);
    expect(tookMs).toBeLessThan(2000);
    expect(stallMs).toBeLessThan(150);
    expect(database.sqlite.prepare('SELECT COUNT(*) FROM t').pluck().get()).toBe(0);
  });

  it('begins db.transaction() IMMEDIATE: a transaction that writes first waits for the lock at BEGIN', async () => {
    const { database, other } = open({ busyTimeoutMs: 2000 });
    other.exec('BEGIN IMMEDIATE');
    setTimeout(() => other.exec('COMMIT'), 300);
    const { result, stallMs } = await longestStall(() =>
      database.db.transaction().execute(async (trx) => {
        await sql`INSERT INTO t (v) VALUES (6)`.execute(trx);
      }),
    );
    // A deferred BEGIN would take no lock, and the INSERT inside the transaction would fail at once.
    expect(result.status).toBe('fulfilled');
    expect(stallMs).toBeLessThan(150);
    expect(database.sqlite.prepare('SELECT v FROM t').pluck().all()).toEqual([6]);
  });

  it('does not run a statement again inside a transaction: the busy error goes to the caller at once', async () => {
    const { database, other } = open({ busyTimeoutMs: 5000 });
    const started = performance.now();
    // A deferred transaction (a plain BEGIN, sent by hand) that read, then meets a commit of
    // another connection: in WAL mode its first write fails with SQLITE_BUSY_SNAPSHOT, and only
    // a new transaction can succeed, so running the INSERT again would only wait out the 5 s.
    const attempt = database.db.connection().execute(async (conn) => {
      await sql`BEGIN`.execute(conn);
      try {
        await sql`SELECT COUNT(*) FROM t`.execute(conn);
        other.exec('INSERT INTO t (v) VALUES (4)');
        await sql`INSERT INTO t (v) VALUES (5)`.execute(conn);
      } finally {
        await sql`ROLLBACK`.execute(conn);
      }
    });
    await expect(attempt).rejects.toMatchObject({ code: expect.stringMatching(/^SQLITE_BUSY/) });
    expect(performance.now() - started).toBeLessThan(1000);
    expect(database.sqlite.prepare('SELECT v FROM t').pluck().all()).toEqual([4]);
  });

  it('leaves the wait to SQLite for the CLI (busyWait: sqlite), whose commands also write through the bare connection', () => {
    const { database: cli } = open({ busyTimeoutMs: 5000, busyWait: 'sqlite' });
    expect(cli.sqlite.pragma('busy_timeout', { simple: true })).toBe(5000);
  });

  it('sets SQLite\'s own busy timeout to 0 for the server', () => {
    const { database: server } = open();
    expect(server.sqlite.pragma('busy_timeout', { simple: true })).toBe(0);
  });
});
