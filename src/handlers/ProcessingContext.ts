import type BetterSqlite3 from 'better-sqlite3';
import type { Kysely, Transaction } from 'kysely';
import { directStatements } from '../db/directStatements.js';
import type { Database } from '../db/schema.js';
import { preparedDeliveryWritesOn, type DeliveryWrites } from '../sinks/enqueueDeliveries.js';
import type { HiringClient } from '../hiring/HiringClient.js';
import type { Clock } from '../util/clock.js';
import type { Logger } from '../observability/logger.js';
export { resultDigest } from '../util/resultDigest.js';

export interface ProcessingContext {
  db: Kysely<Database>;
  /**
   * The connection `db` runs on: processing's hot statements run on it directly, prepared once
   * (directStatements), inside the transactions `db` holds.
   */
  sqlite: BetterSqlite3.Database;
  clock: Clock;
  /** One API client per configured source that has credentials. */
  clients: ReadonlyMap<string, HiringClient>;
  /** Called in the transaction that makes an event's message complete (result final, or none needed). */
  onSettled: (writes: DeliveryWrites, eventId: string) => Promise<void>;
  /** Spec 8: no faster than one poll per 30 s for an (application, resource). */
  minPollIntervalMs: number;
  /** Polling backs off up to this interval. */
  maxPollIntervalMs: number;
  /** A result still processing after this long is given up (state given_up). */
  giveUpAfterMs: number;
  /** Aborted when the receiver stops and its grace has passed: a read in flight gives up. */
  shutdown?: AbortSignal;
  /** Observes every hiring API read (metrics); `source` is the configured source whose key made it. */
  onApiCall?: (source: string, resource: string, outcome: string, elapsedMs: number) => void;
  /** 404s tolerated (spaced) before the fetch is dead-lettered: the application may not be visible yet. */
  notFoundAttempts: number;
  /** For what an operator must hear about and no record says (a result event naming no application). */
  logger?: Pick<Logger, 'warn' | 'info'>;
}

export const DEFAULT_PROCESSING = {
  minPollIntervalMs: 30_000,
  maxPollIntervalMs: 60 * 60_000,
  giveUpAfterMs: 7 * 24 * 60 * 60_000,
  notFoundAttempts: 4,
} as const;

/**
 * Mark an event's processing settled and let the fan-out know, in the caller's transaction `trx`
 * (held on ctx.db; the statements run on its connection, ctx.sqlite).
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
  const q = directStatements(ctx.sqlite, trx);
  const now = new Date(ctx.clock.now()).toISOString();
  const prior = q.get<{ state: string; result_digest: string | null }>('SELECT state, result_digest FROM event_processing WHERE event_id = ?', eventId);
  const revise =
    prior?.state === 'settled' &&
    (prior.result_digest !== null && opts.digest !== undefined ? opts.digest !== prior.result_digest : opts.changed === true);
  q.run(SETTLE, { event_id: eventId, resource, now, digest: opts.digest ?? null, has_digest: opts.digest !== undefined ? 1 : 0, revise: revise ? 1 : 0 });
  if (prior?.state !== 'settled' || revise) await ctx.onSettled(preparedDeliveryWritesOn(ctx.sqlite), eventId);
}

/**
 * Settles the event: a new row, or the row it has, keeping its resource; its digest replaced only
 * when one is given (@has_digest), its revision counted up when this settle is a new one (@revise).
 */
const SETTLE = `INSERT INTO event_processing (event_id, state, resource, settled_at, updated_at, result_digest)
  VALUES (@event_id, 'settled', @resource, @now, @now, @digest)
  ON CONFLICT (event_id) DO UPDATE SET state = 'settled', settled_at = excluded.settled_at, updated_at = excluded.updated_at,
    result_digest = CASE WHEN @has_digest THEN excluded.result_digest ELSE event_processing.result_digest END,
    revision = event_processing.revision + @revise`;
