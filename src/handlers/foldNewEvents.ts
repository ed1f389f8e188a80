import { sql, type Kysely } from 'kysely';
import { directStatements } from '../db/directStatements.js';
import type { Database } from '../db/schema.js';
import type { Logger } from '../observability/logger.js';
import { backoffDelay, JOB_BACKOFF } from '../queue/backoff.js';
import { immediateTransaction, preparedJobWritesOn } from '../queue/JobQueue.js';
import { JobKind } from '../queue/jobKinds.js';
import type { WorkSource } from '../queue/Worker.js';
import { isoTime } from '../util/clock.js';
import { foldEvents, PROCESS_EVENT_BATCH } from './processEvent.js';
import type { ProcessingContext } from './ProcessingContext.js';
import { failureMessage } from '../queue/failureMessage.js';

/** How a new event's fold ended: folded, or handed to the queue as a process_event job to retry. */
export type NewEventOutcome = 'done' | 'retry';

export interface NewEventFolderOptions {
  logger: Logger;
  /** After the commit, once per event taken (metrics, waking the fetcher). */
  onFolded?: (outcome: NewEventOutcome) => void;
}

/** Events past the cursor: how many, and when the oldest was stored. */
export interface ProcessingBacklog {
  events: number;
  oldestReceivedAt: string | null;
}

/**
 * Events stored but not yet taken by processing, and when the oldest of them was stored. Two
 * index seeks, whatever the backlog: new events take consecutive rowids past the cursor (the
 * ingest insert gives them), so the count is the distance from the cursor to the newest rowid.
 */
export async function processingBacklog(db: Kysely<Database>): Promise<ProcessingBacklog> {
  const row = (
    await sql<{ events: number; oldest: string | null }>`SELECT
        max(0, coalesce((SELECT max(rowid) FROM events), 0) - c.last_event_rowid) AS events,
        (SELECT received_at FROM events WHERE rowid > c.last_event_rowid ORDER BY rowid LIMIT 1) AS oldest
      FROM processing_cursor c`.execute(db)
  ).rows[0];
  return { events: Number(row?.events ?? 0), oldestReceivedAt: row?.oldest ?? null };
}

const NEXT_EVENT = sql<{ n: number }>`SELECT 1 AS n FROM events WHERE rowid > (SELECT last_event_rowid FROM processing_cursor) LIMIT 1`;
const EVENTS_PAST_CURSOR = `SELECT rowid AS seq, id, source FROM events
  WHERE rowid > (SELECT last_event_rowid FROM processing_cursor) ORDER BY rowid LIMIT ?`;

/**
 * Folds new events in the order they were stored, from the processing
 * cursor (migration 006), so the ingest transaction needs to write nothing
 * but the event. One run is one BEGIN IMMEDIATE transaction: the events after
 * the cursor (up to `limit`), each folded in its own savepoint, and the
 * cursor moved past them; a crash before the commit leaves the cursor where
 * it was and the folds undone. An event whose fold fails is handed to the
 * queue in the same transaction, as a process_event job whose first attempt
 * failed: retried with backoff, dead-lettered past max_attempts (or at once
 * when its retry fails for good), listed and retried by `dead-letters` like
 * any job.
 *
 * Commits are serialized in SQLite and the ingest insert gives each event
 * the next rowid past both the newest event and the cursor, under the write
 * lock, so an event committed after this read always lands past the cursor,
 * even after the newest events were deleted.
 */
export function createNewEventFolder(ctx: ProcessingContext, opts: NewEventFolderOptions): WorkSource {
  return {
    async run(limit = PROCESS_EVENT_BATCH): Promise<number> {
      // A read first: an idle poll (events stored by another process) takes no write lock.
      if ((await NEXT_EVENT.execute(ctx.db)).rows.length === 0) return 0;
      const now = ctx.clock.now();
      const failures: { jobId: number; eventId: string; error: string; retryInMs: number }[] = [];
      const taken = await immediateTransaction(ctx.db, async (trx) => {
        failures.length = 0;
        const q = directStatements(ctx.sqlite, trx);
        const events = q.all<{ seq: number; id: string; source: string }>(EVENTS_PAST_CURSOR, Math.max(1, limit));
        if (events.length === 0) return 0;
        const results = await foldEvents(ctx, trx, events.map((e) => ({ eventId: e.id })), now);
        for (const [i, r] of results.entries()) {
          if (r === undefined || !('error' in r)) continue;
          const e = events[i]!;
          const error = failureMessage(r.error);
          const retryInMs = backoffDelay(1, JOB_BACKOFF);
          const jobId = preparedJobWritesOn(ctx.sqlite).enqueue(
            { kind: JobKind.processEvent, payload: { event_id: e.id }, eventId: e.id, source: e.source, runAt: now + retryInMs, failed: { attempts: 1, error } },
            now,
          );
          failures.push({ jobId, eventId: e.id, error, retryInMs });
        }
        q.run('UPDATE processing_cursor SET last_event_rowid = ?, updated_at = ? WHERE id = 1', events.at(-1)!.seq, isoTime(now));
        return events.length;
      });
      for (const f of failures) {
        opts.logger
          .child({ job_id: f.jobId, kind: JobKind.processEvent, event_id: f.eventId, attempt: 1 })
          .warn({ err: f.error, retry_in_ms: f.retryInMs }, 'job failed; will retry');
        opts.onFolded?.('retry');
      }
      for (let i = failures.length; i < taken; i++) opts.onFolded?.('done');
      return taken;
    },
  };
}
