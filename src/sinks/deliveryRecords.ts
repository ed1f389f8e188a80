import type BetterSqlite3 from 'better-sqlite3';
import { sql, type ExpressionBuilder, type Kysely, type Transaction } from 'kysely';
import type { Database, DeliveryState } from '../db/schema.js';
import { inChunks, insertElseUpdate } from '../db/sqliteHelpers.js';
import { jobsByEventTerm } from '../queue/eventJobs.js';
import { UNFINISHED_LAST_ATTEMPT } from '../queue/Worker.js';
import { isoTime as iso } from '../util/clock.js';

type Db = Kysely<Database> | Transaction<Database>;

/**
 * What a delivery's row says of its job's dead letter (`error`, at `nowIso`): dead, with that error.
 * A last attempt cut by a crash (UNFINISHED_LAST_ATTEMPT) is counted, as by its job: all its claims
 * but the one that dead-lettered it. For `.set()` of an update of `deliveries`: FanOut's
 * onDeadLetter, and closeDeadLetteredRows for a record a crash left out.
 */
export const deadLetterRecord = (error: string | null, jobAttempts: number, nowIso: string) => (eb: ExpressionBuilder<Database, 'deliveries'>) => ({
  state: 'dead' as const,
  last_error: error,
  updated_at: nowIso,
  attempts: eb.fn<number>('max', [eb.ref('attempts'), eb.val(error === UNFINISHED_LAST_ATTEMPT ? jobAttempts - 1 : 0)]),
});

const freshCycle = (at: string) => ({
  state: 'pending' as const,
  attempts: 0,
  last_status_code: null,
  last_error: null,
  last_attempt_at: null,
  delivered_at: null,
  queued_at: at,
  updated_at: at,
});

/** A new delivery cycle for the pair: inserted, or reset to pending on a replay or a new revision. */
export async function resetDelivery(trx: Db, d: { eventId: string; sink: string; messageId: string }, now: number): Promise<void> {
  const at = iso(now);
  const fresh = freshCycle(at);
  await trx
    .insertInto('deliveries')
    .values({ event_id: d.eventId, sink: d.sink, message_id: d.messageId, created_at: at, ...fresh })
    // message_id too: a new revision of the event's message has its own.
    .onConflict((oc) => oc.columns(['event_id', 'sink']).doUpdateSet({ ...fresh, message_id: d.messageId }))
    .execute();
}

/** resetDelivery as a prepared statement, for the CLI's replay (see preparedJobWrites). */
export function preparedResetDelivery(sqlite: BetterSqlite3.Database) {
  const columns = Object.keys(freshCycle(''));
  const upsert = sqlite.prepare(
    `INSERT INTO deliveries (event_id, sink, message_id, created_at, ${columns.join(', ')})
     VALUES (@event_id, @sink, @message_id, @created_at, ${columns.map((c) => `@${c}`).join(', ')})
     ON CONFLICT (event_id, sink) DO UPDATE SET ${[...columns, 'message_id'].map((c) => `${c} = excluded.${c}`).join(', ')}`,
  );
  return (d: { eventId: string; sink: string; messageId: string }, now: number): void => {
    const at = iso(now);
    upsert.run({ event_id: d.eventId, sink: d.sink, message_id: d.messageId, created_at: at, ...freshCycle(at) });
  };
}

export type AttemptRecord = { state: DeliveryState; statusCode: number | null; error: string | null };

/** One attempt's result on the pair's row. */
export async function recordAttempt(db: Db, d: { eventId: string; sink: string }, r: AttemptRecord, now: number): Promise<void> {
  await recordAttempts(db, d.sink, [d.eventId], r, now);
}

/**
 * Whether the pair has a job newer than `jobId`: a replay or a new revision queued while that job
 * was running (it is not reused then, see enqueueDeliveries), so the pair's current cycle is the
 * newer job's, and `jobId`'s attempts, spent before it began, are not that cycle's. Through
 * jobs_event (its partial index's term, see jobsByEventTerm): a seek on the pair's few rows.
 */
export function newerJobOfPair(eb: ExpressionBuilder<Database, 'deliveries'>, d: { eventId: string; sink: string; jobId: number }) {
  return eb.exists(
    eb
      .selectFrom('jobs')
      .select(sql.lit(1).as('one'))
      .where('jobs.event_id', '=', d.eventId)
      .where('jobs.kind', '=', `sink:${d.sink}`)
      .where(jobsByEventTerm)
      .where('jobs.id', '>', d.jobId),
  );
}

/**
 * A failed attempt of a claimed job, recorded only while the pair's cycle is still the one that
 * job sent (`messageId`) and the job still holds its lease: a newer revision queued meanwhile, or
 * a job taken over after its lease ran out, is not marked failing by a stale attempt.
 * `counted: false` (a send cut by the stop): the note only, `attempts` and `last_attempt_at` kept,
 * as the job's attempt is not spent either; counted, three stops read as 3 attempts of at most 2.
 * Counted, `attempts` is at least the job's (`jobAttempts`, this one included): an attempt cut by a
 * crash (SIGKILL, a power loss) was spent by the job but never recorded here, and without it a
 * row read "dead after 1 attempt" of a sink's 2. Only while the job is the pair's newest
 * (newerJobOfPair): a replay during an attempt gives the new cycle a job of its own, and the
 * older job's count, of attempts made before the replay, read 3 of 3 on a cycle with 2 to come.
 */
export async function recordFailedAttempt(
  db: Db,
  d: { eventId: string; sink: string; messageId: string; jobId: number; leaseToken: string; jobAttempts: number },
  r: AttemptRecord,
  now: number,
  counted = true,
): Promise<void> {
  const at = iso(now);
  await db
    .updateTable('deliveries')
    .set((eb) => ({
      state: r.state,
      last_status_code: r.statusCode,
      last_error: r.error,
      updated_at: at,
      ...(counted
        ? {
            attempts: eb
              .case()
              .when(newerJobOfPair(eb, d))
              .then(eb('attempts', '+', 1))
              .else(eb.fn<number>('max', [eb('attempts', '+', 1), eb.val(d.jobAttempts)]))
              .end(),
            last_attempt_at: at,
          }
        : {}),
    }))
    .where('sink', '=', d.sink)
    .where('event_id', '=', d.eventId)
    .where('message_id', '=', d.messageId)
    .where((eb) =>
      eb.exists(
        eb.selectFrom('jobs').select(sql.lit(1).as('one')).where('jobs.id', '=', d.jobId).where('jobs.lease_token', '=', d.leaseToken).where('jobs.state', '=', 'running'),
      ),
    )
    .execute();
}

/** The same attempt result on the rows of many events of one sink (a batch), in `IN (...)` chunks. */
export async function recordAttempts(db: Db, sink: string, eventIds: readonly string[], r: AttemptRecord, now: number): Promise<void> {
  const at = iso(now);
  for (const chunk of inChunks(eventIds)) {
    await db
      .updateTable('deliveries')
      .set((eb) => ({
        state: r.state,
        attempts: eb('attempts', '+', 1),
        last_status_code: r.statusCode,
        last_error: r.error,
        last_attempt_at: at,
        updated_at: at,
        ...(r.state === 'delivered' ? { delivered_at: at } : {}),
      }))
      .where('sink', '=', sink)
      .where('event_id', 'in', chunk)
      .execute();
  }
}

/** The message id of each pair's current delivery cycle. */
export async function currentMessageIds(db: Db, sink: string, eventIds: readonly string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  for (const chunk of inChunks(eventIds)) {
    const rows = await db.selectFrom('deliveries').select(['event_id', 'message_id']).where('sink', '=', sink).where('event_id', 'in', chunk).execute();
    for (const r of rows) out.set(r.event_id, r.message_id);
  }
  return out;
}

export interface SinkStatus {
  name: string;
  type: string;
  enabled: boolean;
  disabled_at: string | null;
  disabled_reason: string | null;
  pending: number;
  /** Last attempt failed, retrying with backoff. */
  failing: number;
  delivered: number;
  dead: number;
  /** Age of the oldest pending or retrying delivery, in ms; null when none. */
  oldest_undelivered_ms: number | null;
}

/** Status of each configured sink, for the CLI and metrics. */
export async function sinkStatuses(db: Db, sinks: readonly { name: string; type: string }[], now: number): Promise<SinkStatus[]> {
  if (sinks.length === 0) return [];
  const names = sinks.map((s) => s.name);
  const counts = await db
    .selectFrom('deliveries')
    .select(['sink', 'state', (eb) => eb.fn.countAll<number>().as('n'), (eb) => eb.fn.min('queued_at').as('oldest')])
    .where('sink', 'in', names)
    .groupBy(['sink', 'state'])
    .execute();
  const states = await db.selectFrom('sink_state').selectAll().where('sink', 'in', names).execute();
  return sinks.map((s) => {
    const st = states.find((r) => r.sink === s.name);
    const of = (state: DeliveryState) => counts.find((c) => c.sink === s.name && c.state === state);
    const oldest = [of('pending')?.oldest, of('retrying')?.oldest].filter((v): v is string => typeof v === 'string').sort()[0];
    return {
      name: s.name,
      type: s.type,
      enabled: !st?.disabled_at,
      disabled_at: st?.disabled_at ?? null,
      disabled_reason: st?.disabled_reason ?? null,
      pending: Number(of('pending')?.n ?? 0),
      failing: Number(of('retrying')?.n ?? 0),
      delivered: Number(of('delivered')?.n ?? 0),
      dead: Number(of('dead')?.n ?? 0),
      oldest_undelivered_ms: oldest ? Math.max(0, now - Date.parse(oldest)) : null,
    };
  });
}

/** Age in ms of the oldest delivery still pending or retrying (optionally of some sinks); null when none. */
export async function oldestUndeliveredAgeMs(db: Db, now: number, sinks?: readonly string[]): Promise<number | null> {
  let q = db
    .selectFrom('deliveries')
    .select((eb) => eb.fn.min('queued_at').as('oldest'))
    .where('state', 'in', ['pending', 'retrying']);
  if (sinks) {
    if (sinks.length === 0) return null;
    q = q.where('sink', 'in', [...sinks]);
  }
  const row = await q.executeTakeFirst();
  return row?.oldest ? Math.max(0, now - Date.parse(row.oldest)) : null;
}

/**
 * Persistently disables a sink (a 410 Gone). Pending deliveries stay pending. Returns whether this
 * call disabled it (false: it was disabled already, by an attempt in flight beside this one, or
 * enabled since). `sentAt`: when the attempt that was answered 410 was sent (default `now`). An
 * enable at or after it (the CLI's, a new target at start) wins: the answer came from the consumer
 * as it was before the operator acted on it, so the sink is left enabled and the next attempt
 * decides. An enable stamped before it, even when it lands between this call's two statements, is
 * overtaken: the sink is disabled again, by this call (its 410 is said at error, not debug).
 */
export async function disableSink(db: Db, sink: string, d: { reason: string; status: number | null; target: string }, now: number, sentAt = now): Promise<boolean> {
  const at = iso(now);
  const sent = iso(sentAt);
  const row = { disabled_at: at, disabled_reason: d.reason, disabled_status: d.status, disabled_target: d.target, updated_at: at };
  // Disabled already: keep the first disabled_at (concurrent attempts all see the 410), the latest answer.
  const { disabled_at: _first, ...rest } = row;
  // An enabled row's updated_at is when an operator last acted on the sink: `sinks enable`, `sinks send-now` and
  // `dead-letters retry` stamp it (so a 410 to an attempt sent before any of them does not disable it).
  const enabledSinceSent = async () =>
    (await db.selectFrom('sink_state').select('sink').where('sink', '=', sink).where('disabled_at', 'is', null).where('updated_at', '>=', sent).executeTakeFirst()) !== undefined;
  return insertElseUpdate(
    () =>
      db
        .insertInto('sink_state')
        .values({ sink, ...row })
        .onConflict((oc) => oc.column('sink').doUpdateSet(row).where('sink_state.disabled_at', 'is', null).where('sink_state.updated_at', '<', sent))
        .executeTakeFirst(),
    () => db.updateTable('sink_state').set(rest).where('sink', '=', sink).where('disabled_at', 'is not', null).executeTakeFirst(),
    `could not record that sink ${sink} is gone: it was enabled at each try`,
    enabledSinceSent,
  );
}

/** Operator action (CLI), or a changed target at start: the sink's worker claims again. */
export async function enableSink(db: Db, sink: string, now: number): Promise<boolean> {
  const r = await db
    .updateTable('sink_state')
    .set({ disabled_at: null, disabled_reason: null, disabled_status: null, disabled_target: null, updated_at: iso(now) })
    .where('sink', '=', sink)
    .where('disabled_at', 'is not', null)
    .executeTakeFirst();
  return r.numUpdatedRows > 0n;
}

export async function sinkDisabled(db: Db, sink: string) {
  return db.selectFrom('sink_state').selectAll().where('sink', '=', sink).where('disabled_at', 'is not', null).executeTakeFirst();
}

/** Each pair's current message id with its event's revision now, read in one statement per chunk. */
export async function pairCycles(db: Db, sink: string, eventIds: readonly string[]): Promise<Map<string, { messageId: string; revision: number }>> {
  const out = new Map<string, { messageId: string; revision: number }>();
  for (const chunk of inChunks(eventIds)) {
    const rows = await db
      .selectFrom('deliveries')
      .innerJoin('event_processing', 'event_processing.event_id', 'deliveries.event_id')
      .select(['deliveries.event_id', 'deliveries.message_id', 'event_processing.revision'])
      .where('deliveries.sink', '=', sink)
      .where('deliveries.event_id', 'in', chunk)
      .execute();
    for (const r of rows) out.set(r.event_id, { messageId: r.message_id, revision: r.revision });
  }
  return out;
}

/**
 * The pair's cycle moves to the message about to be sent (a newer revision). Its attempts go on
 * counting with the job's, which decides the dead letter.
 */
export async function adoptCycle(db: Db, d: { eventId: string; sink: string; from: string; to: string }, now: number): Promise<void> {
  await db
    .updateTable('deliveries')
    .set({ message_id: d.to, state: 'pending', delivered_at: null, updated_at: iso(now) })
    .where('sink', '=', d.sink)
    .where('event_id', '=', d.eventId)
    .where('message_id', '=', d.from)
    .execute();
}

/**
 * The sinks the database knows: those with deliveries, one index seek each (deliveries_sink_state
 * starts with sink: a DISTINCT read every entry of that index, 0.16 s warm and 4 s cold at 1.6
 * million deliveries), and those with a sink_state row.
 */
export async function sinkNamesInDatabase(db: Kysely<Database>): Promise<string[]> {
  const inDb = await sql<{ sink: string }>`${sql.raw(SINK_NAMES)}`.execute(db);
  return inDb.rows.map((r) => r.sink);
}

/** sinkNamesInDatabase's statement, in order, for a caller on better-sqlite3 itself. */
export const SINK_NAMES = `WITH RECURSIVE seen(sink) AS (
      SELECT min(sink) FROM deliveries
      UNION ALL SELECT (SELECT min(sink) FROM deliveries WHERE sink > seen.sink) FROM seen WHERE seen.sink IS NOT NULL)
    SELECT sink FROM seen WHERE sink IS NOT NULL UNION SELECT sink FROM sink_state ORDER BY sink`;
