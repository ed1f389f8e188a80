import { renameSync, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Worker } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { CheckpointProblem, RestartPauses, WalBlocked } from '../../src/db/checkpointer.js';
import { openDatabase, type OpenDatabase } from '../../src/db/openDatabase.js';
import { startReceiver, tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { until, waitFor } from '../helpers/waitFor.js';

let cleanup: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanup.reverse()) await c();
  cleanup = [];
});

/** A receiver's file (schema_migrations) with a table to write, at `path`. */
function seed(path: string): void {
  const s = new BetterSqlite3(path);
  s.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
  s.exec('CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)');
  s.close();
}

/** 1,000 rows of 1 KB, committed on the ingest connection (wal_autocheckpoint = 0: only the thread copies them into the file). */
function write(database: OpenDatabase): void {
  database.ingestSqlite
    .prepare('INSERT INTO t (v) SELECT hex(randomblob(512)) FROM (WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000) SELECT i FROM n)')
    .run();
}

/**
 * Ends the database's running checkpointer thread without an error of its own (as a thread killed
 * for want of memory would). No public surface ends it: the test reaches into OffLoopReads for it.
 */
async function endThread(database: OpenDatabase): Promise<void> {
  const running = (database.offLoop as unknown as { worker: Worker | null }).worker;
  expect(running).not.toBeNull();
  await running!.terminate();
}

describe('the checkpointer thread, when it ends unasked', () => {
  it('is started again after a pause: checkpoints copy commits into the file again, off-loop reads are answered again, and it says it runs', async () => {
    const t = tempDir();
    cleanup.push(t.cleanup);
    const path = join(t.dir, 'r.db');
    const other = join(t.dir, 'other.db');
    const aside = join(t.dir, 'aside.db');
    seed(path);
    seed(other);

    const problems: CheckpointProblem[] = [];
    let swapped = true;
    const database = openDatabase(path, {
      migrate: false,
      checkpointer: { intervalMs: 20, restartPauses: { firstMs: 100, maxMs: 400, steadyMs: 60_000 } },
      onCheckpointProblem: (p) => {
        problems.push(p);
        // The first thread has ended (another file at the path): the opened file put back before the next starts.
        if (p.stopped && swapped) {
          renameSync(path, other);
          renameSync(aside, path);
          swapped = false;
        }
      },
    });
    cleanup.push(() => database.close());
    // Another file at the path before the booting thread opens it: the thread ends at its identity check.
    renameSync(path, aside);
    renameSync(other, path);

    await waitFor(() => problems.some((p) => p.restarted), 'the thread said to run again');
    expect(problems[0]).toMatchObject({ stopped: true, message: expect.stringMatching(/no longer the one the receiver opened/) });
    expect(problems.find((p) => p.restarted)).toMatchObject({ restarted: 1, stopped: false });

    // Checkpoints run: the commits reach the database file itself (1 MB and more), and the WAL is started over.
    const before = statSync(path).size;
    write(database);
    await waitFor(() => statSync(path).size >= before + 1_000_000, 'the commits checkpointed into the file');
    // Reads asked of the thread are answered by the new one (null: read on the loop instead).
    expect(await database.offLoop.all('SELECT COUNT(*) AS n FROM t')).toEqual([{ n: 1000 }]);
  });

  /**
   * A database whose file is replaced at its path for good before its thread opens it (as after a
   * restore under a running receiver): every thread ends. When each ended (performance.now()), and
   * its close (once).
   */
  function replacedForGood(restartPauses: RestartPauses) {
    const t = tempDir();
    cleanup.push(t.cleanup);
    const path = join(t.dir, 'r.db');
    const other = join(t.dir, 'other.db');
    seed(path);
    seed(other);
    const stops: number[] = [];
    const database = openDatabase(path, {
      migrate: false,
      checkpointer: { intervalMs: 20, restartPauses },
      onCheckpointProblem: (p) => {
        if (p.stopped) stops.push(performance.now());
      },
    });
    let closing: Promise<void> | null = null;
    const close = () => (closing ??= database.close());
    cleanup.push(close);
    renameSync(path, join(t.dir, 'aside.db'));
    renameSync(other, path);
    return { stops, close };
  }

  it('keeps being started while it keeps ending, at growing pauses, and none after the database is closed', async () => {
    const { stops, close } = replacedForGood({ firstMs: 50, maxMs: 200, steadyMs: 60_000 });
    await waitFor(() => stops.length >= 5, 'five threads ended');
    // Pauses of 50, 100, 200, 200 ms (plus each thread's boot): each at least its pause, the later ones longer.
    const gaps = stops.slice(1, 5).map((s, i) => s - stops[i]!);
    expect(gaps[0]).toBeGreaterThanOrEqual(45);
    expect(gaps[1]).toBeGreaterThanOrEqual(95);
    expect(gaps[2]).toBeGreaterThanOrEqual(195);
    expect(gaps[3]).toBeGreaterThanOrEqual(195);

    await close();
    const after = stops.length;
    // Longer than the longest pause and a thread's boot: none started after the close.
    await new Promise((r) => setTimeout(r, 600));
    expect(stops.length).toBe(after);
  });

  it('after a thread that ran steadyMs, the next pause is the first one again (here every thread counts as steady: steadyMs 0)', async () => {
    const { stops } = replacedForGood({ firstMs: 300, maxMs: 60_000, steadyMs: 0 });
    // 300 ms each (plus a thread's boot). Doubled, they would be 300, 600, 1,200 and 2,400 ms.
    await waitFor(() => stops.length >= 5, 'five threads ended', 15_000);
    const gaps = stops.slice(1, 5).map((s, i) => s - stops[i]!);
    for (const gap of gaps) expect(gap).toBeGreaterThanOrEqual(295);
    // The fourth is not the doubled 2,400 ms (a thread's boot takes far less than the 2,100 ms between).
    expect(gaps[3]).toBeLessThan(2400);
  });

  it('says how many threads ended since one last ran: each end and start again is one; the close is no end', async () => {
    const t = tempDir();
    cleanup.push(t.cleanup);
    const path = join(t.dir, 'r.db');
    seed(path);
    const problems: CheckpointProblem[] = [];
    const database = openDatabase(path, {
      migrate: false,
      checkpointer: { intervalMs: 20, restartPauses: { firstMs: 50, maxMs: 200, steadyMs: 60_000 } },
      onCheckpointProblem: (p) => problems.push(p),
    });
    let closing: Promise<void> | null = null;
    const close = () => (closing ??= database.close());
    cleanup.push(close);
    const restarts = () => problems.filter((p) => p.restarted);
    for (let n = 1; n <= 2; n++) {
      await endThread(database);
      await waitFor(() => restarts().length === n, `the thread said to run again (${n})`);
    }
    expect(restarts().map((p) => p.restarted)).toEqual([1, 1]);
    // The end a close asks for is none of these: said neither as a stop nor followed by another thread.
    await close();
    expect(problems.filter((p) => p.stopped)).toHaveLength(2);
  });
});

describe('a read asked of the checkpointer thread when it ends', () => {
  it('is answered null at its end (the asker reads on its own connection), not after the answer bound', async () => {
    const t = tempDir();
    cleanup.push(t.cleanup);
    const path = join(t.dir, 'r.db');
    seed(path);
    const database = openDatabase(path, {
      migrate: false,
      // An answer bound far past the test's wait: only the thread's end can answer the read in time.
      checkpointer: { intervalMs: 20, readAnswerMs: 60_000, restartPauses: { firstMs: 60_000, maxMs: 60_000, steadyMs: 60_000 } },
      onCheckpointProblem: () => {},
    });
    cleanup.push(() => database.close());
    expect(await database.offLoop.all('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    // A read that walks a million rows (a fraction of a second on the thread): pending when the thread ends.
    const slow = database.offLoop.all('WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000000) SELECT COUNT(*) AS c FROM n');
    let answer: unknown = 'pending';
    void slow.then((rows) => (answer = rows));
    void endThread(database);
    await waitFor(() => answer !== 'pending', 'the pending read answered', 15_000);
    expect(answer).toBeNull();
    // Until the next thread starts (a minute here), reads are answered null at once.
    expect(await database.offLoop.all('SELECT 1 AS one')).toBeNull();
  });
});

describe('the checkpointer thread ending while the WAL cannot be reset', () => {
  /**
   * A database whose thread reports (every 100 ms) the WAL blocked: a reader pins its snapshot
   * while 1 MB is committed past the 256 KB bound. Another thread starts 50 ms after one ends.
   */
  async function blockedWal() {
    const t = tempDir();
    cleanup.push(t.cleanup);
    const path = join(t.dir, 'r.db');
    seed(path);
    const problems: CheckpointProblem[] = [];
    const blocked: WalBlocked[] = [];
    const database = openDatabase(path, {
      migrate: false,
      checkpointer: { intervalMs: 20, maxWalBytes: 256 * 1024, blockedReportMs: 100, restartPauses: { firstMs: 50, maxMs: 200, steadyMs: 60_000 } },
      onCheckpointProblem: (p) => problems.push(p),
      onWalBlocked: (b) => blocked.push(b),
    });
    cleanup.push(() => database.close());
    expect(await database.offLoop.all('SELECT 1 AS one')).toEqual([{ one: 1 }]);
    const reader = new BetterSqlite3(path, { readonly: true });
    cleanup.push(() => reader.close());
    reader.prepare('BEGIN').run();
    reader.prepare('SELECT COUNT(*) FROM t').pluck().get();
    await until(() => {
      try {
        write(database);
      } catch (err) {
        // The checkpointer's RESTART holds the write lock a moment: the next round commits.
        if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
      }
      return blocked.some((b) => b.since !== null) || undefined;
    }, 'the WAL reported blocked');
    return { database, problems, blocked, reader };
  }

  it('the next thread goes on from the report: the end is said though the reader let go before it started, so receiver_sqlite_wal_blocked_seconds does not stay up', async () => {
    const { database, problems, blocked, reader } = await blockedWal();

    await endThread(database);
    // The reader lets go before the next thread starts (a pause of 50 ms): that thread never sees the block itself.
    reader.prepare('COMMIT').run();
    await waitFor(() => problems.some((p) => p.restarted === 1), 'the next thread said to run');
    expect(problems[0]).toMatchObject({ stopped: true, message: expect.stringMatching(/^the checkpointer thread ended \(exit code \d+\)$/) });
    // Its first ticks reset the WAL (no reader left) and say the block has ended.
    await waitFor(() => blocked.at(-1)!.since === null, 'the end of the block said by the next thread', 10_000);
  });
  it('goes on from the length the last thread reported, by the monotonic clock: a wall clock set back meanwhile does not start the block over', async () => {
    // The reader holds its snapshot for the whole test.
    const { database, problems, blocked } = await blockedWal();
    // Reported again every 100 ms: blocked for 500 ms at least by the thread's (monotonic) clock.
    await waitFor(() => blocked.at(-1)!.blockedMs >= 500, 'a report of 500 ms blocked');
    const lastMs = blocked.at(-1)!.blockedMs;

    // The wall clock of the receiver's thread set back an hour (NTP stepping a restored VM's clock),
    // then the thread ends.
    vi.useFakeTimers({ toFake: ['Date'], now: Date.now() - 3_600_000 });
    try {
      await endThread(database);
      await waitFor(() => problems.some((p) => p.restarted === 1), 'the next thread said to run');
      const seen = blocked.length;
      // The reader still holds the WAL: the next thread's next report goes on from the last.
      await waitFor(() => blocked.length > seen, 'a report of the next thread', 10_000);
    } finally {
      vi.useRealTimers();
    }
    const next = blocked.at(-1)!;
    expect(next.since).not.toBeNull();
    expect(next.blockedMs).toBeGreaterThanOrEqual(lastMs);
  });
});

describe('a receiver whose checkpointer thread ends', () => {
  it('logs it at error, counts it in receiver_wal_checkpoint_errors_total, starts another a second later and says so at info', async () => {
    const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '0' });
    cleanup.push(() => r.close());
    const line = (msg: RegExp, level: number) => r.logs.lines.find((l) => l.level === level && msg.test(String(l.msg)));
    await endThread(r.app.database);
    expect(await until(() => line(/^WAL checkpointer stopped/, 50), 'the stop logged')).toMatchObject({ err: expect.stringMatching(/^the checkpointer thread ended \(exit code \d+\)$/) });
    expect(line(/^WAL checkpointer running again/, 30)).toBeUndefined();
    const text = await (await fetch(`${r.url}/metrics`)).text();
    expect(/^receiver_wal_checkpoint_errors_total\{code="error"\} 1$/m.test(text)).toBe(true);
    expect(await until(() => line(/^WAL checkpointer running again/, 30), 'the new thread logged', 10_000)).toMatchObject({ stopped_threads: 1 });
  });
});
