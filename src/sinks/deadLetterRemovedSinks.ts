import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { inChunks } from '../db/sqliteHelpers.js';
import { immediateTransaction, RETRY_BATCH } from '../queue/JobQueue.js';

/** last_error of the jobs and deliveries of a sink that is no longer configured. */
export const REMOVED_SINK_ERROR = 'sink is no longer configured';

/**
 * Deliveries queued for a sink that is no longer configured (`configuredKinds`: the job kinds of
 * those that are) would wait for ever, unseen: they become dead letters naming the reason, and
 * their `deliveries` rows dead too (retry them with `dead-letters retry --kind sink:<name>` after
 * adding the sink back). The jobs are read first (no lock), then RETRY_BATCH at a time, `pause`
 * before each, the jobs and their deliveries rows in one transaction: one UPDATE over every such
 * job held the write lock 0.75-1.1 s at 100,000, and the deliveries rows were then updated one
 * autocommit each (15 s), so a crash between left rows saying pending whose jobs were dead, for
 * good (`status` counted them pending; a later start only looks at pending jobs). Returns how many
 * became dead letters.
 */
export async function deadLetterRemovedSinks(db: Kysely<Database>, configuredKinds: readonly string[], nowIso: string, pause: () => Promise<void>): Promise<number> {
  let orphaned = db.selectFrom('jobs').select('id').where('state', '=', 'pending').where('kind', 'like', 'sink:%');
  if (configuredKinds.length > 0) orphaned = orphaned.where('kind', 'not in', configuredKinds);
  const ids = (await orphaned.execute()).map((r) => r.id);
  let dead = 0;
  for (const chunk of inChunks(ids, RETRY_BATCH)) {
    await pause();
    dead += await immediateTransaction(db, async (trx) => {
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
    });
  }
  return dead;
}
