import type { OpenDatabase } from '../../db/openDatabase.js';
import { configProblems, databasePathOf } from '../cliConfig.js';
import { batchPause } from '../batchPause.js';
import { openCliDatabase } from '../cliDatabase.js';
import { CliError, saidStopped, sayHowFar, stoppedBySignal } from '../errors.js';
import { formatAge, printJson, printTable, type CliIo } from '../io.js';
import { stopOnInterrupt } from '../onInterrupt.js';
import { count, progressFor } from '../progress.js';
import { configuredSinks, enableSinkNamed, sendSinkNow, sinkNamesInDatabase, sinkRows, undocumentedPatterns, unlistedSinkState } from '../sinkOps.js';

export async function runSinksList(io: CliIo, o: { database?: string; json?: boolean }): Promise<number> {
  const { sinks, problems } = configuredSinks(io.env, databasePathOf(io.env, o.database));
  for (const p of problems) io.err(`warning: ${p} (sinks shown from the database only)`);
  // Valid (the set of event types can grow), but most likely a typo: the events it meant never reach the sink.
  for (const s of sinks) {
    const typos = undocumentedPatterns(s.events);
    if (typos.length > 0) io.err(`warning: sink ${s.name}: events ${typos.map((t) => JSON.stringify(t)).join(', ')} match no event type the service documents (spec 6.4), only new types of that name`);
  }
  const database = openCliDatabase(databasePathOf(io.env, o.database), { readOnly: true });
  try {
    // One read transaction: every figure from one moment. Read one after another beside a running
    // receiver, a sink counted failing could show no last failure (delivered meanwhile).
    const rows = await database.db.transaction().execute((trx) => sinkRows(trx, sinks, Date.now()));
    if (o.json) printJson(io, rows);
    else if (rows.length === 0) io.out('no sinks configured (CONFIG_FILE "sinks")');
    else {
      printTable(
        io,
        ['sink', 'type', 'enabled', 'pending', 'failing', 'delivered', 'dead', 'oldest undelivered', 'disabled because', 'last failure'],
        rows.map((s) => [
          s.name,
          s.type,
          s.configured ? (s.enabled ? 'yes' : 'NO') : unlistedSinkState(io.env, s, problems.length > 0, false),
          s.pending,
          s.failing,
          s.delivered,
          s.dead,
          s.oldest_undelivered_ms === null ? null : formatAge(s.oldest_undelivered_ms),
          s.disabled_reason,
          s.last_error === null ? null : `${s.last_error.error}${s.last_error.at === null ? '' : ` (${formatAge(Math.max(0, Date.now() - Date.parse(s.last_error.at)))} ago)`}`,
        ]),
      );
    }
    return 0;
  } finally {
    await database.close();
  }
}

/**
 * The database of a command on one sink, named by `name`: one CONFIG_FILE has, or one the database
 * knows (its deliveries, its sink_state). A bad value, as for `replay --sink`: exit 2, with the
 * names that would do.
 */
async function openForSink(io: CliIo, name: string, o: { database?: string; readOnly?: boolean }): Promise<OpenDatabase> {
  const { sinks, problems } = configuredSinks(io.env, databasePathOf(io.env, o.database));
  if (problems.length > 0) throw configProblems(problems);
  const database = openCliDatabase(databasePathOf(io.env, o.database), { readOnly: o.readOnly === true });
  try {
    const names = [...new Set([...sinks.map((s) => s.name), ...(await sinkNamesInDatabase(database.db))])];
    if (!names.includes(name)) throw new CliError(`no sink named ${JSON.stringify(name)} (known: ${names.length > 0 ? names.join(', ') : 'none'})`, 2);
    return database;
  } catch (err) {
    await database.close();
    throw err;
  }
}

/** Re-enables a sink a 410 Gone disabled; a running receiver's sink worker claims again at its next poll. */
export async function runSinksEnable(io: CliIo, name: string, o: { database?: string }): Promise<number> {
  const database = await openForSink(io, name, o);
  try {
    const changed = await enableSinkNamed(database.db, name, Date.now());
    io.out(changed ? `sink ${name} enabled; its waiting deliveries go out now` : `sink ${name} was not disabled`);
    return 0;
  } finally {
    await database.close();
  }
}

/**
 * The sink's consumer is back: its deliveries waiting for their next attempt go out now
 * (sendSinkNow), next to a running receiver, whose sink worker sends them at its next poll.
 */
export async function runSinksSendNow(io: CliIo, name: string, o: { database?: string; dryRun?: boolean; json?: boolean; progress?: boolean }): Promise<number> {
  const dryRun = o.dryRun === true;
  const progress = progressFor(io, o.progress);
  const database = await openForSink(io, name, { ...o, readOnly: dryRun });
  // As `prune`: a signal stops it between two transactions, and what it did is said.
  const stop = dryRun ? undefined : stopOnInterrupt();
  const between = batchPause(databasePathOf(io.env, o.database));
  try {
    // As `prune`: short transactions with a pause between, so the receiver's writers get the lock meanwhile (batchPause).
    const onBatch = (due: number) => progress.report(() => `sinks send-now: ${count(due)} deliveries made due so far`);
    const madeDue = (n: number) => `${count(n)} deliver${n === 1 ? 'y' : 'ies'} of sink ${name} made due`;
    const r = await sayHowFar(
      io,
      progress,
      () => sendSinkNow(database.db, name, Date.now(), { dryRun, pause: between.pause, onBatch, signal: stop?.signal }),
      (n) => `sinks send-now: stopped part-way by the error below: ${madeDue(n)} before it (a running receiver sends them); run it again for the rest`,
    );
    progress.end();
    const json = () => ({ dry_run: dryRun, sink: name, made_due: r.due, pending: r.pending, ...(r.disabled ? { was_disabled: { since: r.disabled.at, reason: r.disabled.reason } } : {}) });
    const by = r.stopped ? stop?.by() : undefined;
    if (by) {
      // The enable comes first, in a transaction of its own: done, whatever the batches did.
      const enabled = r.disabled ? `; it was disabled since ${r.disabled.at} and is enabled` : '';
      return saidStopped(io, by, stoppedBySignal('sinks send-now', by, r.due, madeDue(r.due), 'a running receiver sends them') + enabled, o.json ? json() : undefined);
    }
    if (o.json) printJson(io, json());
    else {
      const n = (k: number) => `${k} deliver${k === 1 ? 'y' : 'ies'}`;
      const verb = dryRun ? 'would be made due now' : 'made due now';
      io.out(`sink ${name}: ${n(r.due)} waiting for a later attempt ${verb} (${n(r.pending)} pending in all)${dryRun ? ' (dry run: nothing changed)' : "; a running receiver sends them at its next poll"}`);
      if (r.disabled) io.out(`sink ${name} ${dryRun ? 'is' : 'was'} disabled since ${r.disabled.at} (${r.disabled.reason ?? 'no reason recorded'}): ${dryRun ? 'it would be enabled' : 'enabled'}`);
    }
    return 0;
  } finally {
    stop?.off();
    between.close();
    progress.end();
    await database.close();
  }
}
