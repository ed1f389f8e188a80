import type { Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import type { HiringResource } from '../hiring/types.js';
import { resultDigest } from '../util/resultDigest.js';
import { RESULT_TABLE } from './resources.js';

/** Events per transaction: the write lock is never held long enough to make deliveries wait. */
const CHUNK = 500;

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
    const rows = await db
      .selectFrom('event_processing')
      .innerJoin('events', 'events.id', 'event_processing.event_id')
      .select(['event_processing.event_id', 'event_processing.resource', 'events.application_id'])
      .where('event_processing.result_digest', 'is', null)
      .where('event_processing.state', '=', 'settled')
      .where('event_processing.resource', 'is not', null)
      .where('event_processing.event_id', '>', after)
      .orderBy('event_processing.event_id')
      .limit(CHUNK)
      .execute();
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
