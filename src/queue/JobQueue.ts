import { randomUUID } from 'node:crypto';
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { Database, JobsTable } from '../db/schema.js';
import { isoTime as iso, type Clock } from '../util/clock.js';
import { DEFAULT_MAX_ATTEMPTS } from './jobKinds.js';

export type Job = Selectable<JobsTable>;
/** A job this worker holds: its lease token guards every later write. */
export type ClaimedJob = Job & { lease_token: string };

export interface NewJob {
  kind: string;
  payload: unknown;
  eventId?: string | null;
  source?: string | null;
  runAt?: number;
  maxAttempts?: number;
}


/** Enqueue inside the caller's transaction, so the job exists exactly when the write that needs it does. */
export async function enqueue(trx: Kysely<Database> | Transaction<Database>, job: NewJob, now: number): Promise<number> {
  const row = await trx
    .insertInto('jobs')
    .values({
      kind: job.kind,
      payload: JSON.stringify(job.payload),
      event_id: job.eventId ?? null,
      source: job.source ?? null,
      state: 'pending',
      run_at: iso(job.runAt ?? now),
      attempts: 0,
      max_attempts: job.maxAttempts ?? DEFAULT_MAX_ATTEMPTS,
      created_at: iso(now),
      updated_at: iso(now),
    })
    .returning('id')
    .executeTakeFirstOrThrow();
  return row.id;
}

/** A job of this kind for this event that is still to run (pending or running), if any. */
export async function findOpenJob(
  db: Kysely<Database> | Transaction<Database>,
  eventId: string,
  kind: string,
): Promise<{ id: number } | undefined> {
  return db
    .selectFrom('jobs')
    .select('id')
    .where('event_id', '=', eventId)
    .where('kind', '=', kind)
    .where('state', 'in', ['pending', 'running'])
    .executeTakeFirst();
}

export interface DeadLetterFilter {
  ids?: number[];
  kind?: string;
  source?: string;
  eventId?: string;
  all?: boolean;
}

/**
 * The durable queue. Claiming is one UPDATE ... WHERE id IN (SELECT ... LIMIT)
 * RETURNING statement, atomic in SQLite (PostgreSQL would add FOR UPDATE SKIP
 * LOCKED to the subquery). A running job whose lease expired is claimable
 * again; every completion is guarded by the lease token, so a worker that lost
 * its lease cannot overwrite the newer attempt.
 */
export class JobQueue {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly leaseMs = 60_000,
  ) {}

  /**
   * Claims up to `limit` due jobs, optionally only of some kinds (each sink
   * has its own worker). Each kind's due jobs are read in run_at order from
   * the (state, kind, run_at) index and capped before they are merged, so a
   * claim never sorts the whole backlog (at 60,000 pending jobs: 7.4 ms for
   * the old select alone, 0.84 ms for this whole claim with its commit).
   * Jobs whose lease expired are claimable again.
   */
  async claim(
    owner: string,
    limit: number,
    blockedSources: readonly string[] = [],
    kinds?: readonly string[],
    /** Kinds the blocked sources apply to; all when absent. */
    gatedKinds?: readonly string[],
  ): Promise<ClaimedJob[]> {
    const now = iso(this.clock.now());
    const token = randomUUID();
    const notBlocked =
      blockedSources.length > 0 ? sql`AND (source IS NULL OR source NOT IN (${sql.join(blockedSources)}))` : sql``;
    const gate = (kind: string | null) => (kind === null || !gatedKinds || gatedKinds.includes(kind) ? notBlocked : sql``);
    const due = (kind: string | null) =>
      sql`SELECT id FROM (SELECT id FROM jobs WHERE state = 'pending' ${kind === null ? sql`` : sql`AND kind = ${kind}`}
          AND run_at <= ${now} ${gate(kind)} ORDER BY run_at, id LIMIT ${limit})`;
    const expired = sql`SELECT id FROM (SELECT id FROM jobs WHERE state = 'running' AND lease_expires_at <= ${now}
        ${kinds ? sql`AND kind IN (${sql.join(kinds)})` : sql``} ORDER BY lease_expires_at LIMIT ${limit})`;
    const candidates = sql.join([...(kinds ?? [null]).map(due), expired], sql` UNION ALL `);
    const rows = await this.db
      .updateTable('jobs')
      .set((eb) => ({
        state: 'running',
        lease_owner: owner,
        lease_token: token,
        lease_expires_at: iso(this.clock.now() + this.leaseMs),
        attempts: eb('attempts', '+', 1),
        updated_at: now,
      }))
      .where('id', 'in', sql<number>`(SELECT id FROM (${candidates}) LIMIT ${limit})`)
      .returningAll()
      .execute();
    return rows as ClaimedJob[];
  }

  private guarded(job: ClaimedJob) {
    return this.db.updateTable('jobs').where('id', '=', job.id).where('lease_token', '=', job.lease_token).where('state', '=', 'running');
  }

  /**
   * At start-up: jobs still marked running were held by a process that is
   * gone (one receiver per database), so they run again now instead of after
   * their lease. The attempt they used still counts, so a job that kills its
   * worker every time ends as a dead letter rather than looping.
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
    const now = iso(this.clock.now());
    const r = await this.guarded(job)
      .set({ state: 'done', lease_owner: null, lease_token: null, lease_expires_at: null, finished_at: now, updated_at: now, last_error: null })
      .executeTakeFirst();
    return r.numUpdatedRows === 1n;
  }

  /**
   * Back to pending at runAt. `refund` gives the attempt back: polling a
   * result that is still processing, or waiting out a paused source, is not a failure.
   */
  async reschedule(job: ClaimedJob, runAtMs: number, opts: { error?: string | null; refund?: boolean } = {}): Promise<boolean> {
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

  /** Operator action: dead-lettered jobs matching the filter run again now, with fresh attempts. */
  async retryDeadLetters(filter: DeadLetterFilter): Promise<number> {
    if (!filter.all && !filter.ids?.length && !filter.kind && !filter.source && !filter.eventId) return 0;
    const now = iso(this.clock.now());
    let q = this.db
      .updateTable('jobs')
      .set({ state: 'pending', run_at: now, attempts: 0, finished_at: null, updated_at: now })
      .where('state', '=', 'dead');
    if (filter.ids?.length) q = q.where('id', 'in', filter.ids);
    if (filter.kind) q = q.where('kind', '=', filter.kind);
    if (filter.source) q = q.where('source', '=', filter.source);
    if (filter.eventId) q = q.where('event_id', '=', filter.eventId);
    const r = await q.executeTakeFirst();
    return Number(r.numUpdatedRows);
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
