import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { HiringResource } from '../hiring/types.js';
import { resultDigest } from '../util/resultDigest.js';
import { RESULT_TABLE } from './resources.js';

/** Events per transaction: the write lock is never held long enough to make deliveries wait. */
const CHUNK = 500;

/**
 * The next chunk of settled events with a result and no digest, in event_id order after `after`.
 * Its condition implies event_processing_undigested's (migration 008): SQLite uses a partial
 * index only for a query whose WHERE clause implies the index's. test/db/undigestedIndex.test.ts
 * checks the plan.
 */
export const undigestedSettled = (after: string) =>
  sql<{ event_id: string; resource: string; application_id: string | null }>`SELECT ep.event_id, ep.resource, e.application_id
    FROM event_processing ep JOIN events e ON e.id = ep.event_id
    WHERE ep.result_digest IS NULL AND ep.state = 'settled' AND ep.resource IS NOT NULL AND ep.event_id > ${after}
    ORDER BY ep.event_id LIMIT ${CHUNK}`;

/**
 * Events settled before migration 007 have no result_digest, so a later change of their result
 * could not be told from the result they were sent with. At the first start of the workers after
 * the upgrade, each gets the digest of its stored result: what it was last sent with, as far as
 * the database knows (a change made before the upgrade cannot be known). A result being read again
 * (`processing`) counts as the ready result whose data it keeps; one with no data is left (what
 * its events were sent with is not known). Returns the events filled in.
 */
export async function backfillResultDigests(db: Kysely<Database>): Promise<number> {
  let filled = 0;
  let after = '';
  for (;;) {
    const rows = (await undigestedSettled(after).execute(db)).rows;
    if (rows.length === 0) return filled;
    after = rows.at(-1)!.event_id;
    await db.transaction().execute(async (trx) => {
      for (const row of rows) {
        const table = RESULT_TABLE[row.resource as HiringResource];
        if (!table || !row.application_id) continue;
        const result = await trx.selectFrom(table).select(['state', 'reason', 'data']).where('application_id', '=', row.application_id).executeTakeFirst();
        if (!result) continue;
        // A result being read again (`processing`) over data a ready read gave: that ready result
        // is what the event was sent with. Without data, what it was sent with is not known.
        const sentWith = result.state !== 'processing' ? result : result.data !== null ? { state: 'ready', reason: null, data: result.data } : null;
        if (!sentWith) continue;
        const done = await trx
          .updateTable('event_processing')
          .set({ result_digest: resultDigest(sentWith) })
          .where('event_id', '=', row.event_id)
          .where('result_digest', 'is', null)
          .executeTakeFirst();
        filled += Number(done.numUpdatedRows);
      }
    });
  }
}
