import BetterSqlite3 from 'better-sqlite3';
import { beforeEach, describe, expect, it } from 'vitest';
import type { OpenDatabase } from '../../src/db/openDatabase.js';
import { enqueue, JobQueue } from '../../src/queue/JobQueue.js';
import { Worker } from '../../src/queue/Worker.js';
import { RetryAfterError } from '../../src/hiring/errors.js';
import { SourcePauses } from '../../src/processing/SourcePauses.js';
import { createLogger } from '../../src/observability/logger.js';
import { ManualClock } from '../../src/util/clock.js';
import { scratchDatabase } from '../helpers/database.js';

let database: OpenDatabase;
const T0 = Date.parse('2026-11-01T12:00:00Z');
const clock = new ManualClock(T0);
beforeEach(() => {
  database = scratchDatabase();
  clock.set(T0);
});

const HOUR = 3_600_000;

/** A claim of `w` while another connection holds the write lock: it fails (SQLITE_BUSY); the lock is free after. */
async function claimMeetsHeldLock(w: Worker): Promise<void> {
  const other = new BetterSqlite3(database.sqlite.name);
  try {
    other.exec('BEGIN IMMEDIATE');
    await expect(w.runUntilIdle()).rejects.toThrow(/busy|locked/i);
    other.exec('COMMIT');
  } finally {
    if (other.inTransaction) other.exec('ROLLBACK');
    other.close();
  }
}

describe('the wall clock steps back while another process holds the write lock', () => {
  it('a claim that cannot move the waiting jobs back (SQLITE_BUSY) leaves the step to the next claim: they keep the wait they had left, not an hour more', async () => {
    const q = new JobQueue(database.db, clock);
    let runs = 0;
    const w = new Worker({
      queue: q,
      clock,
      logger: createLogger('silent'),
      gate: new SourcePauses(database.db, clock),
      handlers: {
        k: async () => {
          runs++;
          throw new Error('flaky');
        },
      },
      backoff: { baseMs: 10_000, capMs: 10_000, jitter: 0 },
    });
    const id = await enqueue(database.db, { kind: 'k', payload: {}, maxAttempts: 5 }, T0);
    // Failed at T0 on the fast clock: due again 10 s later, at T0 + 10 s.
    expect(await w.runUntilIdle()).toBe(1);
    const runAt = async () => Date.parse((await database.db.selectFrom('jobs').select('run_at').where('id', '=', id).executeTakeFirstOrThrow()).run_at);
    expect(await runAt()).toBe(T0 + 10_000);

    // NTP sets the clock an hour back; the next claim finds the write lock held elsewhere.
    clock.set(T0 + 1_000 - HOUR);
    await claimMeetsHeldLock(w);
    // The lock is free at the next claim: the job moves back by the step the failed claim saw (an hour less the second between the two claims), as it would have then.
    clock.advance(1_000);
    expect(await w.runUntilIdle()).toBe(0);
    expect(await runAt()).toBe(T0 + 11_000 - HOUR);
    clock.advance(9_000);
    expect(await w.runUntilIdle()).toBe(1);
    expect(runs).toBe(2);
  });

  it("a Retry-After told on the new clock while the step's moves wait for the lock is not moved back by that step at the next claim", async () => {
    const q = new JobQueue(database.db, clock);
    const ran: string[] = [];
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const w = new Worker({
      queue: q,
      clock,
      logger: createLogger('silent'),
      gate: new SourcePauses(database.db, clock),
      concurrency: 1,
      handlers: {
        k: async (job) => {
          const { name } = JSON.parse(job.payload) as { name: string };
          ran.push(name);
          if (name !== 'x') return;
          await held;
          // The source's service answers 429, Retry-After 60 s, on the clock as it is now.
          throw new RetryAfterError('HTTP 429', 60_000, { throttlesSource: true });
        },
      },
    });
    await enqueue(database.db, { kind: 'k', payload: { name: 'x' }, source: 's', maxAttempts: 5 }, T0);
    // x is claimed at T0 and runs (its request in flight) while the rest happens.
    const first = w.runUntilIdle();
    for (let i = 0; i < 100 && ran.length === 0; i++) await new Promise((r) => setImmediate(r));
    expect(ran).toEqual(['x']);
    // NTP sets the clock an hour back; a claim beside x finds the write lock held elsewhere.
    clock.set(T0 + 1_000 - HOUR);
    await enqueue(database.db, { kind: 'k', payload: { name: 'y' }, source: 's', maxAttempts: 5 }, clock.now());
    await claimMeetsHeldLock(w);
    // x's 429 holds the source for 60 s from now; the next claim (first's, once x settled) moves
    // the jobs the failed claim could not, but not this hold, which was set on the clock as it is.
    release();
    await first;
    expect(ran).toEqual(['x']);
    clock.advance(61_000);
    expect(await w.runUntilIdle()).toBeGreaterThanOrEqual(1);
    expect(ran).toContain('y');
  });
});
