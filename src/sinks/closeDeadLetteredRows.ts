import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { inChunks } from '../db/sqliteHelpers.js';
import { writeBatches } from '../db/writeInBatches.js';
import { jobsByEventTerm, RETRY_BATCH } from '../queue/JobQueue.js';
import { deadLetterRecord } from './deliveryRecords.js';
import { sinkJobKind } from './enqueueDeliveries.js';

/**
 * The pairs of `sink` whose row still says pending or retrying while their newest job is a dead
 * letter and no job of theirs waits or runs (`eventIds`: only those, checked again under the lock).
 */
const stranded = (sink: string, eventIds?: readonly string[]) => sql<{ event_id: string; job_error: string | null; job_attempts: number }>`
  SELECT d.event_id, j.last_error AS job_error, j.attempts AS job_attempts
  FROM jobs j JOIN deliveries d ON d.event_id = j.event_id AND d.sink = ${sink}
  WHERE j.state = 'dead' AND j.kind = ${sinkJobKind(sink)} AND d.state IN ('pending', 'retrying')
    ${eventIds ? sql`AND d.event_id IN (${sql.join(eventIds)})` : sql``}
    AND j.id = (SELECT max(n.id) FROM jobs n WHERE n.event_id = j.event_id AND n.kind = j.kind AND n.${jobsByEventTerm})
    AND NOT EXISTS (SELECT 1 FROM jobs o WHERE o.event_id = j.event_id AND o.kind = j.kind AND o.${jobsByEventTerm} AND o.state IN ('pending', 'running'))`;

/**
 * A delivery's dead letter and its row's record of it (FanOut's onDeadLetter: a job claimed past its
 * last attempt, which the handler did not run) are two transactions: a crash between them, or a
 * write the database refused (a full disk, the lock held past the wait), left the row saying
 * pending or retrying for good, with nothing left to send it. `sinks list` and `status` counted it
 * waiting, and the oldest undelivered age grew for ever. At the workers' start, such rows of the
 * configured sinks take their dead letter's state and error, as onDeadLetter would have written
 * them (driven by the sinks' dead letters, one index range each: nothing on a sound database but
 * that read). RETRY_BATCH per transaction, `pause` between two; no batch begins once `signal` is
 * aborted. Returns how many.
 */
export async function closeDeadLetteredRows(
  db: Kysely<Database>,
  sinks: readonly string[],
  nowIso: string,
  pause: () => Promise<void>,
  signal?: AbortSignal,
): Promise<number> {
  const batches: { sink: string; eventIds: string[] }[] = [];
  for (const sink of sinks) {
    const eventIds = (await stranded(sink).execute(db)).rows.map((r) => r.event_id);
    batches.push(...inChunks(eventIds, RETRY_BATCH).map((chunk) => ({ sink, eventIds: chunk })));
  }
  const r = await writeBatches(
    db,
    batches,
    async (trx, { sink, eventIds }) => {
      let n = 0;
      // Read again under the lock: a `replay` or a `dead-letters retry` may have queued one since.
      for (const row of (await stranded(sink, eventIds).execute(trx)).rows) {
        // As onDeadLetter would have written it.
        const u = await trx
          .updateTable('deliveries')
          .set(deadLetterRecord(row.job_error, row.job_attempts, nowIso))
          .where('sink', '=', sink)
          .where('event_id', '=', row.event_id)
          .executeTakeFirst();
        n += Number(u.numUpdatedRows);
      }
      return n;
    },
    { pause, signal },
  );
  return r.written;
}
