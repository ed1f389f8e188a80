import { sql, type Kysely, type Transaction } from 'kysely';
import type { Database } from '../../db/schema.js';
import type { SinkConfig } from '../../sinks/sinkConfig.js';
import { deadLetterIds, JobQueue, type DeadLetterFilter } from '../../queue/JobQueue.js';
import { systemClock } from '../../util/clock.js';
import { databasePathOf } from '../cliConfig.js';
import { batchPause } from '../batchPause.js';
import { openCliDatabase } from '../cliDatabase.js';
import { warnUnknownSource } from '../unknownSource.js';
import { saidStopped, sayHowFar, stoppedBySignal, UsageError } from '../errors.js';
import { printJson, printRows, printUpToLimit, shownError, type CliIo } from '../io.js';
import { stopOnInterrupt } from '../onInterrupt.js';
import { count, ofTotal, progressFor, type Progress } from '../progress.js';
import { applySinkMaxAttempts, configuredSinks, disabledSinkWarnings, giveSinkMaxAttempts, sinkJobKind } from '../sinkOps.js';

export interface DeadLetterListOptions {
  database?: string;
  kind?: string;
  source?: string;
  limit: number;
  json?: boolean;
}

export interface DeadLetterRetryOptions {
  database?: string;
  id?: string[];
  all?: boolean;
  kind?: string;
  source?: string;
  event?: string;
  json?: boolean;
  /** Progress lines on stderr also when it is not a terminal. */
  progress?: boolean;
}

export async function runDeadLettersList(io: CliIo, o: DeadLetterListOptions): Promise<number> {
  const database = openCliDatabase(databasePathOf(io.env, o.database), { readOnly: true });
  try {
    const q = database.db
      .selectFrom('jobs')
      .select(['id', 'kind', 'event_id', 'source', 'attempts', 'max_attempts', 'last_error', 'created_at', 'finished_at'])
      .where('id', 'in', deadLetterIds(database.db, { all: true, ...(o.kind ? { kind: o.kind } : {}), ...(o.source ? { source: o.source } : {}) }));
    const rows = (await q.orderBy('finished_at', 'desc').orderBy('id', 'desc').limit(o.limit + 1).execute()).map((r) => ({ ...r, last_error: shownError(r.last_error) }));
    if (rows.length === 0) warnUnknownSource(io, database.sqlite, o.source);
    printUpToLimit(io, rows, o.limit, 'dead letters', (listed) =>
      printRows(io, o.json, listed, 'no dead letters', ['id', 'kind', 'event', 'source', 'attempts', 'dead since', 'last error'], (r) => [
        r.id,
        r.kind,
        r.event_id,
        r.source,
        r.attempts,
        r.finished_at,
        (r.last_error ?? '').slice(0, 120),
      ]),
    );
    return 0;
  } finally {
    await database.close();
  }
}


/** The --id values as job ids, and a usage error when nothing is chosen. */
function chosenJobs(o: DeadLetterRetryOptions, verb: string): number[] {
  const ids = (o.id ?? []).map((v) => {
    if (!/^\d+$/.test(v)) throw new UsageError(`--id: expected job ids (integers), got ${JSON.stringify(v)}`);
    return Number(v);
  });
  if (!o.all && ids.length === 0 && !o.kind && !o.source && !o.event) {
    throw new UsageError(`choose what to ${verb}: --id <ids...>, --kind, --source, --event, or --all`);
  }
  return ids;
}

/**
 * Ids asked for by name that no dead letter matches (not jobs at all, not dead, or left out by the
 * other filters): a typo must not read as success. Read before the retry or discard changes them.
 */
async function notDeadLetters(db: Kysely<Database>, ids: number[], o: DeadLetterRetryOptions): Promise<number[]> {
  if (ids.length === 0) return [];
  const dead = new Set((await deadLetterIds(db, filterOf(o, ids)).execute()).map((r) => r.id));
  return ids.filter((id) => !dead.has(id));
}

function sayNotDeadLetters(io: CliIo, notDead: number[], o: DeadLetterRetryOptions): void {
  const filtered = Boolean(o.kind || o.source || o.event);
  for (const id of notDead) io.err(`error: job ${id} is not a dead letter${filtered ? ' matching the other filters' : ''} (no such job, or it is not dead)`);
}

/**
 * Progress of a retry or discard (`what`): a line for the read of the selection, then one per
 * transaction; a dry run's counting has none.
 */
function bulkProgress(progress: Progress, what: string) {
  progress.report(() => `dead-letters ${what}: reading the dead letters chosen`, { phase: true });
  return (done: number, total: number) => progress.report(() => `dead-letters ${what}: ${ofTotal(done, total, 'dead letters')}`);
}

/** The selection as JobQueue takes it (retry's and discard's). */
const filterOf = (o: DeadLetterRetryOptions, ids: number[]): DeadLetterFilter => ({
  all: Boolean(o.all),
  ...(ids.length > 0 ? { ids } : {}),
  ...(o.kind ? { kind: o.kind } : {}),
  ...(o.source ? { source: o.source } : {}),
  ...(o.event ? { eventId: o.event } : {}),
});

/**
 * Dead letters meant to stay unsent are deleted (JobQueue.discardDeadLetters), so the dead-letter
 * alert can clear; their failures stay recorded in `deliveries` and the result tables.
 */
export async function runDeadLettersDiscard(io: CliIo, o: DeadLetterRetryOptions & { dryRun?: boolean }): Promise<number> {
  const ids = [...new Set(chosenJobs(o, 'discard'))];
  const progress = progressFor(io, o.progress);
  const path = databasePathOf(io.env, o.database);
  const database = openCliDatabase(path, { readOnly: o.dryRun === true });
  // Ctrl-C or SIGTERM: the transaction in flight commits, none after it, and what it did is said.
  const stop = o.dryRun ? undefined : stopOnInterrupt();
  const between = batchPause(path);
  try {
    const queue = new JobQueue(database.db, systemClock);
    const notDead = await notDeadLetters(database.db, ids, o);
    const onBatch = o.dryRun ? undefined : bulkProgress(progress, 'discard');
    const discardedSoFar = (n: number) => `${count(n)} dead letter${n === 1 ? '' : 's'} discarded`;
    const { discarded, kept, stopped } = await sayHowFar(
      io,
      progress,
      () => queue.discardDeadLetters(filterOf(o, ids), { dryRun: o.dryRun === true, pause: between.pause, onBatch, signal: stop?.signal }),
      (n) => `dead-letters discard: stopped part-way by the error below: ${discardedSoFar(n)} before it (they stay deleted); run it again for the rest`,
    );
    progress.end();
    const n = discarded.reduce((sum, k) => sum + k.n, 0);
    const verb = o.dryRun ? 'would discard' : 'discarded';
    const json = () => ({ dry_run: Boolean(o.dryRun), discarded: n, by_kind: Object.fromEntries(discarded.map((k) => [k.kind, k.n])), kept, ...(notDead.length ? { not_dead_letters: notDead } : {}) });
    const by = stopped ? stop?.by() : undefined;
    if (by) {
      const code = saidStopped(io, by, stoppedBySignal('dead-letters discard', by, n, discardedSoFar(n), 'they stay deleted; the rest stay dead letters'), o.json ? json() : undefined);
      // Said as after a whole run: the ids named that are no dead letters.
      sayNotDeadLetters(io, notDead, o);
      return code;
    }
    if (o.json) printJson(io, json());
    else if (n === 0 && kept.length === 0) io.out('no dead letter matched; nothing to discard');
    else if (n > 0) io.out(`${verb} ${n} dead letter${n === 1 ? '' : 's'} (${discarded.map((k) => `${k.kind} ${k.n}`).join(', ')}); they will not run again; what they failed on stays in deliveries and the result tables`);
    // The only trace of an event processing never finished: not deleted.
    for (const k of kept) io.err(`kept job ${k.id} (${k.kind}): its event ${k.event_id ?? '(none)'} is not settled, and this dead letter is all that says so; retry it (dead-letters retry --id ${k.id}) or replay the event`);
    if (n === 0 && kept.length === 0) warnUnknownSource(io, database.sqlite, o.source);
    // Ids named that matched no dead letter: a typo must not read as success (dry run included).
    sayNotDeadLetters(io, notDead, o);
    return notDead.length > 0 ? 1 : 0;
  } finally {
    stop?.off();
    between.close();
    progress.end();
    await database.close();
  }
}

/**
 * In each transaction of a dead-letter retry, with the jobs it ran again (JobQueue.retryDeadLetters):
 * sink deliveries queued again show as pending in `deliveries` at once, not 'dead' until their next
 * attempt (looked up by their key); and they take their sink's max_attempts as configured now
 * (raised during a consumer's outage, say), not the one they were first queued with, before a
 * worker runs them; their sinks' sink_state is stamped, which ends a running worker's wait on a
 * Retry-After. `stampedAt`: one time for the whole retry (when it began), the same in each of its
 * transactions: a stamp moved at each one ended the worker's wait again and again (a consumer
 * still answering Retry-After was sent to every few ms, as long as the retry ran), and made a 410
 * to any attempt sent before the retry's last transaction read as one from before an enable, so a
 * consumer gone for good was not disabled until the retry ended.
 */
export async function markRetried(trx: Transaction<Database>, jobIds: readonly number[], sinks: readonly SinkConfig[], stampedAt: string): Promise<void> {
  // Unary + on state: the jobs by their ids (the primary key). Through jobs_lease or jobs_kind_ready
  // (state=?) each transaction read every pending job, the ones earlier batches retried included:
  // beside a backlog of 600,000 waiting deliveries, 190 ms of write lock per 500 dead letters (39 s
  // for 100,000; 3 s by id).
  await sql`UPDATE deliveries SET state = 'pending', attempts = 0, last_error = NULL
    WHERE state = 'dead' AND (event_id, sink) IN (SELECT event_id, substr(kind, 6) FROM jobs
      WHERE id IN (${sql.join(jobIds)}) AND +state = 'pending' AND kind LIKE 'sink:%')`.execute(trx);
  // The consumer is back: a running sink worker still waiting out the Retry-After of its last
  // answer (kept in its memory, up to a day) ends that wait when it sees the sink's stamp change
  // (SinkGate), as for `sinks send-now`. A disabled sink stays disabled.
  await sql`INSERT INTO sink_state (sink, updated_at)
    SELECT DISTINCT substr(kind, 6), ${stampedAt} FROM jobs WHERE id IN (${sql.join(jobIds)}) AND +state = 'pending' AND kind LIKE 'sink:%'
    ON CONFLICT (sink) DO UPDATE SET updated_at = excluded.updated_at WHERE disabled_at IS NULL AND updated_at < excluded.updated_at`.execute(trx);
  for (const s of sinks) await giveSinkMaxAttempts(trx, jobIds, s, stampedAt);
}

/** Dead-lettered jobs run again now with fresh attempts (JobQueue.retryDeadLetters); the receiver's workers pick them up. */
export async function runDeadLettersRetry(io: CliIo, o: DeadLetterRetryOptions & { dryRun?: boolean }): Promise<number> {
  const ids = chosenJobs(o, 'retry');
  const progress = progressFor(io, o.progress);
  const path = databasePathOf(io.env, o.database);
  const database = openCliDatabase(path, { readOnly: o.dryRun === true });
  // As for discard: a signal stops it between two transactions, and what it did is said.
  const stop = o.dryRun ? undefined : stopOnInterrupt();
  const between = batchPause(path);
  try {
    const queue = new JobQueue(database.db, systemClock);
    const notDead = await notDeadLetters(database.db, ids, o);
    if (o.dryRun) {
      const n = await queue.retryDeadLetters(filterOf(o, ids), { dryRun: true });
      if (o.json) printJson(io, { dry_run: true, retried: n, ...(notDead.length ? { not_dead_letters: notDead } : {}) });
      else io.out(n === 0 ? 'no dead letter matched; nothing would run again' : `${n} dead-lettered job${n === 1 ? '' : 's'} would run again (dry run: nothing changed)`);
      if (n === 0) warnUnknownSource(io, database.sqlite, o.source);
      sayNotDeadLetters(io, notDead, o);
      return notDead.length > 0 ? 1 : 0;
    }
    // Read first, not inside a transaction (which holds the write lock).
    const { sinks, problems } = configuredSinks(io.env, path);
    // Only the sinks whose deliveries this retry could have queued again.
    const retriedSinks = problems.length > 0 ? [] : o.kind === undefined ? sinks : sinks.filter((s) => sinkJobKind(s.name) === o.kind);
    // In short transactions with a pause between them (as `prune`), so a running receiver's writers
    // get the write lock meanwhile (batchPause); what else marks the retried jobs is done in each.
    const pause = between.pause;
    const stampedAt = new Date().toISOString();
    const onBatch = bulkProgress(progress, 'retry');
    const queuedAgain = (k: number) => `${count(k)} dead-lettered job${k === 1 ? '' : 's'} queued again`;
    const { written: n, stopped } = await sayHowFar(
      io,
      progress,
      () => queue.retryDeadLettersStoppable(filterOf(o, ids), { pause, withEach: (trx, jobIds) => markRetried(trx, jobIds, retriedSinks, stampedAt), onBatch, signal: stop?.signal }),
      (k) => `dead-letters retry: stopped part-way by the error below: ${queuedAgain(k)} before it (they stay queued; the rest stay dead letters); run it again for the rest`,
    );
    // dry_run as in the dry run's, and in every other command's that has --dry-run.
    const json = () => ({ dry_run: false, retried: n, ...(notDead.length ? { not_dead_letters: notDead } : {}) });
    // What is said after the retry, interrupted or not: the sinks its jobs wait for, the ids that were no dead letters.
    const sayAfter = async () => {
      // A sink the configuration no longer has: its jobs wait for a receiver that has it. Said, not hidden.
      const sinkName = o.kind?.startsWith('sink:') ? o.kind.slice('sink:'.length) : null;
      if (n > 0 && sinkName !== null) {
        if (problems.length === 0 && io.env['CONFIG_FILE'] && !sinks.some((s) => s.name === sinkName)) {
          io.err(`warning: no sink named ${JSON.stringify(sinkName)} is configured in CONFIG_FILE (known: ${sinks.map((s) => s.name).join(', ') || 'none'}): its jobs stay pending until a receiver with that sink runs`);
        }
      }
      // Deliveries queued again for a sink a 410 disabled wait until it is enabled: said, not left to be found.
      if (n > 0 && (o.kind === undefined || sinkName !== null)) {
        for (const line of await disabledSinkWarnings(database.db, sinkName === null ? undefined : [sinkName])) io.err(line);
      }
      sayNotDeadLetters(io, notDead, o);
    };
    const stoppedBy = async (by: NodeJS.Signals, line: string): Promise<number> => {
      progress.end();
      const code = saidStopped(io, by, line, o.json ? json() : undefined);
      await sayAfter();
      return code;
    };
    const by = stopped ? stop?.by() : undefined;
    if (by) return await stoppedBy(by, stoppedBySignal('dead-letters retry', by, n, queuedAgain(n), 'they stay queued; the rest stay dead letters'));
    // As documented for max_attempts: every waiting delivery of the sinks this retry could touch,
    // in batches too (as at the workers' start). A signal stops it before its next batch: the
    // retry itself is done, and the next start of the workers gives the rest.
    if (n > 0 && retriedSinks.length > 0) {
      progress.report(() => 'dead-letters retry: max_attempts of waiting deliveries', { phase: true });
      await sayHowFar(
        io,
        progress,
        () => applySinkMaxAttempts(database.db, retriedSinks, new Date().toISOString(), pause, stop?.signal),
        (k) =>
          `dead-letters retry: ${queuedAgain(n)}; then the error below stopped giving the other waiting deliveries their sink's max_attempts as configured now after ${count(k)} (the next start of the workers does the rest)`,
        // The jobs retried stay queued, whenever this step fails: said even when it wrote nothing.
        true,
      );
      const late = stop?.by();
      if (late) {
        // Awaited here: the database closes in the finally below.
        return await stoppedBy(
          late,
          `dead-letters retry: ${queuedAgain(n)} (they stay queued); ${late} came while it gave the other waiting deliveries their sink's max_attempts as configured now (those it did not reach get it at the next start of the workers)`,
        );
      }
    }
    progress.end();
    if (o.json) printJson(io, json());
    else io.out(n === 0 ? 'no dead letter matched; nothing to retry' : `${n} dead-lettered job${n === 1 ? '' : 's'} queued again (pending now; the receiver's workers run them)`);
    if (n === 0) warnUnknownSource(io, database.sqlite, o.source);
    await sayAfter();
    return notDead.length > 0 ? 1 : 0;
  } finally {
    stop?.off();
    between.close();
    progress.end();
    await database.close();
  }
}
