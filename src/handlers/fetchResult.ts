import type { Transaction } from 'kysely';
import type { Database, ResultState } from '../db/schema.js';
import { PauseSourceError, PermanentError, RetryAfterError } from '../hiring/errors.js';
import { describeOutcome, outcomeToError } from '../hiring/outcomeToError.js';
import type { HiringResource } from '../hiring/types.js';
import { rebuildApplication } from '../processing/rebuildApplication.js';
import { headlineOf, RESULT_TABLE } from '../processing/resources.js';
import type { ClaimedJob } from '../queue/JobQueue.js';
import type { HandlerResult } from '../queue/Worker.js';
import { settleEvent, type ProcessingContext } from './ProcessingContext.js';

interface Payload {
  event_id: string;
  application_id: string;
  resource: HiringResource;
}

const FINAL: ReadonlySet<ResultState> = new Set(['ready', 'unavailable', 'given_up']);

/** Delay before the next poll of a result still processing: 30 s, 60 s, 2 min ... up to the cap. */
export function pollDelay(polls: number, minMs: number, maxMs: number): number {
  return Math.min(maxMs, minMs * 2 ** Math.max(0, polls - 1));
}

/**
 * Reads the full result behind an event from the scoring GET and records it.
 * The 30-second spacing is enforced per (application, resource) through the
 * result row's last_polled_at, so duplicate events and replays wait their turn
 * instead of polling faster; a result already final since this event arrived
 * is reused without a request.
 */
export function createFetchResultHandler(ctx: ProcessingContext) {
  return async (job: ClaimedJob): Promise<HandlerResult> => {
    const p = JSON.parse(job.payload) as Payload;
    const table = RESULT_TABLE[p.resource];
    const now = ctx.clock.now();
    const nowIso = new Date(now).toISOString();

    const row = await ctx.db.selectFrom(table).selectAll().where('application_id', '=', p.application_id).executeTakeFirst();
    const event = await ctx.db.selectFrom('events').select(['received_at']).where('id', '=', p.event_id).executeTakeFirst();
    if (!row || !event) throw new PermanentError(`nothing to fetch for event ${p.event_id}: result row or event missing`);

    if (FINAL.has(row.state) && row.fetched_at !== null && row.fetched_at >= event.received_at) {
      await ctx.db.transaction().execute((trx) => settleEvent(ctx, trx, p.event_id, p.resource));
      return;
    }
    if (row.last_polled_at) {
      const allowedAt = Date.parse(row.last_polled_at) + ctx.minPollIntervalMs;
      if (allowedAt > now) return { rescheduleAt: allowedAt, note: 'waiting for the 30 s poll spacing' };
    }
    if (now - Date.parse(row.first_requested_at) > ctx.giveUpAfterMs) {
      await finish(ctx, p, { state: 'given_up', reason: `still processing after ${Math.round(ctx.giveUpAfterMs / 3_600_000)} h`, data: null }, nowIso);
      return;
    }
    const client = job.source ? ctx.clients.get(job.source) : undefined;
    if (!client) {
      throw Object.assign(new PauseSourceError(`source ${job.source ?? '(none)'} has no HIRING_API_URL / HIRING_API_KEY configured`), { status: 0 });
    }

    const outcome = await client.fetchResource(p.resource, p.application_id);
    ctx.onApiCall?.(p.resource, outcome.kind);
    await ctx.db
      .updateTable(table)
      .set((eb) => ({ last_polled_at: nowIso, polls: eb('polls', '+', 1), updated_at: nowIso }))
      .where('application_id', '=', p.application_id)
      .execute();

    switch (outcome.kind) {
      case 'ready':
        await finish(ctx, p, { state: 'ready', reason: null, data: outcome.data }, nowIso);
        return;
      case 'unavailable':
        await finish(ctx, p, { state: 'unavailable', reason: outcome.reason ?? 'unavailable', data: null }, nowIso);
        return;
      case 'processing': {
        await ctx.db.updateTable(table).set({ state: 'processing', reason: outcome.reason }).where('application_id', '=', p.application_id).execute();
        return { rescheduleAt: now + pollDelay(row.polls + 1, ctx.minPollIntervalMs, ctx.maxPollIntervalMs), note: 'result still processing' };
      }
      case 'not_found': {
        // Deleted applications answer 404 for good (spec 4.2): that is a final answer, not a failure.
        const app = await ctx.db.selectFrom('applications').select('deleted_at').where('id', '=', p.application_id).executeTakeFirst();
        if (app?.deleted_at) {
          await finish(ctx, p, { state: 'unavailable', reason: 'application_deleted', data: null }, nowIso);
          return;
        }
        // The application may not be readable yet; a few spaced retries, then a dead letter naming the reason.
        if (job.attempts >= ctx.notFoundAttempts) throw new PermanentError(`${describeOutcome(outcome)}; gave up after ${job.attempts} tries`);
        throw new RetryAfterError(describeOutcome(outcome), Math.max(ctx.minPollIntervalMs, 60_000 * job.attempts));
      }
      case 'unauthorized':
        throw Object.assign(new PauseSourceError(describeOutcome(outcome)), { status: outcome.status });
      case 'rate_limited':
        throw new RetryAfterError(describeOutcome(outcome), Math.max(outcome.retryAfterMs ?? 60_000, ctx.minPollIntervalMs));
      default: {
        const err = outcomeToError(outcome);
        if (err instanceof RetryAfterError) throw new RetryAfterError(err.message, Math.max(err.retryAfterMs, ctx.minPollIntervalMs));
        throw err ?? new Error(describeOutcome(outcome));
      }
    }
  };
}

async function finish(
  ctx: ProcessingContext,
  p: Payload,
  result: { state: ResultState; reason: string | null; data: Record<string, unknown> | null },
  nowIso: string,
): Promise<void> {
  const table = RESULT_TABLE[p.resource];
  const headline = result.data ? headlineOf(p.resource, result.data) : {};
  await ctx.db.transaction().execute(async (trx: Transaction<Database>) => {
    await trx
      .updateTable(table)
      .set({
        state: result.state,
        reason: result.reason,
        data: result.data ? JSON.stringify(result.data) : null,
        fetched_at: nowIso,
        updated_at: nowIso,
        ...headline,
      })
      .where('application_id', '=', p.application_id)
      .execute();
    await rebuildApplication(trx, p.application_id, ctx.clock.now());
    await settleEvent(ctx, trx, p.event_id, p.resource);
  });
}
