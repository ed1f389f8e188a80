import { enqueue, type ClaimedJob } from '../queue/JobQueue.js';
import { JobKind } from '../queue/jobKinds.js';
import type { HandlerResult } from '../queue/Worker.js';
import { rebuildApplication } from '../processing/rebuildApplication.js';
import { RESOURCE_OF_EVENT, RESULT_TABLE } from '../processing/resources.js';
import { settleEvent, type ProcessingContext } from './ProcessingContext.js';

/**
 * First step for every stored event: fold it into its application's row, and
 * either settle it (nothing to fetch) or hand it to a fetch_result job for
 * its scoring read. Runs in one transaction, so a crash leaves it undone, not half-done.
 */
export function createProcessEventHandler(ctx: ProcessingContext) {
  return async (job: ClaimedJob): Promise<HandlerResult> => {
    const { event_id: eventId } = JSON.parse(job.payload) as { event_id: string };
    const now = ctx.clock.now();
    await ctx.db.transaction().execute(async (trx) => {
      const event = await trx
        .selectFrom('events')
        .select(['id', 'event_type', 'source', 'application_id'])
        .where('id', '=', eventId)
        .executeTakeFirst();
      if (!event) throw Object.assign(new Error(`event ${eventId} is not stored`), { permanent: true });
      if (event.application_id) await rebuildApplication(trx, event.application_id, now);
      const resource = RESOURCE_OF_EVENT[event.event_type];
      if (!resource || !event.application_id) return settleEvent(ctx, trx, eventId, null);

      const nowIso = new Date(now).toISOString();
      await trx
        .insertInto(RESULT_TABLE[resource])
        .values({ application_id: event.application_id, source: event.source, state: 'processing', first_requested_at: nowIso, polls: 0, updated_at: nowIso })
        .onConflict((oc) => oc.column('application_id').doNothing())
        .execute();
      await trx
        .insertInto('event_processing')
        .values({ event_id: eventId, state: 'awaiting_result', resource, updated_at: nowIso })
        // A replay through processing re-reads the result but does not make a settled event new
        // again: sinks are re-sent only by an explicit replay to them (same rule for every event type).
        .onConflict((oc) => oc.column('event_id').doNothing())
        .execute();
      await enqueue(
        trx,
        { kind: JobKind.fetchResult, payload: { event_id: eventId, application_id: event.application_id, resource }, eventId, source: event.source },
        now,
      );
    });
  };
}
