import { sql, type Kysely } from 'kysely';
import type { Database } from '../db/schema.js';
import { inChunks } from '../db/sqliteHelpers.js';
import { immediateTransaction } from '../queue/JobQueue.js';
import { writeBatches } from '../db/writeInBatches.js';
import { isoTime as iso } from '../util/clock.js';
import { sinkDisabled } from './deliveryRecords.js';
import { sinkJobKind } from './enqueueDeliveries.js';

/** Jobs made due per transaction: as a prune's batch (PRUNE_BATCH), about 15 ms of write lock. */
export const SEND_NOW_BATCH = 500;

export interface SendNowResult {
  /** Deliveries that were waiting for a later attempt and are due now (would be, with dryRun). */
  due: number;
  /**
   * Pending deliveries of the sink in all, those due and those in flight included, as the command began
   * (read before the enable): a running receiver sending some meanwhile does not change it.
   */
  pending: number;
  /** The sink was disabled (a 410): enabled by this call (would be, with dryRun). */
  disabled: { at: string; reason: string | null } | null;
  /** `signal` stopped it between two transactions: `due` counts those made due before. */
  stopped: boolean;
}

/**
 * Operator action, the sink's consumer is back: its deliveries waiting for their next attempt (a
 * backoff of up to an hour, a Retry-After) are made due now, each keeping its attempts. In
 * transactions of SEND_NOW_BATCH with `pause` between them, so a running receiver's ingest gets
 * the write lock meanwhile. First the sink's sink_state row is stamped as an enable (enableSink's
 * stamp; a disabled sink is enabled): a running receiver's sink worker ends its own hold of the
 * sink (a Retry-After's wait, kept in its memory) at its next claim (SinkGate), and claims them
 * at its next poll. The deliveries waiting at `now` are read first, then changed by id: one the
 * worker sent since (and that failed again) is left as it is, and the batches end. `onBatch` is
 * told the deliveries made due so far after each transaction (the CLI's progress); once `signal`
 * is aborted (an operator's Ctrl-C), no further one begins (the enable, first, is made all the same).
 */
export async function sendSinkNow(
  db: Kysely<Database>,
  sink: string,
  now: number,
  opts: { dryRun?: boolean; pause?: () => Promise<void>; onBatch?: (due: number) => void; signal?: AbortSignal } = {},
): Promise<SendNowResult> {
  const at = iso(now);
  const kind = sinkJobKind(sink);
  // Not delivered yet: pending, or in flight (running), as `sinks list` counts them; the waiting
  // ones are pending with a later run_at.
  const countPending = async (waitingOnly: boolean, d: Kysely<Database> = db) => {
    let q = d.selectFrom('jobs').select(sql<number>`count(*)`.as('n')).where('kind', '=', kind);
    q = waitingOnly ? q.where('state', '=', 'pending').where('run_at', '>', at) : q.where('state', 'in', ['pending', 'running']);
    return Number((await q.executeTakeFirst())?.n ?? 0);
  };
  const disabledNow = async (d: Kysely<Database>) => {
    const off = await sinkDisabled(d, sink);
    return off ? { at: off.disabled_at!, reason: off.disabled_reason } : null;
  };
  // One read transaction: the three figures from one moment.
  if (opts.dryRun) {
    return db.transaction().execute(async (trx) => ({ due: await countPending(true, trx), pending: await countPending(false, trx), disabled: await disabledNow(trx), stopped: false }));
  }
  const enabled = { disabled_at: null, disabled_reason: null, disabled_status: null, disabled_target: null, updated_at: at };
  // Counted before the enable: once its stamp is in, a running receiver may send some at once.
  // Not inside the enable's write transaction: at 670,000 pending the count takes 60 ms, and the
  // write lock is ingest's too.
  const pending = await countPending(false);
  // Read and enabled in one transaction: a 410 disabling the sink between the two would be
  // enabled over without the operator being told it had been disabled.
  const disabled = await immediateTransaction(db, async (trx) => {
    const was = await disabledNow(trx);
    await trx.insertInto('sink_state').values({ sink, ...enabled }).onConflict((oc) => oc.column('sink').doUpdateSet(enabled)).execute();
    return was;
  });
  // The waiting ones as of now, read first (no lock), then made due by id, SEND_NOW_BATCH at a
  // time, each unless it was claimed since (its attempts moved on: sent again, and failed again,
  // it keeps its new wait). Told apart by `updated_at < now` before: a waiting delivery stamped
  // later by something else (the max_attempts step of a start or of a `dead-letters retry` running
  // meanwhile, a clock stepped back) was skipped: 81,000 of 200,000 beside a retry.
  const waiting = await db.selectFrom('jobs').select(['id', 'attempts']).where('state', '=', 'pending').where('kind', '=', kind).where('run_at', '>', at).execute();
  const { written: due, stopped } = await writeBatches(
    db,
    inChunks(waiting, SEND_NOW_BATCH),
    async (trx, chunk) => {
      // By the ids (the primary key; unary +: not through jobs_kind_ready), then the attempts read.
      const r = await trx
        .updateTable('jobs')
        .set({ run_at: at, updated_at: at })
        .where('id', 'in', chunk.map((j) => j.id))
        .where(sql<boolean>`(id, attempts) IN (VALUES ${sql.join(chunk.map((j) => sql`(${j.id}, ${j.attempts})`))})`)
        .where(sql<string>`+state`, '=', 'pending')
        .where('run_at', '>', at)
        .executeTakeFirst();
      return Number(r.numUpdatedRows);
    },
    { pause: opts.pause, signal: opts.signal, onBatch: opts.onBatch },
  );
  return { due, pending, disabled, stopped };
}
