import type { Transaction } from 'kysely';
import { directStatements } from '../db/directStatements.js';
import type { Database } from '../db/schema.js';
import type { HiringResource } from '../hiring/types.js';
import { NOT_FOUND_MARK } from '../hiring/outcomeToError.js';
import { asObject, type JsonRecord } from '../util/json.js';
import { immediateTransaction, preparedJobWritesOn, type ClaimedJob } from '../queue/JobQueue.js';
import { JobKind } from '../queue/jobKinds.js';
import type { BatchItemResult, BatchJobHandler } from '../queue/Worker.js';
import { rebuildApplication } from '../processing/rebuildApplication.js';
import { RESOURCE_OF_EVENT, RESULT_TABLE } from '../processing/resources.js';
import { deletionDigest } from '../util/resultDigest.js';
import { settleEvent, type ProcessingContext } from './ProcessingContext.js';

/** Events folded per transaction at most: new ones from the cursor, or process_event jobs. */
export const PROCESS_EVENT_BATCH = 8;

/**
 * First step for every stored event: fold it into its application's row, and
 * either settle it (nothing to fetch) or hand it to a fetch_result job for
 * its scoring read. New events are folded from the processing cursor
 * (foldNewEvents.ts); this handler runs the process_event jobs: folds that
 * failed there and are retried, and events queued again by `replay`.
 *
 * The jobs of a claim are processed together in one transaction, each inside
 * its own savepoint: an event that fails rolls back only its own writes and
 * is retried or dead-lettered on its own, while the others commit. The jobs
 * are marked done in the worker's next transaction: a crash in between runs
 * the folds again (they are idempotent; a second fetch_result job for the
 * same result still waits for the 30 s poll slot).
 * Measured: one transaction per event made processing, not ingest, the
 * limit of a receiver with workers (bench/README.md).
 */
export function createProcessEventHandler(ctx: ProcessingContext, maxJobs = PROCESS_EVENT_BATCH): BatchJobHandler {
  return {
    maxJobs,
    async run(jobs: ClaimedJob[]) {
      const now = ctx.clock.now();
      // BEGIN IMMEDIATE: the write lock is taken before the first read. A deferred BEGIN could
      // read, then fail every later write of the batch with SQLITE_BUSY_SNAPSHOT once another
      // process (a separate `work`'s serve, the CLI) committed in between.
      const results = await immediateTransaction(ctx.db, (trx) => foldEvents(ctx, trx, jobs.map((job) => parsePayload(job.payload)), now));
      return { results };
    },
  };
}

/**
 * Folds events in the caller's write transaction `trx` (held on ctx.db; the
 * statements run on its connection, ctx.sqlite), each inside its own
 * savepoint, and returns one result per item, in order: undefined when
 * folded, or the error its fold failed with (its own writes rolled back; the
 * others commit). An item that is already an error fails as it is.
 */
export async function foldEvents(
  ctx: ProcessingContext,
  trx: Transaction<Database>,
  items: readonly ({ eventId: unknown; refetch?: boolean } | { error: unknown })[],
  now: number,
): Promise<BatchItemResult[]> {
  const q = directStatements(ctx.sqlite, trx);
  const results: BatchItemResult[] = [];
  // Linked before the savepoints: an event whose own fold fails (even for good) still
  // counts in its application's row when other events rebuild it, as every stored event did
  // when the link was an index on events (migration 005 moved it here, off the ingest path).
  for (const p of items) if ('eventId' in p && typeof p.eventId === 'string') q.run(LINK_EVENT, p.eventId);
  for (const item of items) {
    q.run('SAVEPOINT process_event');
    try {
      if ('error' in item) throw item.error;
      await processEvent(ctx, trx, item.eventId as string, now, item.refetch === true);
      q.run('RELEASE process_event');
      results.push(undefined);
    } catch (error) {
      try {
        q.run('ROLLBACK TO process_event');
        q.run('RELEASE process_event');
      } catch {
        // SQLite already rolled the whole transaction back (disk full, I/O error), savepoint
        // included: the batch fails, with the fold's own error rather than "no such savepoint".
        throw error;
      }
      results.push({ error });
    }
  }
  return results;
}

/**
 * The result reads of the application `@application_id` whose last try got a 404 (through
 * jobs_event, whose condition is repeated literally).
 */
const READS_AFTER_404 = `+kind = '${JobKind.fetchResult}' AND kind <> '${JobKind.processEvent}'
    AND last_error LIKE '%${NOT_FOUND_MARK.replaceAll('_', '\\_')}%' ESCAPE '\\'
    AND event_id IN (SELECT event_id FROM application_events WHERE application_id = @application_id)`;

/** Dead result reads of an application that failed on 404s, due again (as an operator's retry: requeued_at). */
const REQUEUE_DELETED_404S = `UPDATE jobs
  SET state = 'pending', run_at = @now, attempts = 0, finished_at = NULL, updated_at = @now,
      payload = CASE WHEN json_valid(payload) AND json_type(payload) = 'object' THEN json_set(payload, '$.requeued_at', @now) ELSE payload END
  WHERE ${READS_AFTER_404} AND +state = 'dead'`;

/**
 * Result reads of an application waiting out their retry after a 404, due now: the deletion says
 * that 404 was final, and the read settles without a request (fetchResult). They waited a minute
 * or more (60 s times their attempts) to settle as application_deleted.
 */
const DUE_NOW_PENDING_404S = `UPDATE jobs SET run_at = @now, updated_at = @now
  WHERE ${READS_AFTER_404} AND +state = 'pending' AND run_at > @now`;

const LINK_EVENT = `INSERT INTO application_events (application_id, event_id)
  SELECT application_id, id FROM events WHERE id = ? AND application_id IS NOT NULL ON CONFLICT DO NOTHING`;

/**
 * A job's event id as its payload gives it, or the parse error (that job then fails on its own, in
 * its savepoint). `refetch`: queued by `replay`, whose result read must ask the service again.
 */
function parsePayload(payload: string): { eventId: unknown; refetch?: boolean } | { error: unknown } {
  try {
    const p = JSON.parse(payload) as { event_id?: unknown; refetch?: unknown };
    return { eventId: p.event_id, refetch: p.refetch === true };
  } catch (error) {
    return { error };
  }
}

async function processEvent(ctx: ProcessingContext, trx: Transaction<Database>, eventId: string, now: number, refetch: boolean): Promise<void> {
  const q = directStatements(ctx.sqlite, trx);
  const event = q.get<{ event_type: string; source: string; application_id: string | null }>(
    'SELECT event_type, source, application_id FROM events WHERE id = ?',
    eventId,
  );
  if (!event) throw Object.assign(new Error(`event ${eventId} is not stored`), { permanent: true });
  const folded = event.application_id ? rebuildApplication(q, event.application_id, now) : null;
  // A deletion settled before deletions kept a digest (result_digest NULL) was sent with the
  // external_id stored before this fold: as far as the database knows, the one its message took.
  const storedBefore = folded?.externalIdBefore ?? null;
  // A deletion's message takes the external_id stored for its application (its snapshot has
  // none): one sent before the application's other events were folded (deliveries are unordered)
  // said null, or an older id. It is sent again, as its next revision, when the stored id changed.
  const deletionDigestNow = folded ? deletionDigest(folded.externalId) : null;
  const settleDeletion = (id: string, sentDigest: string | null) =>
    settleEvent(ctx, trx, id, null, { digest: deletionDigestNow!, changed: (sentDigest ?? deletionDigest(storedBefore)) !== deletionDigestNow });
  if (folded && deletionDigestNow !== null) {
    for (const id of folded.deletionsWithoutExternalId) {
      if (id === eventId) continue;
      const sent = q.get<{ result_digest: string | null }>("SELECT result_digest FROM event_processing WHERE event_id = ? AND state = 'settled'", id);
      if (sent && sent.result_digest !== deletionDigestNow) await settleDeletion(id, sent.result_digest);
    }
  }
  // Deliveries are unordered (spec 6.1): reads of this application that gave up on 404s before
  // its deletion arrived (dead letters) run again, now that the 404 is known to be final, and
  // settle as the deleted branch of fetchResult decides; those still waiting to try again after a
  // 404 run now, and settle without a request.
  if (event.event_type === 'job_application.deleted' && event.application_id) {
    const nowIso = new Date(now).toISOString();
    q.run(REQUEUE_DELETED_404S, { application_id: event.application_id, now: nowIso });
    q.run(DUE_NOW_PENDING_404S, { application_id: event.application_id, now: nowIso });
  }
  const resource = RESOURCE_OF_EVENT[event.event_type];
  if (resource && !event.application_id) {
    // No application to read the result of: the message goes out without it, which nothing else
    // would tell (the envelope is kept in events as sent).
    ctx.logger?.warn({ event_id: eventId, event_type: event.event_type, resource }, 'result event names no application: its message is sent without the result');
  }
  if (!resource || !event.application_id) {
    const ownDeletion = deletionDigestNow !== null && folded!.deletionsWithoutExternalId.includes(eventId);
    if (!ownDeletion) return settleEvent(ctx, trx, eventId, null);
    const sent = q.get<{ result_digest: string | null }>('SELECT result_digest FROM event_processing WHERE event_id = ?', eventId);
    return settleDeletion(eventId, sent?.result_digest ?? null);
  }

  const nowIso = new Date(now).toISOString();
  q.run(OPEN_RESULT[resource], { id: event.application_id, source: event.source, now: nowIso });
  // A replay through processing re-reads the result but does not make a settled event new
  // again: its sinks hear of it again only if the result changed (a new revision, see
  // settleEvent) or by an explicit replay to them.
  q.run(AWAIT_RESULT, eventId, resource, nowIso);
  // One result read per event: a replay (or a fold run again) while the event's read is still
  // waiting replaces that read instead of adding a second one (which doubled the reads and the
  // dead letters of a failing one). The new read is due now, as a replay's is: the handler's slot
  // keeps the 30 s spacing, a paused or throttled source holds it, and its poll delays start
  // over from the replay. What the old one was asked carries over: ask the service again (a
  // replay's refetch, an operator's retry's requeued_at). A read already running is left to end:
  // it yields to this one if it would wait or fail (createFetchResultHandler).
  const waiting = q.all<{ payload: string }>(REPLACE_WAITING_READ, eventId);
  const before = waiting.map((w) => parseObject(w.payload));
  const askAgain = refetch || before.some((p) => p.refetch === true);
  const requeuedAt = before.map((p) => p.requeued_at).filter((v): v is string => typeof v === 'string').sort().at(-1);
  preparedJobWritesOn(ctx.sqlite).enqueue(
    {
      kind: JobKind.fetchResult,
      payload: { event_id: eventId, application_id: event.application_id, resource, ...(askAgain ? { refetch: true } : {}), ...(requeuedAt ? { requeued_at: requeuedAt } : {}) },
      eventId,
      source: event.source,
    },
    now,
  );
}

/**
 * The event's result reads not started yet (taken out, with their payloads). Through jobs_event:
 * `+state`, or SQLite walked every waiting read (jobs_kind_ready) in each fold of a result event,
 * under the write lock: 69 ms a fold with 50,000 reads waiting (a paused source, an outage).
 */
export const REPLACE_WAITING_READ = `DELETE FROM jobs
  WHERE event_id = ? AND kind <> '${JobKind.processEvent}' AND kind = '${JobKind.fetchResult}' AND +state = 'pending'
  RETURNING payload`;

function parseObject(text: string): JsonRecord {
  try {
    return asObject(JSON.parse(text)) ?? {};
  } catch {
    return {};
  }
}

/** The result row an event's read fills, created 'processing' unless the application has one. */
const OPEN_RESULT = Object.fromEntries(
  Object.entries(RESULT_TABLE).map(([resource, table]) => [
    resource,
    `INSERT INTO ${table} (application_id, source, state, first_requested_at, polls, updated_at) VALUES (@id, @source, 'processing', @now, 0, @now)
      ON CONFLICT (application_id) DO NOTHING`,
  ]),
) as Record<HiringResource, string>;

const AWAIT_RESULT = `INSERT INTO event_processing (event_id, state, resource, updated_at) VALUES (?, 'awaiting_result', ?, ?)
  ON CONFLICT (event_id) DO NOTHING`;
