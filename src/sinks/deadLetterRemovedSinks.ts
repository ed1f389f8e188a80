import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { inChunks } from '../db/sqliteHelpers.js';
import { jobsByEventTerm, RETRY_BATCH } from '../queue/JobQueue.js';
import { writeBatches } from '../db/writeInBatches.js';
import { sinkNamesInDatabase } from './deliveryRecords.js';
import { sinkJobKind } from './enqueueDeliveries.js';

/** last_error of the jobs and deliveries of a sink that is no longer configured. */
export const REMOVED_SINK_ERROR = 'sink is no longer configured';

/**
 * Deliveries queued for a sink that is no longer configured (`configuredKinds`: the job kinds of
 * those that are) would wait for ever, unseen: they become dead letters naming the reason, and
 * their `deliveries` rows dead too (retry them with `dead-letters retry --kind sink:<name>` after
 * adding the sink back). The jobs are read first (no lock), then RETRY_BATCH at a time, `pause`
 * between two (writeBatches), the jobs and their deliveries rows in one transaction: one UPDATE over every such
 * job held the write lock 0.75-1.1 s at 100,000, and the deliveries rows were then updated one
 * autocommit each (15 s), so a crash between left rows saying pending whose jobs were dead, for
 * good (`status` counted them pending; a later start only looks at pending jobs). Once `signal` is
 * aborted (a stop during the start), no further batch begins: those left are found by the next
 * start. Returns how many became dead letters.
 */
export async function deadLetterRemovedSinks(
  db: Kysely<Database>,
  configuredKinds: readonly string[],
  nowIso: string,
  pause: () => Promise<void>,
  signal?: AbortSignal,
): Promise<number> {
  let orphaned = db.selectFrom('jobs').select('id').where('state', '=', 'pending').where('kind', 'like', 'sink:%');
  if (configuredKinds.length > 0) orphaned = orphaned.where('kind', 'not in', configuredKinds);
  const ids = (await orphaned.execute()).map((r) => r.id);
  const r = await writeBatches(
    db,
    inChunks(ids, RETRY_BATCH),
    async (trx, chunk) => {
      // Still pending (an operator's command may have changed one since the read): the same jobs in
      // both statements, the deliveries rows first (looked up by their key), then the jobs (by id;
      // unary +: not through an index on state).
      const still = trx.selectFrom('jobs').where('id', 'in', chunk).where(sql<string>`+state`, '=', 'pending');
      await sql`UPDATE deliveries SET state = 'dead', last_error = ${REMOVED_SINK_ERROR}, updated_at = ${nowIso}
        WHERE (event_id, sink) IN (${still.select(['event_id', sql<string>`substr(kind, 6)`.as('sink')])})`.execute(trx);
      const r = await trx
        .updateTable('jobs')
        .set({ state: 'dead', last_error: REMOVED_SINK_ERROR, finished_at: nowIso, updated_at: nowIso })
        .where('id', 'in', chunk)
        .where(sql<string>`+state`, '=', 'pending')
        .executeTakeFirst();
      return Number(r.numUpdatedRows);
    },
    { pause, signal },
  );
  return r.written;
}

/**
 * deliveries rows of a sink no longer configured that still say pending or retrying while no job of
 * theirs waits or runs: nothing will send them, yet `status` and `sinks list` count them as
 * waiting. An earlier version left them so when it stopped between its dead-lettering of the jobs
 * and of their rows; a later start only looked at pending jobs. They are marked dead as their jobs
 * were (RETRY_BATCH per transaction, `pause` between two; none at all on a sound database: one
 * index range per sink the configuration no longer has). Stops before a batch once `signal` is
 * aborted, as deadLetterRemovedSinks. Returns how many.
 */
export async function closeRemovedSinksRows(
  db: Kysely<Database>,
  configuredNames: readonly string[],
  nowIso: string,
  pause: () => Promise<void>,
  signal?: AbortSignal,
): Promise<number> {
  const open = (trx: Kysely<Database>, sink: string) =>
    trx
      .selectFrom('deliveries')
      .where('sink', '=', sink)
      .where('state', 'in', ['pending', 'retrying'])
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('jobs')
              .select('jobs.id')
              .whereRef('jobs.event_id', '=', 'deliveries.event_id')
              .where('jobs.kind', '=', sinkJobKind(sink))
              .where(jobsByEventTerm)
              .where('jobs.state', 'in', ['pending', 'running']),
          ),
        ),
      );
  const batches: { sink: string; eventIds: string[] }[] = [];
  for (const sink of (await sinkNamesInDatabase(db)).filter((n) => !configuredNames.includes(n))) {
    const eventIds = (await open(db, sink).select('event_id').execute()).map((r) => r.event_id);
    batches.push(...inChunks(eventIds, RETRY_BATCH).map((chunk) => ({ sink, eventIds: chunk })));
  }
  const r = await writeBatches(
    db,
    batches,
    async (trx, { sink, eventIds }) => {
      // Checked again under the lock: a `replay` may have queued one since the read.
      const r = await trx
        .updateTable('deliveries')
        .set({ state: 'dead', last_error: REMOVED_SINK_ERROR, updated_at: nowIso })
        .where('sink', '=', sink)
        .where('event_id', 'in', open(trx, sink).select('event_id').where('event_id', 'in', eventIds))
        .executeTakeFirst();
      return Number(r.numUpdatedRows);
    },
    { pause, signal },
  );
  return r.written;
}
