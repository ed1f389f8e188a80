import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { until, waitFor } from '../helpers/waitFor.js';

afterEach(() => {
  vi.useRealTimers();
});

const GIVEN_UP = /given up now, and their events settled/;

const PRUNED = /finished jobs past JOB_RETENTION_DAYS deleted/;
const OLD_JOBS = 9_000;

/** 9,000 jobs finished long ago: a prune deletes them in 18 transactions of 500, with a 10 ms pause after each. */
function insertOldFinishedJobs(db: BetterSqlite3.Database): void {
  const at = '2020-01-01T00:00:00.000Z';
  const insert = db.prepare(`INSERT INTO jobs (kind, payload, event_id, state, run_at, attempts, max_attempts, created_at, updated_at, finished_at)
      VALUES ('process_event', '{}', ?, 'done', ?, 1, 5, ?, ?, ?)`);
  db.transaction(() => {
    for (let i = 0; i < OLD_JOBS; i++) insert.run(`evt-old-${i}`, at, at, at, at);
  })();
}

/** Waits for the prune's line, lets a second prune (had one run beside it) end and say so too, and checks none is left. */
async function prunedAll(r: TestReceiver, db: BetterSqlite3.Database): Promise<void> {
  await waitFor(() => r.logs.lines.some((l) => PRUNED.test(String(l.msg))), 'the prune done');
  // Bounded: 30 turns of 20 ms.
  for (let i = 0; i < 30; i++) await new Promise((res) => setTimeout(res, 20));
  expect(db.prepare("SELECT count(*) FROM jobs WHERE state = 'done'").pluck().get()).toBe(0);
}

/**
 * A read dead-lettered after the workers' start, whose follow-up (given_up, the settle) never
 * committed: the next sweep gives it up. Returns whether its event is settled yet.
 */
function strandRead(db: BetterSqlite3.Database, id: string): () => boolean {
  const at = '2020-01-01T00:00:00.000Z';
  db.prepare("INSERT INTO event_processing (event_id, state, resource, updated_at) VALUES (?, 'awaiting_result', 'interview', ?)").run(id, at);
  db.prepare(`INSERT INTO jobs (kind, payload, event_id, state, run_at, attempts, max_attempts, last_error, created_at, updated_at, finished_at)
      VALUES ('fetch_result', ?, ?, 'dead', ?, 3, 3, 'HTTP 503', ?, ?, ?)`).run(JSON.stringify({ event_id: id, application_id: `app-${id}`, resource: 'interview' }), id, at, at, at, at);
  return () => db.prepare('SELECT state FROM event_processing WHERE event_id = ?').pluck().get(id) === 'settled';
}

describe("the workers' sweep every 5 minutes", () => {
  it('does not start while the one before it is still running: the next period finds it in flight and lets it be', async () => {
    // Only the sweeps' interval (and the file watch's) is driven here; the rest runs on real timers.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '1' });
    const other = new BetterSqlite3(r.dbPath);
    try {
      const settled = strandRead(other, 'evt-s1');
      // The first sweep is due, and runs until its first write waits for the connection; the
      // next period comes while it is still in flight (as when a sweep takes longer than 5 minutes).
      vi.advanceTimersByTime(5 * 60_000);
      vi.advanceTimersByTime(5 * 60_000);
      await waitFor(settled, 'the stranded read given up');
      // Let a second sweep, had one started, finish its work too (bounded: 20 turns of 20 ms).
      for (let i = 0; i < 20; i++) await new Promise((res) => setTimeout(res, 20));
    } finally {
      other.close();
      await r.close();
    }
    const sweeps = r.logs.lines.filter((l) => GIVEN_UP.test(String(l.msg)));
    expect(sweeps.map((l) => l.reads)).toEqual([1]);
  }, 30_000);

  it('runs again each 5 minutes once the one before it has ended: a read stranded after the first sweep is given up by the next', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '1' });
    const other = new BetterSqlite3(r.dbPath);
    try {
      for (const id of ['evt-p1', 'evt-p2']) {
        const settled = strandRead(other, id);
        // One period, not more: the sweep comes every 5 minutes.
        vi.advanceTimersByTime(5 * 60_000);
        await waitFor(settled, `${id} given up by the sweep of its period`);
        // Its line, then a few turns for its prune (nothing to delete) to end before the next period.
        await waitFor(() => r.logs.lines.filter((l) => GIVEN_UP.test(String(l.msg))).length === (id === 'evt-p1' ? 1 : 2), 'its line');
        for (let i = 0; i < 10; i++) await new Promise((res) => setTimeout(res, 20));
      }
    } finally {
      other.close();
      await r.close();
    }
    expect(r.logs.lines.filter((l) => GIVEN_UP.test(String(l.msg))).map((l) => l.reads)).toEqual([1, 1]);
  }, 30_000);
  it("counts a sweep's prune as part of it: a period that comes while the prune still runs starts no second prune beside it", async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '1' });
    const other = new BetterSqlite3(r.dbPath);
    try {
      // The prune at the workers' start finds nothing; let it end before the old jobs are there.
      for (let i = 0; i < 20; i++) await new Promise((res) => setTimeout(res, 20));
      // The sweep's prune of these runs for well over 170 ms.
      insertOldFinishedJobs(other);
      const settled = strandRead(other, 'evt-q1');
      vi.advanceTimersByTime(5 * 60_000);
      // The sweep has given the read up: its prune begins now. The next period comes during it.
      await until(() => r.logs.lines.some((l) => GIVEN_UP.test(String(l.msg))), 'the sweep given the read up', 10_000, 1);
      expect(settled()).toBe(true);
      vi.advanceTimersByTime(5 * 60_000);
      await prunedAll(r, other);
    } finally {
      other.close();
      await r.close();
    }
    expect(r.logs.lines.filter((l) => PRUNED.test(String(l.msg))).map((l) => l.jobs)).toEqual([OLD_JOBS]);
  }, 30_000);

  it('counts the prune at the workers\' start too: a sweep that comes while it still runs prunes after it, not beside it', async () => {
    // A database with a long history before the start: the start-up prune has 9,000 finished jobs to delete.
    const first = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '0' });
    const t = tempDir();
    const keep = join(t.dir, 'kept.db');
    await first.app.database.sqlite.backup(keep);
    await first.close();
    const seed = new BetterSqlite3(keep);
    insertOldFinishedJobs(seed);
    seed.close();

    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '1', DATABASE_PATH: keep });
    const other = new BetterSqlite3(keep);
    try {
      // The start-up prune runs (18 transactions with a 10 ms pause after each); the first sweep comes during it.
      vi.advanceTimersByTime(5 * 60_000);
      await prunedAll(r, other);
    } finally {
      other.close();
      await r.close();
      t.cleanup();
    }
    // One prune deleted them all: the sweep's came after it and found none.
    expect(r.logs.lines.filter((l) => PRUNED.test(String(l.msg))).map((l) => l.jobs)).toEqual([OLD_JOBS]);
  }, 30_000);
});
