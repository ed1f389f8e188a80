import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import type { HiringClient } from '../hiring/HiringClient.js';
import type { Clock } from '../util/clock.js';
export { resultDigest } from '../util/resultDigest.js';

export interface ProcessingContext {
  db: Kysely<Database>;
  clock: Clock;
  /** One API client per configured source that has credentials. */
  clients: ReadonlyMap<string, HiringClient>;
  /** Called in the transaction that makes an event's message complete (result final, or none needed). */
  onSettled: (trx: Transaction<Database>, eventId: string) => Promise<void>;
  /** Spec 8: no faster than one poll per 30 s for an (application, resource). */
  minPollIntervalMs: number;
  /** Polling backs off up to this interval. */
  maxPollIntervalMs: number;
  /** A result still processing after this long is given up (state given_up). */
  giveUpAfterMs: number;
  /** Aborted when the receiver stops and its grace has passed: a read in flight gives up. */
  shutdown?: AbortSignal;
  /** Observes every hiring API read (metrics). */
  onApiCall?: (resource: string, outcome: string) => void;
  /** 404s tolerated (spaced) before the fetch is dead-lettered: the application may not be visible yet. */
  notFoundAttempts: number;
}

export const DEFAULT_PROCESSING = {
  minPollIntervalMs: 30_000,
  maxPollIntervalMs: 60 * 60_000,
  giveUpAfterMs: 7 * 24 * 60 * 60_000,
  notFoundAttempts: 4,
} as const;

/**
 * Mark an event's processing settled and let the fan-out know, in the caller's transaction.
 * `digest`: resultDigest of the event's result now. An event already settled whose digest differs
 * from the one it settled with is fanned out again as its next revision (a new webhook-id per
 * sink): its sinks were sent another result. The same digest sends nothing. For an event settled
 * before digests were kept, `changed` (this read changed the stored result) decides instead.
 */
export async function settleEvent(
  ctx: ProcessingContext,
  trx: Transaction<Database>,
  eventId: string,
  resource: string | null,
  opts: { digest?: string; changed?: boolean } = {},
): Promise<void> {
  const now = new Date(ctx.clock.now()).toISOString();
  const prior = await trx.selectFrom('event_processing').select(['state', 'result_digest']).where('event_id', '=', eventId).executeTakeFirst();
  const revise =
    prior?.state === 'settled' &&
    (prior.result_digest !== null && opts.digest !== undefined ? opts.digest !== prior.result_digest : opts.changed === true);
  const digest = opts.digest !== undefined ? { result_digest: opts.digest } : {};
  await trx
    .insertInto('event_processing')
    .values({ event_id: eventId, state: 'settled', resource, settled_at: now, updated_at: now, ...digest })
    .onConflict((oc) =>
      oc.column('event_id').doUpdateSet((eb) => ({
        state: 'settled',
        settled_at: now,
        updated_at: now,
        ...digest,
        ...(revise ? { revision: eb('event_processing.revision', '+', 1) } : {}),
      })),
    )
    .execute();
  if (prior?.state !== 'settled' || revise) await ctx.onSettled(trx, eventId);
}
