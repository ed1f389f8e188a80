import type { Kysely, Transaction } from 'kysely';
import type { Database } from '../db/schema.js';
import { immediateTransaction } from '../db/immediateTransaction.js';
import { insertElseUpdate, isoMovedBack } from '../db/sqliteHelpers.js';
import type { HeldSources, SourceGate } from '../queue/Worker.js';
import type { Clock } from '../util/clock.js';

/**
 * Sources whose API key was refused. Keys are personal and die the moment
 * their creator leaves the organization (spec 5), so a 401/403 pauses all
 * fetching for the source instead of burning every job's attempts. The pause
 * is kept in the database (visible to /readyz, metrics and the CLI). Every
 * `probeMs` one job of the source is let through to try the key again (one
 * request per period, not a batch of them all refused); the first that goes
 * through resumes the source, and its held jobs are claimed at once. A restart
 * with a new key clears the pauses (see clearAll).
 */
export class SourcePauses implements SourceGate {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly clock: Clock,
    private readonly probeMs = 5 * 60_000,
  ) {}

  async blockedSources(now: number, alsoBlocked: readonly string[] = []): Promise<HeldSources> {
    const rows = await this.db.selectFrom('source_pauses').select(['source', 'probe_after']).execute();
    const held: HeldSources = { blocked: [], probes: [] };
    for (const r of rows) {
      if (Date.parse(r.probe_after) > now || alsoBlocked.includes(r.source)) held.blocked.push(r.source);
      else if (!(await this.hasWork(r.source))) {
        // Nothing of the source waits any more (a source no longer configured whose reads were
        // given up, then discarded or retried under another name): a pause with nothing to probe
        // stayed in /readyz, `status` and receiver_source_paused until a restart. Its next job
        // tries the source again, and pauses it again if it is still refused or not configured.
        await this.db.deleteFrom('source_pauses').where('source', '=', r.source).where('probe_after', '=', r.probe_after).execute();
      } else {
        // This claim takes the probe; the next one is a period on (kept in the database, so a
        // restart does not probe early; a failed probe sets it again from its own answer).
        await this.db
          .updateTable('source_pauses')
          .set({ probe_after: new Date(now + this.probeMs).toISOString() })
          .where('source', '=', r.source)
          .execute();
        held.probes.push(r.source);
      }
    }
    return held;
  }

  /** Whether a job of the source is pending or running (one walk of jobs_ready's pending and running rows at most, once a probe period). */
  private async hasWork(source: string): Promise<boolean> {
    const job = await this.db.selectFrom('jobs').select('id').where('state', 'in', ['pending', 'running']).where('source', '=', source).limit(1).executeTakeFirst();
    return job !== undefined;
  }

  /**
   * The wall clock stepped back by `stepMs` (Worker's onClockStepBack): each probe is due a period
   * after the last, not a step later. Only a probe_after more than a period ahead was set on the
   * old clock (each is set at most a period on): a restart within a step already handled sees the
   * step again (events received before it are still dated ahead), and moving every probe_after
   * after now then moved a pause made since back by the step too, probed at once at the restart.
   * A pause made on the old clock less than a period ahead stays: probed at most a period from now.
   */
  async moveBack(nowMs: number, stepMs: number): Promise<void> {
    await this.db
      .updateTable('source_pauses')
      .set({ probe_after: isoMovedBack('probe_after', stepMs) })
      .where('probe_after', '>', new Date(nowMs + this.probeMs).toISOString())
      .execute();
  }

  /** The probe's job sent no request: the next claim probes again (it would otherwise wait a period). */
  async probeAgain(source: string): Promise<void> {
    await this.db.updateTable('source_pauses').set({ probe_after: new Date(this.clock.now()).toISOString() }).where('source', '=', source).execute();
  }

  /**
   * Returns whether this call paused the source (false: it was paused already: a probe, or a read
   * in flight beside this one). Two statements: a resume between them (a read beside this one
   * answered) deletes the row the update was for; the pause is then made again, by this call.
   */
  async pause(source: string, status: number, detail: string): Promise<boolean> {
    const now = this.clock.now();
    const probeAfter = new Date(now + this.probeMs).toISOString();
    return insertElseUpdate(
      () =>
        this.db
          .insertInto('source_pauses')
          .values({ source, paused_at: new Date(now).toISOString(), status, detail, probe_after: probeAfter })
          .onConflict((oc) => oc.column('source').doNothing())
          .executeTakeFirst(),
      () => this.db.updateTable('source_pauses').set({ status, detail, probe_after: probeAfter }).where('source', '=', source).executeTakeFirst(),
      `could not record the pause of source ${source}: it was resumed at each try`,
    );
  }

  /**
   * Read first: after nearly every successful read nothing is paused, and a DELETE takes the
   * database's write lock even when it deletes nothing. From a separate `work` process, that was
   * one more lock taken per result read, which the `serve` process's ingest commit could find held.
   */
  async resume(source: string): Promise<void> {
    const paused = await this.db.selectFrom('source_pauses').select('source').where('source', '=', source).executeTakeFirst();
    if (paused) await this.db.deleteFrom('source_pauses').where('source', '=', source).execute();
  }

  async list() {
    return this.db.selectFrom('source_pauses').selectAll().orderBy('source').execute();
  }

  /**
   * At start-up the configuration may hold a new key: try every source again, now. The jobs a
   * pause held back were rescheduled to its probe time (up to 5 minutes on); they are due at
   * once, so a restart with a working key resumes at once. Returns how many were brought forward.
   * (A result read brought forward still keeps its 30 s poll spacing: the handler enforces it.)
   */
  async clearAll(): Promise<number> {
    // One transaction: retried whole when another process holds the write lock (the workers'
    // start), the count is the one that committed.
    return immediateTransaction(this.db, (trx) => this.clearAllIn(trx));
  }

  private async clearAllIn(db: Transaction<Database>): Promise<number> {
    const now = new Date(this.clock.now()).toISOString();
    // Held back by the pause: rescheduled to its probe (pause time + the probe period), so due no
    // later than the pause's probe_after. A job due later waits for something else (a Retry-After,
    // a long backoff) and keeps its time.
    const r = await db
      .updateTable('jobs')
      .set({ run_at: now, updated_at: now })
      .where('state', '=', 'pending')
      .where('run_at', '>', now)
      .where((eb) =>
        eb.exists(
          eb
            .selectFrom('source_pauses')
            .select('source_pauses.source')
            .whereRef('source_pauses.source', '=', 'jobs.source')
            .whereRef('jobs.run_at', '<=', 'source_pauses.probe_after'),
        ),
      )
      .executeTakeFirst();
    await db.deleteFrom('source_pauses').execute();
    return Number(r.numUpdatedRows);
  }
}
