import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { Database, JobsTable } from '../db/schema.js';
import { immediateTransaction } from '../db/immediateTransaction.js';
import { inChunks, isoMovedBack } from '../db/sqliteHelpers.js';
import { writeBatches, type BatchOutcome } from '../db/writeInBatches.js';
import { isoTime as iso, type Clock } from '../util/clock.js';
import { groupBy } from '../util/collections.js';
import { ClaimStatements } from './claimStatements.js';
import { deadLetterIds, type DeadLetterFilter } from './deadLetterIds.js';
import { JobKind } from './jobKinds.js';

export type Job = Selectable<JobsTable>;
/** A job this worker holds: its lease token guards every later write. */
export type ClaimedJob = Job & { lease_token: string };

/** Dead letters per transaction of a retry (retryDeadLetters): about 20 ms of write lock each. */
export const RETRY_BATCH = 500;

/** Told after each transaction of a bulk operation: how many of `total` chosen jobs it has been through. */
export type BatchProgress = (done: number, total: number) => void;

/** writeBatches' onBatch for `total` jobs chosen, RETRY_BATCH per transaction, as a BatchProgress. */
const throughChosen = (onBatch: BatchProgress | undefined, total: number) => (_written: number, batches: number) =>
  onBatch?.(Math.min(total, batches * RETRY_BATCH), total);

export { immediateTransaction };
export { enqueue, type NewJob } from './enqueue.js';
export {
  dropAnsweredDeadLetters,
  findOpenJob,
  findReusableJob,
  jobsByEventTerm,
  preparedJobWrites,
  preparedJobWritesOn,
  restartPendingJob,
  reviveDeadJob,
  type ReusableJob,
} from './eventJobs.js';
export { deadLetterIds, sourceTerm, type DeadLetterFilter } from './deadLetterIds.js';

/** Whether the filter chooses anything (the operator commands require a choice; `all` is one). */
const chosen = (f: DeadLetterFilter): boolean => Boolean(f.all || f.ids?.length || f.kind || f.source || f.eventId);

/**
 * The durable queue. Claiming is one UPDATE ... WHERE id IN (SELECT ... LIMIT)
 * RETURNING statement, atomic in SQLite (PostgreSQL would add FOR UPDATE SKIP
 * LOCKED to the subquery). A running job whose lease expired is claimable
 * again; every completion is guarded by the lease token, so a worker that lost
 * its lease cannot overwrite the newer attempt.
 */
export class JobQueue {
  /** The claim's queries, compiled once per shape. */
  private readonly claims: ClaimStatements;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly leaseMs = 60_000,
  ) {
    this.claims = new ClaimStatements(db);
  }

  /**
   * Claims up to `limit` due jobs, optionally only of some kinds (each sink
   * has its own worker). Each kind's due jobs are read in run_at order from
   * the (state, kind, run_at) index and capped before they are merged, so a
   * claim never sorts the whole backlog (at 60,000 pending jobs: 7.4 ms for
   * the old select alone, 0.84 ms for this whole claim with its commit).
   * Jobs whose lease expired are claimable again. The queries are compiled
   * once per shape (ClaimStatements).
   */
  async claim(
    owner: string,
    limit: number,
    blockedSources: readonly string[] = [],
    kinds?: readonly string[],
    /** Kinds the blocked sources apply to; all when absent. */
    gatedKinds?: readonly string[],
    opts: {
      /**
       * Look with a read first and claim only if something is due: an idle
       * worker's poll then never takes the write lock (which the ingest
       * committer would have to wait out), so idle polls can be frequent.
       */
      checkFirst?: boolean;
      /** Sources held like the blocked ones, except for one job each (of a gated kind): a paused source's probe. */
      probes?: readonly string[];
      /** The same, their one job taken in its turn by run_at with the others' due jobs, not first (a failing source: Worker.claim). */
      oneEach?: readonly string[];
    } = {},
  ): Promise<ClaimedJob[]> {
    const now = iso(this.clock.now());
    const shape = { blocked: blockedSources, probes: opts.probes ?? [], oneEach: opts.oneEach ?? [], kinds, gatedKinds };
    return this.claims.claim(shape, { now, limit, owner, token: randomUUID(), expires: iso(this.clock.now() + this.leaseMs) }, opts.checkFirst ?? false);
  }

  /**
   * The latest time the database holds of the receiver's clock (the newest event's arrival, the
   * newest finished job of `kinds`; each one index read), or null. A worker starting with its clock
   * before it finds the clock stepped back while the receiver was stopped.
   */
  async latestRecordedTime(kinds: readonly string[]): Promise<number | null> {
    const times: (string | null | undefined)[] = [
      (await this.db.selectFrom('events').select((eb) => eb.fn.max('received_at').as('at')).executeTakeFirst())?.at,
    ];
    for (const kind of kinds) {
      times.push((await this.db.selectFrom('jobs').select((eb) => eb.fn.max('run_at').as('at')).where('state', '=', 'done').where('kind', '=', kind).executeTakeFirst())?.at);
    }
    const ms = times.filter((t): t is string => typeof t === 'string').map((t) => Date.parse(t)).filter(Number.isFinite);
    return ms.length > 0 ? Math.max(...ms) : null;
  }

  /**
   * The wall clock stepped back by `stepMs` (NTP setting right a clock that ran fast): pending jobs
   * of `kinds` due after `nowMs` and scheduled after it (updated_at, the time run_at was set) were
   * scheduled on the old clock, so they move back by the step and keep the wait they had left.
   * Left as they were, each waited the step on top (two hours of result reads and retries held
   * after a two-hour step). updated_at moves with run_at: a step seen again (a restart while the
   * events received before it are still dated ahead) then moves nothing twice. A job scheduled on
   * the clock as it is now is not moved: moved, a Retry-After told since the step (or a job in
   * flight at it) ran a step early, at once after a two-hour step.
   */
  async movePendingBack(kinds: readonly string[], nowMs: number, stepMs: number): Promise<number> {
    if (kinds.length === 0 || !(stepMs > 0)) return 0;
    const r = await this.db
      .updateTable('jobs')
      .set({ run_at: isoMovedBack('run_at', stepMs), updated_at: isoMovedBack('updated_at', stepMs) })
      .where('state', '=', 'pending')
      .where('kind', 'in', kinds)
      .where('run_at', '>', iso(nowMs))
      .where('updated_at', '>', iso(nowMs))
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  private guarded(job: ClaimedJob) {
    return this.db.updateTable('jobs').where('id', '=', job.id).where('lease_token', '=', job.lease_token).where('state', '=', 'running');
  }

  /**
   * At start-up: jobs still marked running were held by a process that is
   * gone (the caller holds the database's workers lock), so they run again now instead of after
   * their lease. The attempt they used still counts: one that was on its last attempt is
   * dead-lettered by the worker that claims it next, without running (a job that kills its
   * worker every time would otherwise loop, taking the process down at every start).
   */
  async releaseOrphans(): Promise<number> {
    const now = iso(this.clock.now());
    const r = await this.db
      .updateTable('jobs')
      .set({ state: 'pending', run_at: now, lease_owner: null, lease_token: null, lease_expires_at: null, updated_at: now })
      .where('state', '=', 'running')
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  }

  /** Done. Returns false when the lease was lost (another worker owns the job now). */
  async complete(job: ClaimedJob): Promise<boolean> {
    return (await this.completeMany([job])).length === 1;
  }

  /**
   * Marks many jobs done, each still guarded by its lease token; returns those
   * completed (a job whose lease was lost is left to the newer attempt).
   * `within` runs in the same BEGIN IMMEDIATE transaction with the jobs that
   * were completed, so their records (a sink's `deliveries` rows) commit
   * together with them or not at all: one transaction per batch instead of two
   * per job. A lock held elsewhere is waited out a little (see
   * immediateTransaction); if it still fails, the jobs stay running and run
   * again when their lease expires (at least once).
   */
  async completeMany(jobs: readonly ClaimedJob[], within?: (trx: Transaction<Database>, completed: ClaimedJob[]) => Promise<void>): Promise<ClaimedJob[]> {
    if (jobs.length === 0) return [];
    const markDone = async (db: Kysely<Database> | Transaction<Database>): Promise<ClaimedJob[]> => {
      const now = iso(this.clock.now());
      const done = new Set<number>();
      for (const [token, ids] of groupBy(jobs, (j) => j.lease_token, (j) => j.id)) {
        for (const chunk of inChunks(ids)) {
          const rows = await db
            .updateTable('jobs')
            // run_at = finished_at: the prune's range on jobs_ready (state, run_at) is then exact
            // (pruneBatch); the index entry is rewritten for the state anyway.
            .set({ state: 'done', lease_owner: null, lease_token: null, lease_expires_at: null, run_at: now, finished_at: now, updated_at: now, last_error: null })
            .where('id', 'in', chunk)
            .where('lease_token', '=', token)
            .where('state', '=', 'running')
            .returning('id')
            .execute();
          for (const r of rows) done.add(r.id);
        }
      }
      return jobs.filter((j) => done.has(j.id));
    };
    // One job without records: a single UPDATE is atomic by itself.
    if (!within && jobs.length === 1) return markDone(this.db);
    return immediateTransaction(this.db, async (trx) => {
      const done = await markDone(trx);
      if (within && done.length > 0) await within(trx, done);
      return done;
    });
  }

  /**
   * Back to pending at runAt. `refund` gives the attempt back: polling a
   * result that is still processing, or waiting out a paused source, is not a failure.
   */
  async reschedule(job: ClaimedJob, runAtMs: number, opts: { error?: string | null; refund?: boolean; attempts?: number } = {}): Promise<boolean> {
    const now = iso(this.clock.now());
    const r = await this.guarded(job)
      .set((eb) => ({
        state: 'pending',
        run_at: iso(runAtMs),
        lease_owner: null,
        lease_token: null,
        lease_expires_at: null,
        updated_at: now,
        ...(opts.error !== undefined ? { last_error: opts.error } : {}),
        ...(opts.refund ? { attempts: eb('attempts', '-', 1) } : {}),
        ...(opts.attempts !== undefined ? { attempts: opts.attempts } : {}),
      }))
      .executeTakeFirst();
    return r.numUpdatedRows === 1n;
  }

  /** Give up: the job stays, state `dead`, with its last error, until an operator retries it. */
  async deadLetter(job: ClaimedJob, error: string): Promise<boolean> {
    const now = iso(this.clock.now());
    const r = await this.guarded(job)
      .set({ state: 'dead', last_error: error, lease_owner: null, lease_token: null, lease_expires_at: null, finished_at: now, updated_at: now })
      .executeTakeFirst();
    return r.numUpdatedRows === 1n;
  }

  /**
   * Operator action: dead-lettered jobs matching the filter run again now, with fresh attempts.
   * Chosen with one read, then run again in transactions of RETRY_BATCH jobs, `pause` between
   * them, and `withEach` in each (what else the caller marks with them, in the same transaction):
   * one transaction for them all held the write lock 4.7 s at 200,000 dead letters (a sink's
   * consumer down past its retries), while deliveries wait WRITE_TIMEOUT_MS for it (5 s).
   * Stopped between two, what was run again stays so and the rest stay dead letters. `onBatch`
   * is told after each transaction how many of the jobs chosen it has been through.
   */
  async retryDeadLetters(
    filter: DeadLetterFilter,
    opts: { dryRun?: boolean; pause?: () => Promise<void>; withEach?: (trx: Transaction<Database>, ids: number[]) => Promise<void>; onBatch?: BatchProgress } = {},
  ): Promise<number> {
    if (!chosen(filter)) return 0;
    if (opts.dryRun) {
      const row = await this.db.selectFrom('jobs').select(sql<number>`count(*)`.as('n')).where('id', 'in', deadLetterIds(this.db, filter)).executeTakeFirst();
      return Number(row?.n ?? 0);
    }
    return (await this.retryDeadLettersStoppable(filter, opts)).written;
  }

  /**
   * retryDeadLetters (not a dry run) that `signal` stops between two transactions (an operator's
   * Ctrl-C): the jobs run again, and whether the signal stopped it before its last transaction.
   */
  async retryDeadLettersStoppable(
    filter: DeadLetterFilter,
    opts: { pause?: () => Promise<void>; withEach?: (trx: Transaction<Database>, ids: number[]) => Promise<void>; onBatch?: BatchProgress; signal?: AbortSignal } = {},
  ): Promise<BatchOutcome> {
    if (!chosen(filter)) return { written: 0, stopped: false };
    const now = iso(this.clock.now());
    const ids = [...new Set((await deadLetterIds(this.db, filter).execute()).map((r) => r.id))];
    return writeBatches(
      this.db,
      inChunks(ids, RETRY_BATCH),
      async (trx, chunk) => {
        const r = await trx
          .updateTable('jobs')
          // requeued_at: a handler may measure its own windows from the retry (a result read's give-up).
          .set({ state: 'pending', run_at: now, attempts: 0, finished_at: null, created_at: now, updated_at: now, payload: sql<string>`CASE WHEN json_valid(payload) AND json_type(payload) = 'object' THEN json_set(payload, '$.requeued_at', ${now}) ELSE payload END` })
          .where('id', 'in', chunk)
          // Still dead: another retry may have taken it since the read. Unary +: by the ids, not
          // through an index on state (the planner took jobs_lease, reading every dead letter for
          // each batch: 27 s for 200,000 in batches).
          .where(sql<string>`+state`, '=', 'dead')
          .executeTakeFirst();
        await opts.withEach?.(trx, chunk);
        return Number(r.numUpdatedRows);
      },
      { pause: opts.pause, signal: opts.signal, onBatch: throughChosen(opts.onBatch, ids.length) },
    );
  }

  /**
   * Operator action: dead-lettered jobs matching the filter are deleted, for good: the ones meant
   * to stay unsent (a sink removed for good, a delivery its filters no longer want, a result
   * already sent as given_up), which would otherwise hold the dead-letter alert. What they failed
   * on stays recorded where it belongs (a delivery's `deliveries` row, a read's result row).
   * A dead fold or read of an event not settled yet is kept: it is the only trace of an event
   * processing never finished (retry it, or replay the event). `dryRun` only counts. The selection
   * is read first (no lock), then deleted RETRY_BATCH jobs per transaction with `pause` between
   * them, each delete checking again that the job is still dead and may go: one transaction held
   * the write lock for 6 s at 140,000 dead letters (cold cache), and a running receiver answered
   * 503 meanwhile. `onBatch` as for retryDeadLetters; `signal` stops it between two transactions
   * (an operator's Ctrl-C), and `stopped` says it did: `discarded` counts those deleted before.
   */
  async discardDeadLetters(
    filter: DeadLetterFilter,
    opts: { dryRun?: boolean; pause?: () => Promise<void>; onBatch?: BatchProgress; signal?: AbortSignal } = {},
  ): Promise<{ discarded: { kind: string; n: number }[]; kept: { id: number; kind: string; event_id: string | null }[]; stopped: boolean }> {
    if (!chosen(filter)) return { discarded: [], kept: [], stopped: false };
    const rows = await this.db
      .selectFrom('jobs')
      .leftJoin('event_processing', 'event_processing.event_id', 'jobs.event_id')
      .select(['jobs.id', 'jobs.kind', 'jobs.event_id', 'event_processing.state as event_state'])
      .where('jobs.id', 'in', deadLetterIds(this.db, filter))
      .execute();
    const traced = [JobKind.fetchResult, JobKind.processEvent] as string[];
    const unfinished = (r: (typeof rows)[number]) => traced.includes(r.kind) && r.event_state !== 'settled';
    const kept = rows.filter(unfinished).map((r) => ({ id: r.id, kind: r.kind, event_id: r.event_id }));
    // A dry run counts what it read; a discard what it deleted (a job retried or its event unsettled
    // since the read stays, and is not counted).
    const gone = rows.filter((r) => !unfinished(r));
    let counted: { kind: string }[] = gone;
    let stopped = false;
    if (!opts.dryRun) ({ deleted: counted, stopped } = await this.deleteDeadLetters(gone.map((r) => r.id), traced, opts));
    const byKind = new Map<string, number>();
    for (const r of counted) byKind.set(r.kind, (byKind.get(r.kind) ?? 0) + 1);
    return { discarded: [...byKind].map(([kind, n]) => ({ kind, n })).sort((a, b) => a.kind.localeCompare(b.kind)), kept, stopped };
  }

  /**
   * The batched delete of discardDeadLetters: `ids`, RETRY_BATCH per transaction, each still dead
   * and, if of a `traced` kind, of a settled event. Returns the kinds deleted, and whether `signal` stopped it.
   */
  private async deleteDeadLetters(
    ids: number[],
    traced: string[],
    opts: { pause?: () => Promise<void>; onBatch?: BatchProgress; signal?: AbortSignal },
  ): Promise<{ deleted: { kind: string }[]; stopped: boolean }> {
    const deleted: { kind: string }[] = [];
    const { stopped } = await writeBatches(
      this.db,
      inChunks(ids, RETRY_BATCH),
      async (trx, chunk) => {
        const rows = await trx
          .deleteFrom('jobs')
          .where('id', 'in', chunk)
          // Unary +: by the ids (the primary key), not through jobs_lease over every dead letter.
          .where(sql<string>`+state`, '=', 'dead')
          // Its event still settled (read before the lock): a fold or read of an unsettled one stays.
          .where((eb) =>
            eb.or([
              eb('kind', 'not in', traced),
              eb.exists(eb.selectFrom('event_processing').select('event_processing.event_id').whereRef('event_processing.event_id', '=', 'jobs.event_id').where('event_processing.state', '=', 'settled')),
            ]),
          )
          .returning('kind')
          .execute();
        deleted.push(...rows);
        return rows.length;
      },
      { pause: opts.pause, signal: opts.signal, onBatch: throughChosen(opts.onBatch, ids.length) },
    );
    return { deleted, stopped };
  }

  async listDeadLetters(limit = 100): Promise<Job[]> {
    return this.db.selectFrom('jobs').selectAll().where('state', '=', 'dead').orderBy('updated_at', 'desc').limit(limit).execute();
  }

  /** Earliest run_at of a pending job, for the worker's sleep. */
  async nextRunAt(): Promise<number | null> {
    const row = await this.db.selectFrom('jobs').select((eb) => eb.fn.min('run_at').as('next')).where('state', '=', 'pending').executeTakeFirst();
    return row?.next ? Date.parse(row.next) : null;
  }
}
