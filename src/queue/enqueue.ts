import type { Insertable, Kysely, Transaction } from 'kysely';
import type { Database, JobsTable } from '../db/schema.js';
import { isoTime as iso } from '../util/clock.js';
import { DEFAULT_MAX_ATTEMPTS } from './jobKinds.js';

export interface NewJob {
  kind: string;
  payload: unknown;
  eventId?: string | null;
  source?: string | null;
  runAt?: number;
  maxAttempts?: number;
  /** A job that starts out with attempts that already failed (a new event's fold from the processing cursor), and the last error. */
  failed?: { attempts: number; error: string };
}

/** The row of a new job: pending, or a first attempt that already failed (NewJob.failed). */
export function jobRow(job: NewJob, now: number): Insertable<JobsTable> & { event_id: string | null; source: string | null } {
  const at = iso(now);
  return {
    kind: job.kind,
    payload: JSON.stringify(job.payload),
    event_id: job.eventId ?? null,
    source: job.source ?? null,
    state: 'pending',
    run_at: job.runAt === undefined ? at : iso(job.runAt),
    attempts: 0,
    max_attempts: job.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
    created_at: at,
    updated_at: at,
    ...(job.failed ? { attempts: job.failed.attempts, last_error: job.failed.error } : {}),
  };
}

/** Enqueue inside the caller's transaction, so the job exists exactly when the write that needs it does. */
export async function enqueue(trx: Kysely<Database> | Transaction<Database>, job: NewJob, now: number): Promise<number> {
  const row = await trx.insertInto('jobs').values(jobRow(job, now)).returning('id').executeTakeFirstOrThrow();
  return row.id;
}
