import { sql, type ExpressionBuilder, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { writeInBatches, type BatchOutcome } from '../db/writeInBatches.js';

/** Rows per transaction: about 15 ms of write lock here, so ingest waits for at most that much. */
export const PRUNE_BATCH = 500;

/**
 * Finished jobs (state `done`) that finished before `cutoffIso`, deleted in short transactions.
 * Nothing reads a finished job again: what it did is in the tables it wrote (`deliveries`, the
 * result tables, `applications`), and a new cycle of the same work makes a new job. Jobs still to
 * run and dead letters are never touched. `maxRows` bounds one run (the workers prune a little at
 * a time); `pause` runs between transactions (the workers yield to the loop there), and `signal`
 * stops it between two (a shutdown). `dryRun` only counts (on a read-only connection too).
 * `onBatch` is told the rows deleted so far after each transaction (the CLI's progress).
 * Returns the rows deleted (counted, with dryRun), and whether `signal` stopped it before its end.
 */
export async function pruneFinishedJobs(
  db: Kysely<Database>,
  cutoffIso: string,
  opts: { maxRows?: number; dryRun?: boolean; pause?: () => Promise<void>; signal?: AbortSignal; onBatch?: (deleted: number) => void } = {},
): Promise<BatchOutcome> {
  const max = opts.maxRows ?? Number.MAX_SAFE_INTEGER;
  if (opts.dryRun) {
    const row = await db.selectFrom('jobs').select(sql<number>`count(*)`.as('n')).where(finishedBefore(cutoffIso)).executeTakeFirst();
    return { written: Math.min(Number(row?.n ?? 0), max), stopped: false };
  }
  if (max <= 0) return { written: 0, stopped: false };
  let deleted = 0;
  const r = await writeInBatches(
    db,
    async (trx) => {
      const limit = Math.min(PRUNE_BATCH, max - deleted);
      const n = Number((await pruneBatch(trx, cutoffIso, limit).executeTakeFirst()).numDeletedRows);
      return { written: n, last: n < limit || deleted + n >= max };
    },
    {
      pause: opts.pause,
      signal: opts.signal,
      onBatch: (written) => {
        // Not again after a last batch that found nothing (a count that is a multiple of the batch):
        // its line repeated the one before.
        if (written > deleted || written === 0) opts.onBatch?.(written);
        deleted = written;
      },
    },
  );
  // A signal during the pause after a full batch stops it before the batch that would have found
  // nothing left: it ended all the same (not "part-way", told to run again for nothing). Only
  // after a batch: a signal aborted before the call (the receiver's sweep that began as it
  // stopped) reads nothing, its database may be closing. A failed look leaves it "stopped", as
  // before the look was added (an error here lost the count of the batches committed).
  if (r.stopped && deleted > 0 && deleted < max) {
    const left = await db
      .selectFrom('jobs')
      .select('id')
      .where(finishedBefore(cutoffIso))
      .limit(1)
      .executeTakeFirst()
      .then(
        (row) => row !== undefined,
        () => true,
      );
    if (!left) return { written: r.written, stopped: false };
  }
  return r;
}

/**
 * One batch's DELETE, through jobs_ready (state, run_at) bounded by the cutoff: a job marked done
 * gets run_at = finished_at (JobQueue.completeMany), so the range holds exactly the jobs to
 * delete. Without the run_at bound, a sweep that found fewer than a batch read on through every
 * finished job of the retention window while holding the write lock (283 ms at 1.4 million:
 * ingest stalled as long). finished_at stays as a filter for jobs finished before run_at was set
 * so (a delivery due long before it was sent is read by each sweep until it is old enough).
 */
export function pruneBatch(db: Kysely<Database>, cutoffIso: string, limit: number) {
  return db
    .deleteFrom('jobs')
    .where('id', 'in', (eb) =>
      eb.selectFrom('jobs').select('id').where(finishedBefore(cutoffIso)).orderBy('run_at').limit(limit),
    );
}

/** The jobs a prune deletes: done, and finished (and so due: see pruneBatch) before the cutoff. */
const finishedBefore = (cutoffIso: string) => (eb: ExpressionBuilder<Database, 'jobs'>) =>
  eb.and([eb('state', '=', 'done'), eb('run_at', '<', cutoffIso), eb('finished_at', '<', cutoffIso)]);
