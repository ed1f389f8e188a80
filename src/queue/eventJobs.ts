import type BetterSqlite3 from 'better-sqlite3';
import { sql, type Insertable, type Kysely, type Transaction } from 'kysely';
import type { Database, JobsTable } from '../db/schema.js';
import { inChunks, oncePerConnection } from '../db/sqliteHelpers.js';
import { isoTime as iso } from '../util/clock.js';
import { jobRow, type NewJob } from './enqueue.js';
import { JobKind } from './jobKinds.js';

/**
 * jobs_event indexes event_id for every kind but process_event (migration 005, from when the
 * ingest transaction queued one process_event job per event; since migration 006 only failed
 * folds and replays make them). SQLite uses a partial index only when the query repeats its
 * condition literally, hence `kind <> 'process_event'` here. Open process_event jobs are found
 * by (state, kind) through jobs_kind_ready: there are only a few.
 *
 * A lookup by event that also says `kind = ?` and `state = 'dead'` (or `'pending'`) writes the
 * state with a unary plus (`+state`). Without it SQLite, which has no statistics here (no
 * ANALYZE), counts two equalities on jobs_kind_ready (state, kind, run_at) as better than one on
 * jobs_event, and walks every job of that state and kind for the event's few rows. Measured with
 * 200,000 dead letters of a sink and 50,000 reads waiting (a year's database, 2.4 million jobs):
 * a sink batch's dropAnsweredDeadLetters 345 ms → 0.45 ms, DELETE_DEAD_JOBS 251 → 0.013 ms, each
 * under the write lock. `state IN (...)` does not need it: SQLite already takes jobs_event there.
 */
const NOT_PROCESS_EVENT = `kind <> '${JobKind.processEvent}'`;
const OPEN_JOB = `SELECT id FROM jobs WHERE event_id = ? AND kind = ? AND ${NOT_PROCESS_EVENT} AND state IN ('pending', 'running') LIMIT 1`;
/**
 * The jobs a new cycle of an (event, kind) pair may reuse: its newest pending job (a running one may be
 * sending an older state: the pair then gets a job of its own after it), else its newest dead one
 * (see REVIVE_DEAD_JOB); none means a new job. A pair has a handful of rows at most, so they are
 * read whole and pickReusable chooses: an `ORDER BY state = 'pending' DESC, id DESC LIMIT 1`
 * sorted them in a temp b-tree, which took 14-15 µs per lookup against 3.7-4.4 µs for this
 * (5,000 lookups on a replayed bench database), a quarter of a replay's queueing.
 */
const REUSABLE_JOBS = `SELECT id, state FROM jobs WHERE event_id = ? AND kind = ? AND ${NOT_PROCESS_EVENT} AND state IN ('pending', 'dead')`;

/**
 * Of a pair's pending and dead jobs, the one a new cycle reuses: the newest pending one, else the
 * newest dead one, as the ORDER BY chose. A pair can have two pending jobs (a running one that went
 * back to pending after the pair got its own); the rows come in no set order (jobs_event's gives
 * the older first).
 */
export function pickReusable(rows: readonly ReusableJob[]): ReusableJob | undefined {
  let pick: ReusableJob | undefined;
  for (const r of rows) {
    const better = pick === undefined || (r.state === pick.state ? r.id > pick.id : r.state === 'pending');
    if (better) pick = r;
  }
  return pick && { id: pick.id, state: pick.state };
}
/**
 * A new cycle for an (event, kind) pair whose job was dead-lettered (a replay, a new revision)
 * runs that job again rather than adding a second: the dead letter would otherwise stay listed
 * and alerting after the delivery succeeded, and a later `dead-letters retry` would send it
 * twice. The newest dead job is revived, queued anew (created_at too, or `status` would call it
 * queued weeks ago); older dead ones of the pair (left by earlier versions, which added a job
 * each time) are deleted (DELETE_DEAD_JOBS): superseded, and the pair's `deliveries` row keeps
 * what they failed on.
 */
const REVIVE_DEAD_JOB = `UPDATE jobs SET state = 'pending', run_at = @now, attempts = 0, max_attempts = @max_attempts, last_error = NULL, finished_at = NULL,
  lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, created_at = @now, updated_at = @now WHERE id = @id AND state = 'dead'`;
const DELETE_DEAD_JOBS = `DELETE FROM jobs WHERE event_id = @event_id AND kind = @kind AND ${NOT_PROCESS_EVENT} AND +state = 'dead' AND id <> @id`;
/**
 * An event's dead-lettered fold (process_event) run again by a replay through processing, in place
 * (as REVIVE_DEAD_JOB for the other kinds): a new job beside it left the dead letter listed and
 * alerting after the replay had processed the event, and a later `dead-letters retry` folded and
 * read the event once more. Takes the replay's payload (`refetch`). process_event jobs are not in
 * jobs_event, so the replay finds them by id (openProcessEventJobs) and the delete goes by id.
 */
const REVIVE_DEAD_PROCESS_EVENT = `UPDATE jobs SET state = 'pending', payload = @payload, source = @source, run_at = @run_at, attempts = 0, max_attempts = @max_attempts,
  last_error = NULL, finished_at = NULL, lease_owner = NULL, lease_token = NULL, lease_expires_at = NULL, created_at = @created_at, updated_at = @updated_at
  WHERE id = @id AND state = 'dead' AND kind = '${JobKind.processEvent}'`;
const DELETE_DEAD_PROCESS_EVENT = `DELETE FROM jobs WHERE id = ? AND state = 'dead' AND kind = '${JobKind.processEvent}'`;
const OPEN_PROCESS_EVENT_JOB = `SELECT id FROM jobs WHERE state IN ('pending', 'running') AND kind = '${JobKind.processEvent}' AND event_id = ? LIMIT 1`;
const OPEN_PROCESS_EVENT_IDS = `SELECT event_id FROM jobs WHERE state IN ('pending', 'running') AND kind = '${JobKind.processEvent}'`;

/** The SQL term under which jobs_event covers a lookup by event_id (see OPEN_JOB). */
export const jobsByEventTerm = sql.raw<boolean>(NOT_PROCESS_EVENT);

/**
 * findOpenJob and enqueue as prepared statements on a better-sqlite3
 * connection, for callers that queue thousands of jobs in their own
 * transaction (the CLI's replay): kysely built and compiled each statement
 * per row, which was most of the replay CLI's CPU time (bench/README.md).
 */
export function preparedJobWrites(sqlite: BetterSqlite3.Database) {
  const open = sqlite.prepare<[string, string], number>(OPEN_JOB).pluck();
  const reusable = sqlite.prepare<[string, string], ReusableJob>(REUSABLE_JOBS);
  const restart = sqlite.prepare<[string, string, number]>(
    "UPDATE jobs SET run_at = ?, attempts = 0, last_error = NULL, updated_at = ? WHERE id = ? AND state = 'pending'",
  );
  const revive = sqlite.prepare<{ now: string; max_attempts: number; id: number }>(REVIVE_DEAD_JOB);
  const deleteDead = sqlite.prepare<{ event_id: string; kind: string; id: number }>(DELETE_DEAD_JOBS);
  const reviveProcessEvent = sqlite.prepare<Pick<Insertable<JobsTable>, 'payload' | 'source' | 'run_at' | 'max_attempts' | 'created_at' | 'updated_at'> & { id: number }>(REVIVE_DEAD_PROCESS_EVENT);
  const deleteDeadProcessEvent = sqlite.prepare<[number]>(DELETE_DEAD_PROCESS_EVENT);
  const openProcessEvent = sqlite.prepare<[string], number>(OPEN_PROCESS_EVENT_JOB).pluck();
  const openProcessEventIds = sqlite.prepare<[], string>(OPEN_PROCESS_EVENT_IDS).pluck();
  const cursor = sqlite.prepare<[], number>('SELECT last_event_rowid FROM processing_cursor').pluck();
  const insert = sqlite.prepare<Insertable<JobsTable>>(
    `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, last_error, created_at, updated_at)
     VALUES (@kind, @payload, @event_id, @source, @state, @run_at, @attempts, @max_attempts, @last_error, @created_at, @updated_at)`,
  );
  return {
    findOpenJob: (eventId: string, kind: string): { id: number } | undefined => {
      const id = kind === JobKind.processEvent ? openProcessEvent.get(eventId) : open.get(eventId, kind);
      return id === undefined ? undefined : { id };
    },
    /** The job a new cycle of the pair reuses (see REUSABLE_JOBS). */
    findReusableJob: (eventId: string, kind: string): ReusableJob | undefined => pickReusable(reusable.all(eventId, kind)),
    /** A pending job starts over: due now, with all its attempts (see restartPendingJob). */
    restartPendingJob: (id: number, now: number): void => {
      restart.run(iso(now), iso(now), id);
    },
    /** The pair's dead job `id`, pending again for a new cycle; the pair's other dead jobs deleted (see REVIVE_DEAD_JOB). */
    reviveDeadJob: (id: number, eventId: string, kind: string, maxAttempts: number, now: number): void => {
      revive.run({ now: iso(now), max_attempts: maxAttempts, id });
      deleteDead.run({ event_id: eventId, kind, id });
    },
    /**
     * A process_event job for a replay: the newest of `deadIds` (the event's dead folds) run again as
     * `job`, the others deleted (see REVIVE_DEAD_PROCESS_EVENT); a new job when there is none. Its id.
     */
    requeueProcessEvent: (job: NewJob, deadIds: readonly number[], now: number): number => {
      const [newest, ...older] = [...deadIds].sort((a, b) => b - a);
      const row = jobRow(job, now);
      const { payload, source, run_at, max_attempts, created_at, updated_at } = row;
      if (newest === undefined || reviveProcessEvent.run({ id: newest, payload, source, run_at, max_attempts, created_at, updated_at }).changes === 0) {
        return Number(insert.run({ last_error: null, ...row }).lastInsertRowid);
      }
      for (const id of older) deleteDeadProcessEvent.run(id);
      return newest;
    },
    /** Events with a process_event job still to run: one read for a whole batch of lookups. */
    openProcessEventIds: (): Set<string> => new Set(openProcessEventIds.all()),
    /** events.rowid of the last event processing has taken: later events are still to be folded. */
    processingCursor: (): number => cursor.get() ?? 0,
    enqueue: (job: NewJob, now: number): number => Number(insert.run({ last_error: null, ...jobRow(job, now) }).lastInsertRowid),
  };
}

/** preparedJobWrites prepared once per connection (the processing layer's folds queue their reads with it). */
export const preparedJobWritesOn = oncePerConnection(preparedJobWrites);

/**
 * A pending job starts over, due now with all its attempts: for a new delivery cycle (a replay,
 * a new revision) that reuses the job, which may have been backing off after failures.
 */
export async function restartPendingJob(db: Kysely<Database> | Transaction<Database>, id: number, now: number): Promise<void> {
  await db.updateTable('jobs').set({ run_at: iso(now), attempts: 0, last_error: null, updated_at: iso(now) }).where('id', '=', id).where('state', '=', 'pending').execute();
}

export interface ReusableJob {
  id: number;
  state: 'pending' | 'dead';
}

/**
 * The dead jobs of these events' (event, kind) pairs, deleted: their delivery has just been made
 * by a newer job of the pair (the deliveries row says so). Raw SQL on jobs_event (`+state`: see
 * NOT_PROCESS_EVENT), one statement per chunk: it runs with every completed batch of a sink.
 * When the kind has no dead job at all (the usual case; one seek on jobs_kind_ready, in the
 * caller's transaction), nothing is looked up per event: the delete's 256 seeks took 0.6 ms of
 * each file sink batch's completion, under the write lock.
 */
export async function dropAnsweredDeadLetters(db: Kysely<Database> | Transaction<Database>, kind: string, eventIds: readonly string[]): Promise<void> {
  if (eventIds.length === 0) return;
  const anyDead = await sql<{ one: number }>`SELECT 1 AS one FROM jobs WHERE state = 'dead' AND kind = ${kind} LIMIT 1`.execute(db);
  if (anyDead.rows.length === 0) return;
  for (const chunk of inChunks(eventIds)) {
    await sql`DELETE FROM jobs WHERE event_id IN (${sql.join(chunk)}) AND kind = ${kind} AND ${sql.raw(NOT_PROCESS_EVENT)} AND +state = 'dead'`.execute(db);
  }
}

/** The job a new cycle of an (event, kind) pair reuses (see REUSABLE_JOBS). */
export async function findReusableJob(db: Kysely<Database> | Transaction<Database>, eventId: string, kind: string): Promise<ReusableJob | undefined> {
  const rows = await db
    .selectFrom('jobs')
    .select(['id', 'state'])
    .where('event_id', '=', eventId)
    .where('kind', '=', kind)
    .where(jobsByEventTerm)
    .where('state', 'in', ['pending', 'dead'])
    .execute();
  return pickReusable(rows as ReusableJob[]);
}

/** The pair's dead job `id`, pending again for a new cycle; the pair's other dead jobs deleted (see REVIVE_DEAD_JOB). */
export async function reviveDeadJob(db: Kysely<Database> | Transaction<Database>, id: number, eventId: string, kind: string, maxAttempts: number, now: number): Promise<void> {
  const at = iso(now);
  await db
    .updateTable('jobs')
    .set({ state: 'pending', run_at: at, attempts: 0, max_attempts: maxAttempts, last_error: null, finished_at: null, lease_owner: null, lease_token: null, lease_expires_at: null, created_at: at, updated_at: at })
    .where('id', '=', id)
    .where('state', '=', 'dead')
    .execute();
  // `+state`: through jobs_event, not every dead job of the kind (see NOT_PROCESS_EVENT).
  await db.deleteFrom('jobs').where('event_id', '=', eventId).where('kind', '=', kind).where(jobsByEventTerm).where(sql<string>`+state`, '=', 'dead').where('id', '<>', id).execute();
}

/** A job of this kind for this event that is still to run (pending or running), if any. */
export async function findOpenJob(
  db: Kysely<Database> | Transaction<Database>,
  eventId: string,
  kind: string,
): Promise<{ id: number } | undefined> {
  let q = db.selectFrom('jobs').select('id').where('event_id', '=', eventId).where('kind', '=', kind);
  if (kind !== JobKind.processEvent) q = q.where(jobsByEventTerm);
  return q.where('state', 'in', ['pending', 'running']).executeTakeFirst();
}
