import BetterSqlite3 from 'better-sqlite3';
import { beforeEach, describe, expect, it } from 'vitest';
import type { OpenDatabase } from '../../src/db/openDatabase.js';
import { enqueue, JobQueue } from '../../src/queue/JobQueue.js';
import { Worker } from '../../src/queue/Worker.js';
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
    const other = new BetterSqlite3(database.sqlite.name);
    try {
      other.exec('BEGIN IMMEDIATE');
      await expect(w.runUntilIdle()).rejects.toThrow(/busy|locked/i);
      other.exec('COMMIT');
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
    }
    // The lock is free at the next claim: the job moves back by the step the failed claim saw (an hour less the second between the two claims), as it would have then.
    clock.advance(1_000);
    expect(await w.runUntilIdle()).toBe(0);
    expect(await runAt()).toBe(T0 + 11_000 - HOUR);
    clock.advance(9_000);
    expect(await w.runUntilIdle()).toBe(1);
    expect(runs).toBe(2);
  });
});
