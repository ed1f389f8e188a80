import type { Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import type { ClaimedJob } from './JobQueue.js';

/**
 * What a handler returns: nothing when the job is done, or
 * - `{ rescheduleAt, note? }`: run again later (polling), without it counting as a failure;
 * - `untested: true`, on its own (done) or with a reschedule: the job sent no request to its
 *   source (it waited for the poll spacing, or reused a stored result), so it does not prove
 *   that a paused source's key works again.
 */
export type HandlerResult = void | { untested: true } | { rescheduleAt: number; note?: string; untested?: true };

/**
 * Marks a failure that came before any request to the job's source (nothing left to read, an id
 * no request can name): like an `untested` result, it says nothing of a paused source's key, so a
 * probe spent on it is due again at once instead of the source's reads waiting a whole period.
 */
export function failedBeforeRequest<E extends Error>(err: E): E {
  return Object.assign(err, { untested: true });
}
export type JobHandler = (job: ClaimedJob) => Promise<HandlerResult>;

/** One job's result in a batch: done (undefined), run again later (as HandlerResult), or the error it failed with. */
export type BatchItemResult = HandlerResult | { error: unknown };

export interface BatchOutcome {
  /** One per job, in the order the jobs were given. */
  results: BatchItemResult[];
  /**
   * Writes that belong to the jobs that are done (a sink's delivery records): run in the
   * transaction that completes them, with only those whose lease still held.
   */
  onComplete?: (trx: Transaction<Database>, completed: ClaimedJob[]) => Promise<void>;
}

/**
 * Runs several claimed jobs of one kind at once (a sink writing many messages
 * with one write and fsync). The worker completes the done ones, with
 * `onComplete`, in one transaction; each other job is rescheduled, backed off
 * or dead-lettered on its own, exactly as a JobHandler's job would be.
 */
export interface BatchJobHandler {
  /** Jobs per call at most; 1 runs each job on its own (but still records and completes it in one transaction). */
  maxJobs: number;
  run(jobs: ClaimedJob[]): Promise<BatchOutcome>;
}

/** A job's result says it is done: no reschedule, no error. */
export const isDone = (r: BatchItemResult): boolean => r === undefined || !('rescheduleAt' in r || 'error' in r);

/**
 * A job's result says it sent no request to its source (HandlerResult's `untested`).
 * A failure before any request (failedBeforeRequest) as well: it is never done, so only the probe review sees it.
 */
export const isUntested = (r: BatchItemResult): boolean =>
  r !== undefined && (('untested' in r && r.untested === true) || ('error' in r && (r.error as { untested?: unknown } | null)?.untested === true));
