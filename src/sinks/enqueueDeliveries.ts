import type BetterSqlite3 from 'better-sqlite3';
import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import { inChunks, oncePerConnection } from '../db/sqliteHelpers.js';
import { enqueue, findReusableJob, preparedJobWritesOn, restartPendingJob, RETRY_BATCH, reviveDeadJob, type NewJob, type ReusableJob } from '../queue/JobQueue.js';
import { writeBatches } from '../db/writeInBatches.js';
import { preparedResetDelivery, resetDelivery } from './deliveryRecords.js';
import { matchesSink } from './matchesSink.js';
import { messageIdFor } from './messageId.js';
import type { SinkConfig } from './sinkConfig.js';

/** Job kind of a sink's deliveries: each sink's worker claims only its own. */
export const sinkJobKind = (sink: string) => `sink:${sink}`;

/** The max_attempts a waiting delivery of `sink` takes: the configured one, or one more attempt when it already used that many. */
const configuredMaxAttempts = (sink: SinkConfig) => sql<number>`max(${sink.maxAttempts}, attempts + 1)`;

/**
 * In the caller's transaction (or as one statement): the pending jobs of `sink` among `ids` take its
 * max_attempts as configured now (see applySinkMaxAttempts). Unary +: by the ids (the primary key),
 * not through jobs_kind_ready over every pending job of the sink. Returns how many changed.
 */
export async function giveSinkMaxAttempts(db: Kysely<Database> | Transaction<Database>, ids: readonly number[], sink: SinkConfig, nowIso: string): Promise<number> {
  if (ids.length === 0) return 0;
  const r = await db
    .updateTable('jobs')
    .set({ max_attempts: configuredMaxAttempts(sink), updated_at: nowIso })
    .where('id', 'in', ids)
    .where(sql<string>`+state`, '=', 'pending')
    .where(sql<string>`+kind`, '=', sinkJobKind(sink.name))
    .where('max_attempts', '<>', configuredMaxAttempts(sink))
    .executeTakeFirst();
  return Number(r.numUpdatedRows);
}

/**
 * A job keeps the max_attempts it was queued with. This gives each configured sink's waiting
 * deliveries (pending, including those an operator's retry just queued again) the sink's
 * max_attempts as configured now, raised or lowered (at the workers' start, and after a
 * `dead-letters retry`). A delivery that already failed that many times (lowered below its
 * attempts) gets one last attempt, whose failure dead-letters it with its own error: claimed past
 * its max_attempts, the worker would dead-letter it unrun, as an attempt that never finished.
 * The jobs are read first (no lock), then changed RETRY_BATCH per transaction with `pause` between two:
 * one statement over every pending job of a sink held the write lock 0.26-0.6 s at 200,000, while
 * a running receiver's ingest (this process's, already listening at the workers' start, or
 * `serve`'s beside `work`) waits for it. Once `signal` is aborted (a stop during the start), no
 * further batch begins (the next start finds those left). Returns how many changed, per sink.
 */
export async function applySinkMaxAttempts(
  db: Kysely<Database>,
  sinks: readonly SinkConfig[],
  nowIso: string,
  pause: () => Promise<void>,
  signal?: AbortSignal,
): Promise<{ sink: string; deliveries: number; maxAttempts: number }[]> {
  const batches: { sink: SinkConfig; ids: number[] }[] = [];
  for (const sink of sinks) {
    const ids = (
      await db
        .selectFrom('jobs')
        .select('id')
        .where('state', '=', 'pending')
        .where('kind', '=', sinkJobKind(sink.name))
        .where('max_attempts', '<>', configuredMaxAttempts(sink))
        .execute()
    ).map((r) => r.id);
    batches.push(...inChunks(ids, RETRY_BATCH).map((chunk) => ({ sink, ids: chunk })));
  }
  // Per sink, as the transactions commit (one cut short by `signal` counts those that did).
  const bySink = new Map<string, number>();
  let counted = 0;
  await writeBatches(db, batches, (trx, { sink, ids }) => giveSinkMaxAttempts(trx, ids, sink, nowIso), {
    pause,
    signal,
    onBatch: (written, done) => {
      const sink = batches[done - 1]!.sink.name;
      bySink.set(sink, (bySink.get(sink) ?? 0) + written - counted);
      counted = written;
    },
  });
  return sinks.flatMap((s) => ((bySink.get(s.name) ?? 0) > 0 ? [{ sink: s.name, deliveries: bySink.get(s.name)!, maxAttempts: s.maxAttempts }] : []));
}

export interface DeliveryPayload {
  event_id: string;
  sink: string;
}

type Maybe<T> = T | Promise<T>;

/** The reads and writes enqueueing needs, on kysely (a transaction) or on prepared statements. */
export interface DeliveryWrites {
  event(eventId: string): Maybe<{ event_type: string; source: string; state: string; revision: number } | undefined>;
  findReusableJob(eventId: string, kind: string): Maybe<ReusableJob | undefined>;
  restartPendingJob(id: number, now: number): Maybe<void>;
  reviveDeadJob(id: number, eventId: string, kind: string, maxAttempts: number, now: number): Maybe<void>;
  resetDelivery(d: { eventId: string; sink: string; messageId: string }, now: number): Maybe<void>;
  enqueue(job: NewJob, now: number): Maybe<number>;
}

/** DeliveryWrites inside a kysely transaction (the processing layer settling an event). */
export function kyselyDeliveryWrites(trx: Transaction<Database>): DeliveryWrites {
  return {
    event: (eventId) =>
      trx
        .selectFrom('events')
        .innerJoin('event_processing', 'event_processing.event_id', 'events.id')
        .select(['events.event_type', 'events.source', 'event_processing.state', 'event_processing.revision'])
        .where('events.id', '=', eventId)
        .executeTakeFirst(),
    findReusableJob: (eventId, kind) => findReusableJob(trx, eventId, kind),
    restartPendingJob: (id, now) => restartPendingJob(trx, id, now),
    reviveDeadJob: (id, eventId, kind, maxAttempts, now) => reviveDeadJob(trx, id, eventId, kind, maxAttempts, now),
    resetDelivery: (d, now) => resetDelivery(trx, d, now),
    enqueue: (job, now) => enqueue(trx, job, now),
  };
}

/**
 * DeliveryWrites as prepared statements on a better-sqlite3 connection, for
 * the CLI's replay, which runs them in its own BEGIN IMMEDIATE transaction:
 * kysely compiled four statements per (event, sink), most of the CLI's time.
 */
export function preparedDeliveryWrites(sqlite: BetterSqlite3.Database): DeliveryWrites {
  // Two lookups, not the join kyselyDeliveryWrites makes: the join took 14-16 µs per event against
  // about 8 µs for the two (5,000 lookups on a replayed bench database; same indexes, same rows).
  const event = sqlite.prepare<[string], { event_type: string; source: string }>('SELECT event_type, source FROM events WHERE id = ?');
  const processing = sqlite.prepare<[string], { state: string; revision: number }>('SELECT state, revision FROM event_processing WHERE event_id = ?');
  return {
    event: (eventId) => {
      const p = processing.get(eventId);
      const e = p && event.get(eventId);
      return e && { event_type: e.event_type, source: e.source, state: p!.state, revision: p!.revision };
    },
    resetDelivery: preparedResetDelivery(sqlite),
    ...preparedJobWritesOn(sqlite),
  };
}

/**
 * preparedDeliveryWrites prepared once per connection: for the processing layer, which settles
 * events in transactions it holds on kysely's connection (see directStatements).
 */
export const preparedDeliveryWritesOn = oncePerConnection(preparedDeliveryWrites);

/**
 * Queues one delivery job per configured sink that wants the event, in the
 * caller's transaction, and starts a new cycle on its deliveries row. Only a
 * settled event is fanned out (an unsettled one will be when it settles). A
 * pair that already has a pending job gets no second one, nor does one whose job
 * was dead-lettered (that job runs again); a pair whose job is
 * running gets one to run after it (the running one may be sending an older
 * revision; its completion does not record the new cycle as delivered).
 * Disabled sinks are included: their jobs wait behind the gate and are sent
 * once the sink is enabled again, so nothing settled while it was off is lost.
 * `only` restricts to some sink names (replay). Returns the sinks queued.
 */
export async function enqueueDeliveries(
  trx: Transaction<Database> | DeliveryWrites,
  eventId: string,
  sinks: readonly SinkConfig[],
  now: number,
  opts: { only?: readonly string[] } = {},
): Promise<string[]> {
  const w = 'enqueue' in trx ? trx : kyselyDeliveryWrites(trx);
  if (opts.only) {
    const unknown = opts.only.filter((n) => !sinks.some((s) => s.name === n));
    if (unknown.length > 0) throw new Error(`no sink named ${unknown.map((n) => JSON.stringify(n)).join(', ')} is configured`);
  }
  const event = await w.event(eventId);
  if (!event || event.state !== 'settled') return [];

  const queued: string[] = [];
  for (const sink of sinks) {
    if (opts.only && !opts.only.includes(sink.name)) continue;
    if (!matchesSink(sink, event)) continue;
    const kind = sinkJobKind(sink.name);
    // A pending job sends whatever is current when it runs. A running one may be sending an older
    // revision: the pair gets a job of its own after it.
    const reuse = await w.findReusableJob(eventId, kind);
    await w.resetDelivery({ eventId, sink: sink.name, messageId: messageIdFor(eventId, sink.name, event.revision) }, now);
    // The new cycle's job: the pending one, started over (it may have been backing off after
    // failures, with attempts used; the cycle starts at 0 attempts), the pair's dead letter run
    // again (so it no longer lists and alerts, and a retry cannot send it twice), or a new one.
    if (reuse?.state === 'pending') await w.restartPendingJob(reuse.id, now);
    else if (reuse?.state === 'dead') await w.reviveDeadJob(reuse.id, eventId, kind, sink.maxAttempts, now);
    else {
      const payload: DeliveryPayload = { event_id: eventId, sink: sink.name };
      // source = the job kind: the pause domain of the sink's own worker gate (see SinkGate).
      await w.enqueue({ kind, payload, eventId, source: kind, maxAttempts: sink.maxAttempts }, now);
    }
    queued.push(sink.name);
  }
  return queued;
}
