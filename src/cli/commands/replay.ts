import type BetterSqlite3 from 'better-sqlite3';
import { preparedJobWrites } from '../../queue/JobQueue.js';
import { JobKind } from '../../queue/jobKinds.js';
import { databasePathOf, configProblems } from '../cliConfig.js';
import { batchPause, TURNS_ONLY } from '../batchPause.js';
import { openCliDatabase } from '../cliDatabase.js';
import { exitBySignal, saidStopped, stoppedBySignal, UsageError } from '../errors.js';
import { oneLine, printJson, shellWord, type CliIo } from '../io.js';
import { stopOnInterrupt } from '../onInterrupt.js';
import { count, noProgress, progressFor, startBar, type Bar } from '../progress.js';
import { configuredSinks, disabledSinkWarnings, preparedDeliveryWrites, queueSinkReplay, sinkWants, type DeliveryWrites, type SinkConfig } from '../sinkOps.js';
import { BATCH, eventPages, selection, type EventSelection, type SelectedEvent } from './replay/eventPages.js';
import { waitForReplay, type Waited } from './replay/waitForReplay.js';
import { warnUnknownSource } from '../unknownSource.js';

export interface ReplayOptions extends EventSelection {
  database?: string;
  sink?: string[];
  /** With --sink: only events a target sink has no delivery record of. */
  missing?: boolean;
  processing?: boolean;
  all?: boolean;
  limit?: number;
  dryRun?: boolean;
  wait?: boolean;
  timeout: number;
  json?: boolean;
  /** Progress lines on stderr where no bar is shown (not a terminal, --json, a dry run). */
  progress?: boolean;
}

/**
 * WAL pages after which the replay's own commits checkpoint (SQLite's default: 1,000). A batch of
 * 500 events writes about 3.4 pages per event on a large database (the (event, sink) keys of the
 * deliveries primary key and jobs_event land at random), so with the default every commit ran a
 * checkpoint: its two fsyncs, and the pages every batch rewrites (the tables' and indexes' ends,
 * their inner pages) copied back each time. Every ~6 batches instead: the same work, each such
 * page copied once per checkpoint. The checkpoint runs after the commit has let the write lock
 * go, so a running receiver's ingest is not held by it; its WAL (20 MB at the 2 KB pages this
 * receiver creates, 40 MB at an older file's 4 KB) stays well under the receiver's own bound
 * (128 MiB); the receiver's checkpointer, or the replay's close when no other connection is open,
 * copies the rest. Bounded in bytes too: counted in pages only, a file with 16 KB pages let the
 * WAL reach 157 MB (review), past that bound.
 */
const replayAutocheckpointPages = (pageSize: number) => Math.max(1_000, Math.min(10_000, Math.floor((64 * 2 ** 20) / pageSize)));


/**
 * Which events have an open (pending or running) process_event job the replay did not queue, kept
 * current batch by batch without reading every open one again: that read included every job the
 * replay had queued so far (quadratic, 27 s for 164,000 events), and one read at the start went
 * stale (a job that finished or was dead-lettered meanwhile still counted as queued, so its event
 * was left out; a fold that failed or a dead letter retried meanwhile did not, so the event got a
 * second job). The jobs found at the start (open or dead: `dead-letters retry` revives a dead one
 * in place) are looked up by id when their event comes; jobs added later are read by id range
 * (jobs.id grows) from where the last read ended, the replay's own left out.
 */
function openProcessEventJobs(sqlite: BetterSqlite3.Database) {
  const byEvent = new Map<string, number[]>();
  const add = (rows: { id: number; event_id: string }[]) => {
    for (const r of rows) byEvent.set(r.event_id, [...(byEvent.get(r.event_id) ?? []), r.id]);
  };
  const top = sqlite.prepare<[], number>('SELECT coalesce(max(id), 0) FROM jobs').pluck();
  // Unary +: through jobs_kind_ready (state, kind), not every job by the id bound.
  const initial = sqlite.prepare<[number], { id: number; event_id: string }>(
    `SELECT id, event_id FROM jobs WHERE state IN ('pending', 'running', 'dead') AND kind = '${JobKind.processEvent}' AND +id <= ? AND event_id IS NOT NULL`,
  );
  const added = sqlite.prepare<[number, number], { id: number; event_id: string }>(
    `SELECT id, event_id FROM jobs WHERE id > ? AND id <= ? AND kind = '${JobKind.processEvent}' AND event_id IS NOT NULL`,
  );
  const isOpen = sqlite.prepare<[number], number>(`SELECT 1 FROM jobs WHERE id = ? AND state IN ('pending', 'running')`).pluck();
  const isDead = sqlite.prepare<[number], number>(`SELECT 1 FROM jobs WHERE id = ? AND state = 'dead'`).pluck();
  let seen: number | null = null;
  // The replay's jobs since the last read (one batch's): its own are not another's open job.
  let own = new Set<number>();
  return {
    /** Reads the process_event jobs added since the last batch (all of them, the first time). */
    catchUp(): void {
      const upTo = top.get() ?? 0;
      add(seen === null ? initial.all(upTo) : added.all(seen, upTo).filter((r) => !own.has(r.id)));
      seen = upTo;
      own = new Set();
    },
    /** A job the replay queued. */
    queued(id: number): void {
      own.add(id);
    },
    has(eventId: string): boolean {
      const ids = byEvent.get(eventId);
      return ids !== undefined && ids.some((id) => isOpen.get(id) !== undefined);
    },
    /** The event's dead-lettered process_event jobs: the replay runs the newest again in place. */
    dead(eventId: string): number[] {
      return (byEvent.get(eventId) ?? []).filter((id) => isDead.get(id) !== undefined);
    },
  };
}

function resolveTargetSinks(io: CliIo, names: readonly string[] | undefined, databasePath: string): SinkConfig[] {
  if (!names?.length) return [];
  const { sinks, problems } = configuredSinks(io.env, databasePath);
  if (problems.length > 0) throw configProblems(problems);
  if (sinks.length === 0) throw new UsageError('--sink: no sinks are configured (CONFIG_FILE "sinks")');
  if (names.includes('all')) return [...sinks];
  const unknown = names.filter((n) => !sinks.some((s) => s.name === n));
  if (unknown.length > 0) throw new UsageError(`--sink: no sink named ${unknown.map((n) => JSON.stringify(n)).join(', ')} is configured (known: ${sinks.map((s) => s.name).join(', ')})`);
  return sinks.filter((s) => names.includes(s.name));
}

interface Counts {
  selected: number;
  processing: { queued: number; already_queued: number };
  sinks: Record<string, { queued: number; not_wanted: number; not_settled: number; has_record?: number }>;
}

/**
 * `replay`: queues stored events again, through processing (a process_event
 * job each) and/or to sinks (a new delivery cycle with the same
 * message id). It writes to the database directly, in short transactions, so
 * it works while the receiver runs; the receiver's workers do the work.
 */
export async function runReplay(io: CliIo, o: ReplayOptions): Promise<number> {
  const filtered = Boolean(o.id?.length || o.type?.length || o.since || o.until || o.application || o.source || o.missing || o.after);
  if (!filtered && !o.all) throw new UsageError('choose events with --id, --type, --since, --until, --application, --source or --missing (or --all for every event)');
  if (o.after && o.until && o.after.received_at >= o.until) throw new UsageError(`--after (received at ${o.after.received_at}) must be before --until (${o.until})`);
  if (o.missing && !o.sink?.length) throw new UsageError('--missing needs --sink: the sinks whose missing events to send');
  // An empty window is a mistake (the ages swapped: --since 2h --until 3h), not "nothing to do".
  if (o.since && o.until && o.since >= o.until) throw new UsageError(`--since (${o.since}) must be before --until (${o.until})`);
  // On a terminal a real run shows a bar (its total counted first). Elsewhere, or when stdout
  // lists the events (a dry run) or waits for the end (--json: the line is rewritten in place on
  // a terminal then), progress lines, as the other long commands show them.
  const withBar = io.isTTY && !o.dryRun && !o.json;
  const progress = withBar ? noProgress : progressFor(io, o.progress, { tty: Boolean(o.json) });
  const databasePath = databasePathOf(io.env, o.database);
  const targets = resolveTargetSinks(io, o.sink, databasePath);
  const processing = o.processing ?? targets.length === 0;
  // A dry run changes nothing, the database's journal mode included (a backup stays as it is).
  const database = openCliDatabase(databasePath, { readOnly: o.dryRun === true });
  // Ctrl-C or SIGTERM: the batch in flight commits, none after it, and where it stopped is said
  // (see stoppedLine); a --wait ends at once. A dry run, which changes nothing, ends at once as before.
  const stop = o.dryRun ? undefined : stopOnInterrupt();
  let bar: Bar | null = null;
  const between = o.dryRun ? TURNS_ONLY : batchPause(databasePath);
  try {
    if (!o.dryRun) database.sqlite.pragma(`wal_autocheckpoint = ${replayAutocheckpointPages(database.sqlite.pragma('page_size', { simple: true }) as number)}`);
    const { db } = database;
    const missingFor = o.missing ? targets : [];
    const maxSeq = (database.sqlite.prepare('SELECT max(rowid) FROM events').pluck().get() as number | null) ?? 0;
    // With --missing, a sink that has a record of the event (queued, delivered or dead) is left alone.
    const recorded = database.sqlite.prepare('SELECT 1 FROM deliveries WHERE event_id = ? AND sink = ?');
    // Ids asked for by name that were selected (the others are checked at the end).
    const namedIds = new Set(o.id ?? []);
    const selected = new Set<string>();
    const counts: Counts = { selected: 0, processing: { queued: 0, already_queued: 0 }, sinks: {} };
    for (const s of targets) counts.sinks[s.name] = { queued: 0, not_wanted: 0, not_settled: 0, ...(o.missing ? { has_record: 0 } : {}) };
    // A dry run lists every event, also on a terminal: the list is what it is run for.
    const plain = (!io.isTTY || Boolean(o.dryRun)) && !o.json;
    // The bar's total is counted first (only for the bar: the selection is read page by page).
    // Said while it counts: with --missing that reads every settled event (seconds at a million).
    const counting = withBar ? progressFor(io, false) : noProgress;
    counting.report(() => 'replay: counting the events selected', { phase: true });
    let barTotal = 0;
    try {
      if (withBar) barTotal = Math.min(Number((await selection(db, o, missingFor, maxSeq).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n), o.limit ?? Infinity);
    } finally {
      // Cleared also when the count fails (the write lock, a busy database): the error gets a line of its own.
      counting.end();
    }
    bar = barTotal > 0 ? startBar(io.stderr, `${o.dryRun ? 'checking' : 'replaying'} [{bar}] {value}/{total} events | {eta_formatted} left`, barTotal, stop) : null;
    // Deliveries whose cycle is queued from this moment are the replay's doing (see waitForReplay).
    const startedIso = new Date().toISOString();
    /** The process_event jobs this replay queued, with their event. */
    const replayed: { job: number; event: string }[] = [];
    const pairs: { event: string; sink: string }[] = [];
    const verb = o.dryRun ? 'would queue' : 'queued';

    // Prepared statements, not kysely: it compiled four statements per (event, sink), most of the CLI's time.
    const writes = preparedDeliveryWrites(database.sqlite);
    const jobs = preparedJobWrites(database.sqlite);
    // Whether an event has an open process_event job that is not this replay's (see openProcessEventJobs).
    const openProcessing = processing ? openProcessEventJobs(database.sqlite) : null;
    // The first page may take seconds (--missing reads every settled event until it finds some).
    progress.report(() => 'replay: reading the events selected', { phase: true });
    const pages = eventPages(database, o, missingFor, maxSeq);
    /** The last event of the last batch gone through: where a stopped replay continues. */
    let last: SelectedEvent | null = null;
    /** The counts of the batches committed (a failed batch's are in `counts`, not in the database). */
    let committed: Counts = structuredClone(counts);
    let cut = false;
    try {
      for (;;) {
        const pageSize = Math.min(BATCH, (o.limit ?? Infinity) - counts.selected);
        if (pageSize <= 0) break;
        const batch = await pages.next(pageSize);
        if (batch.length === 0) break;
        // Stopped only when something is left: a signal after the last batch ends it as a whole run.
        if (stop?.signal.aborted) {
          cut = true;
          break;
        }
        counts.selected += batch.length;
        for (const e of batch) if (namedIds.has(e.id)) selected.add(e.id);
        const lines: string[] = [];
        const work = async (w: DeliveryWrites | null) => {
          const now = Date.now();
          // Events past the processing cursor are still to be folded: queued already, too.
          const cursor = processing ? jobs.processingCursor() : 0;
          openProcessing?.catchUp();
          for (const e of batch) {
            const what: string[] = [];
            // Left out, with why: listed after the queued parts, never under the verb.
            const skipped: string[] = [];
            if (processing) {
              const open = openProcessing!.has(e.id);
              if (open || e.seq > cursor) {
                counts.processing.already_queued++;
                skipped.push(open ? 'processing (already queued)' : 'processing (not processed yet: it will be)');
              } else {
                counts.processing.queued++;
                what.push('processing');
                if (w) {
                  const job = jobs.requeueProcessEvent(
                    { kind: JobKind.processEvent, payload: { event_id: e.id, refetch: true }, eventId: e.id, source: e.source },
                    openProcessing!.dead(e.id),
                    now,
                  );
                  openProcessing!.queued(job);
                  // Kept only for --wait, which follows them.
                  if (o.wait) replayed.push({ job, event: e.id });
                }
              }
            }
            for (const sink of targets) {
              const c = counts.sinks[sink.name]!;
              if (!sinkWants(sink, e)) {
                c.not_wanted++;
                continue;
              }
              if (o.missing && recorded.get(e.id, sink.name) !== undefined) {
                c.has_record!++;
                skipped.push(`sink ${sink.name} (has a delivery record)`);
                continue;
              }
              if (!e.settled) {
                // Not complete yet: it is fanned out when its processing settles.
                c.not_settled++;
                skipped.push(`sink ${sink.name} (not settled yet)`);
                continue;
              }
              if (w) {
                const queued = await queueSinkReplay(w, e.id, targets, [sink.name], now);
                if (!queued.includes(sink.name)) {
                  c.not_settled++;
                  skipped.push(`sink ${sink.name} (not settled yet)`);
                  continue;
                }
                if (o.wait) pairs.push({ event: e.id, sink: sink.name });
              }
              c.queued++;
              what.push(`sink ${sink.name}`);
            }
            if (plain) {
              const head = what.length > 0 ? `${verb} ${oneLine(e.id)} ${oneLine(e.event_type)}: ${what.join(', ')}` : `nothing for ${oneLine(e.id)} ${oneLine(e.event_type)}`;
              lines.push(skipped.length > 0 ? `${head}; skipped: ${skipped.join(', ')}` : head);
            }
          }
        };
        if (o.dryRun) await work(null);
        else await immediateTransaction(database.sqlite, () => work(writes));
        last = batch.at(-1)!;
        committed = structuredClone(counts);
        for (const l of lines) io.out(l);
        bar?.update(Math.min(barTotal, counts.selected));
        progress.report(() => `replay: ${count(counts.selected)} events selected so far`);
        // The last batch: no pause after it (a --limit reached by a full batch included).
        if (batch.length < pageSize || counts.selected >= (o.limit ?? Infinity)) break;
        // The event loop's turns for the Ctrl-C and SIGTERM handler (stopOnInterrupt: without them
        // Ctrl-C waited for the whole replay, 200,000 events queued, exit 0, then was lost), and a
        // running receiver's writers that wait for the lock go first (batchPause; a dry run writes nothing).
        await between.pause();
      }
    } catch (err) {
      // A failure after batches committed (the write lock held past the busy timeout, a full disk):
      // what stays queued and where to go on, as for a signal, then the error on its own line. The
      // error alone said "try again", which queued all of those again.
      if (last !== null && !o.dryRun) {
        bar?.stop();
        progress.end();
        io.err(stoppedLine('the error below', committed, processing, last, o));
      }
      throw err;
    }
    bar?.stop();
    progress.end();
    // Ids asked for by name that are not stored at all: a typo must not read as success.
    const stored = database.sqlite.prepare('SELECT 1 FROM events WHERE id = ?');
    const notStored = [...namedIds].filter((id) => !selected.has(id) && stored.get(id) === undefined);

    // Said before any wait: what was queued for a disabled sink does not go out until it is enabled.
    if (!o.dryRun) {
      for (const line of await disabledSinkWarnings(db, targets.filter((s) => counts.sinks[s.name]!.queued > 0).map((s) => s.name))) io.err(line);
    }
    const cutBy = cut ? stop?.by() : undefined;
    if (cutBy) {
      // Nothing on stdout but --json's counts so far; the last line says where it stopped and how to go on.
      // (The ids named but not reached are not checked: the rest of the selection may hold them.)
      io.err(last ? stoppedLine(cutBy, committed, processing, last, o) : stoppedBySignal('replay', cutBy, 0, 'nothing queued', ''));
      if (o.json) printJson(io, { dry_run: false, ...counts, interrupted: true, ...(last ? { continue_after: `${last.received_at}/${last.id}`, ...windowAsTimes(o) } : {}) });
      return exitBySignal(cutBy);
    }
    let waited: Waited | null = null;
    if (o.wait && !o.dryRun) waited = await waitForReplay(io, db, replayed, pairs, startedIso, o, progress, stop);
    const waitCutBy = waited?.interrupted ? stop?.by() : undefined;
    if (waited && waitCutBy) {
      // Everything selected was queued: said, with what had finished when the wait was ended.
      const { interrupted: _, ...finished } = waited;
      for (const id of notStored) io.err(`error: no stored event has id ${JSON.stringify(id)}`);
      return saidStopped(
        io,
        waitCutBy,
        `replay --wait: stopped by ${waitCutBy}: ${countsParts(counts, processing, verb).join('; ')} (they stay queued: the receiver's workers do them); finished so far: ${waited.done} done, ${waited.failed} dead, ${waited.unfinished} unfinished`,
        o.json ? { dry_run: false, ...counts, ...(notStored.length ? { not_stored: notStored } : {}), finished } : undefined,
      );
    }

    if (o.json) printJson(io, { dry_run: Boolean(o.dryRun), ...counts, ...(notStored.length ? { not_stored: notStored } : {}), ...(waited ? { finished: waited } : {}) });
    else {
      const parts = countsParts(counts, processing, verb);
      if (waited) parts.push(`finished: ${waited.done} done, ${waited.failed} dead${waited.unfinished ? `, ${waited.unfinished} unfinished` : ''}`);
      io.out(`${o.dryRun ? 'dry run: ' : ''}${parts.join('; ')}`);
    }
    if (waited?.timed_out) {
      const total = waited.done + waited.failed + (waited.unfinished ?? 0);
      io.err(
        `error: --wait: ${waited.unfinished} of ${total} replayed jobs still unfinished after ${o.timeout} s (a result read may be waiting for the 30 s poll spacing or for a result still processing: \`status\` shows it; or no receiver with workers runs on this database)`,
      );
    }
    for (const id of notStored) io.err(`error: no stored event has id ${JSON.stringify(id)}`);
    // A name that matches nothing at all is most likely a typo: said, not a silent "0 selected".
    if (counts.selected === 0) warnUnknownSource(io, database.sqlite, o.source, 'events');
    // A type that no stored event has (`interview.complete` for interview.completed): named, with the stored ones.
    if (counts.selected === 0 && o.type?.length && !o.type.includes('*')) {
      const stored = database.sqlite.prepare('SELECT DISTINCT event_type FROM events ORDER BY event_type').pluck().all() as string[];
      const matches = (t: string) => stored.some((s) => (t.endsWith('.*') ? s.startsWith(t.slice(0, -1)) : s === t));
      const none = o.type.filter((t) => !matches(t));
      if (none.length > 0) io.err(`warning: no stored event has type ${none.map((t) => JSON.stringify(t)).join(', ')} (stored types: ${stored.join(', ') || 'none'})`);
    }
    if (counts.selected === 0 && o.application && database.sqlite.prepare('SELECT 1 FROM applications WHERE id = ? OR external_id = ? LIMIT 1').get(o.application, o.application) === undefined) {
      io.err(`warning: no application has id or external_id ${JSON.stringify(o.application)}`);
    }
    return (waited && (waited.failed > 0 || waited.timed_out)) || notStored.length > 0 ? 1 : 0;
  } finally {
    // An error mid-way (the write lock held past the busy timeout) included.
    stop?.off();
    bar?.stop();
    progress.end();
    between.close();
    await database.close();
  }
}

/** The counts as the summary line says them: selected, then processing's and each sink's. */
function countsParts(counts: Counts, processing: boolean, verb: string): string[] {
  const parts = [`${counts.selected} event${counts.selected === 1 ? '' : 's'} selected`];
  if (processing) parts.push(`processing: ${counts.processing.queued} ${verb}${counts.processing.already_queued ? `, ${counts.processing.already_queued} already queued` : ''}`);
  for (const [name, c] of Object.entries(counts.sinks)) {
    parts.push(`sink ${name}: ${c.queued} ${verb}${c.not_wanted ? `, ${c.not_wanted} not wanted by its filters` : ''}${c.not_settled ? `, ${c.not_settled} not settled yet` : ''}${c.has_record ? `, ${c.has_record} it has a record of` : ''}`);
  }
  return parts;
}

/**
 * The line of a replay a signal or an error (`cause`) stopped between two batches: what the
 * batches before it queued, and where the selection stopped, with the option that continues
 * after that event. Not "run it again": that replays the first part again. Nor `--since <its
 * received_at>`: that replays the events of that instant gone through already, which a backfill
 * or an import stores by the thousand in one millisecond (for a sink, each sent again: under the
 * same webhook-id, which a consumer following the contract dedupes, but sent; through processing,
 * a read of the service each). --limit counts afresh, so what is left of it is said. --since and
 * --until are said as the times this run read them as: an age (`--since 2h`) given again later
 * names a later time, and the rest run 10 minutes later left out the events of those 10 minutes
 * after the stop (4,507 of 100,000 not replayed, exit 0), or, for --until, took later ones.
 */
function stoppedLine(cause: string, counts: Counts, processing: boolean, last: SelectedEvent, o: { since?: string; until?: string; limit?: number }): string {
  const window = Object.entries({ '--since': o.since, '--until': o.until }).flatMap(([option, at]) => (at === undefined ? [] : [`${option} ${shellWord(at)} `]));
  const rest = o.limit === undefined ? '' : ` and --limit ${o.limit - counts.selected}`;
  return (
    `replay: stopped part-way by ${cause}: ${countsParts(counts, processing, 'queued').join('; ')} before it (they stay queued); ` +
    `the last event it went through was received at ${last.received_at} (id ${oneLine(last.id)}): for the rest, run the same command with ${window.join('')}--after ${shellWord(`${last.received_at}/${last.id}`)}${rest}`
  );
}

/** --json's form of the window stoppedLine says: `continue_since`, `continue_until` (the times this run read). */
const windowAsTimes = (o: { since?: string; until?: string }) => ({ ...(o.since ? { continue_since: o.since } : {}), ...(o.until ? { continue_until: o.until } : {}) });

/**
 * Runs `work` in a BEGIN IMMEDIATE transaction on the connection. Each batch
 * reads first (open jobs, the event's settled state) and writes after; in WAL
 * mode a deferred transaction that must become a write transaction after the
 * running receiver committed fails at once with SQLITE_BUSY ("database is
 * locked"), whatever the busy timeout. bench/lib/later.ts (replay of 5,000
 * events to a file sink next to a receiver delivering them) hit it after 900
 * events (exit 1); with IMMEDIATE the write lock is taken up front and waits
 * under the busy timeout. Nothing else uses the connection meanwhile (the
 * statements are synchronous; `work` is async only for the shared code).
 */
async function immediateTransaction(sqlite: BetterSqlite3.Database, work: () => Promise<void>): Promise<void> {
  sqlite.exec('BEGIN IMMEDIATE');
  try {
    await work();
    sqlite.exec('COMMIT');
  } catch (err) {
    if (sqlite.inTransaction) sqlite.exec('ROLLBACK');
    throw err;
  }
}
