import type BetterSqlite3 from 'better-sqlite3';
import { sql, type Expression, type ExpressionBuilder, type Kysely, type SqlBool } from 'kysely';
import type { Database } from '../../db/schema.js';
import { inChunks } from '../../db/sqliteHelpers.js';
import { jobsByEventTerm, preparedJobWrites } from '../../queue/JobQueue.js';
import { JobKind } from '../../queue/jobKinds.js';
import { databasePathOf, configProblems } from '../cliConfig.js';
import { openCliDatabase } from '../cliDatabase.js';
import type { OpenDatabase } from '../../db/openDatabase.js';
import { CliError, UsageError } from '../errors.js';
import { oneLine, printJson, type CliIo } from '../io.js';
import { count, noProgress, ofTotal, progressFor, startBar, type Bar, type Progress } from '../progress.js';
import { groupBy } from '../../util/collections.js';
import { configuredSinks, disabledSinkWarnings, preparedDeliveryWrites, queueSinkReplay, sinkJobKind, sinkWants, type DeliveryWrites, type SinkConfig } from '../sinkOps.js';

export interface ReplayOptions {
  database?: string;
  id?: string[];
  type?: string[];
  since?: string;
  until?: string;
  application?: string;
  source?: string;
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

interface SelectedEvent {
  /** events.rowid: the order events were stored in, which the processing cursor follows. */
  seq: number;
  id: string;
  /** The id as stored (see PageStart). */
  idBytes: Buffer;
  event_type: string;
  source: string;
  received_at: string;
  settled: boolean;
}

/**
 * Events queued per transaction: short write locks next to a running server. 500 events to a
 * sink with prepared statements held it about 20 ms on a 5,000-event database, 50-120 ms on a
 * 300,000-event one on a loaded 2-core host (random index pages read from the OS cache).
 */
const BATCH = 500;

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

/** SQL for "the event's type matches one of these patterns" (exact names, `prefix.*`, `*`), as matchesEventType decides. */
function typeMatches(eb: ExpressionBuilder<any, any>, patterns: readonly string[]): Expression<SqlBool> {
  if (patterns.includes('*')) return sql<SqlBool>`1`;
  return eb.or(
    patterns.map((t) =>
      // `prefix.*`: compared as a prefix (not LIKE, where "_" is a wildcard: interview_v2.* must not match interviewXv2).
      t.endsWith('.*') ? eb(sql<string>`substr(events.event_type, 1, ${t.length - 1})`, '=', t.slice(0, -1)) : eb('events.event_type', '=', t),
    ),
  );
}

/**
 * Where a page of the selection starts: after this event, in (received_at, id) order. The id's
 * stored bytes, not the string read: an id stored from a lone UTF-16 surrogate (a JSON "\ud800"
 * escape) is not valid UTF-8, reads back as U+FFFD, and compared as that it skipped the ids between.
 */
interface PageStart {
  received_at: string;
  idBytes: Buffer;
}

/**
 * The selection, from the events stored when the replay began (rowid up to `maxSeq`: events stored
 * meanwhile are past the processing cursor, and a long replay must not chase new arrivals). Type
 * patterns: exact names or `prefix.*`. `missingFor`: only events that at least one of these sinks
 * would take now (its filters, the event settled) and has no `deliveries` row of (never queued for
 * it); in SQL, so `--limit` counts only those.
 */
function selection(db: Kysely<Database>, o: ReplayOptions, missingFor: readonly SinkConfig[], maxSeq: number, sameTime = false) {
  // sameTime: the events listed in SAME_TIME, walked in its order (CROSS JOIN: SQLite keeps that
  // table the outer loop; joined plainly, it walked every event of that received_at instead).
  const from = sameTime ? (db.selectFrom(sql`temp.${sql.raw(SAME_TIME)}`.as('g')).crossJoin('events') as unknown as ReturnType<typeof db.selectFrom<'events'>>) : db.selectFrom('events');
  let q = from.leftJoin('event_processing', 'event_processing.event_id', 'events.id').where(sql<SqlBool>`events.rowid <= ${maxSeq}`);
  if (sameTime) q = q.where(sql<SqlBool>`events.rowid = g.event_rowid`);
  if (o.id?.length) q = q.where('events.id', 'in', o.id);
  // `*` means every type, as in the sinks' `events` filters.
  if (o.type?.length && !o.type.includes('*')) {
    const types = o.type;
    q = q.where((eb) => typeMatches(eb, types));
  }
  if (o.since) q = q.where('events.received_at', '>=', o.since);
  if (o.until) q = q.where('events.received_at', '<', o.until);
  if (o.source) q = q.where('events.source', '=', o.source);
  if (missingFor.length > 0) {
    q = q.where('event_processing.state', '=', 'settled').where((eb) =>
      eb.or(
        missingFor.map((sink) =>
          eb.and([
            ...(sink.events ? [typeMatches(eb, sink.events)] : []),
            ...(sink.sources ? [eb('events.source', 'in', [...sink.sources])] : []),
            eb.not(eb.exists(eb.selectFrom('deliveries').select(sql`1`.as('one')).whereRef('deliveries.event_id', '=', 'events.id').where('deliveries.sink', '=', sink.name))),
          ]),
        ),
      ),
    );
  }
  if (o.application) {
    const app = o.application;
    // An application id, or your own correlation id (external_id), through application_events
    // (events.application_id has no index: migration 005). Events stored but not folded yet are
    // not linked; they are past the processing cursor and will be folded anyway.
    q = q.where('events.id', 'in', (eb) =>
      eb
        .selectFrom('application_events')
        .select('application_events.event_id')
        .where((e) =>
          e.or([
            e('application_events.application_id', '=', app),
            e('application_events.application_id', 'in', e.selectFrom('applications').select('applications.id').where('applications.external_id', '=', app)),
          ]),
        ),
    );
  }
  return q;
}

const pageColumns = [
  'events.id',
  'events.event_type',
  'events.source',
  'events.received_at',
  'event_processing.state',
  sql<number>`events.rowid`.as('seq'),
  sql<Buffer>`CAST(events.id AS BLOB)`.as('id_bytes'),
] as const;

const toSelected = (r: { seq: number; id: string; id_bytes: Buffer; event_type: string; source: string; received_at: string; state: string | null }): SelectedEvent => ({
  seq: r.seq,
  id: r.id,
  idBytes: r.id_bytes,
  event_type: r.event_type,
  source: r.source,
  received_at: r.received_at,
  settled: r.state === 'settled',
});

/**
 * One page of the selection, oldest first: at most `limit` events after `after`. Read page by
 * page, a replay holds one page in memory, not every selected event (a million of them took
 * 640 MB and 31 s before the first line of a dry run).
 */
async function selectEventsPage(
  db: Kysely<Database>,
  o: ReplayOptions,
  missingFor: readonly SinkConfig[],
  maxSeq: number,
  after: PageStart | null,
  limit: number,
): Promise<SelectedEvent[]> {
  let q = selection(db, o, missingFor, maxSeq).select(pageColumns);
  // A bound on received_at from the first page on (every text is >= ''): without one, SQLite walked
  // the rowids below the selection's bound and sorted them all, 4.3 s for `--limit 10` at a million.
  q = q.where(after ? sql<SqlBool>`(events.received_at, events.id) > (${after.received_at}, CAST(${after.idBytes} AS TEXT))` : sql<SqlBool>`events.received_at >= ''`);
  return (await q.orderBy('events.received_at').orderBy('events.id').limit(limit).execute()).map(toSelected);
}

/** The temp table of the events of one received_at still to page through, numbered in id order. */
const SAME_TIME = 'replay_same_time';

/**
 * The selection page by page, in (received_at, id) order. No index has that order (events_received_type
 * is (received_at, event_type)), so a page sorts the events of its received_at: each page of a
 * received_at shared by many events (a backfill, an import, a burst in one millisecond) read and
 * sorted all the rest of them again: quadratic, 14 s for a dry run of 50,000 events with one
 * received_at and 43 s for 100,000 (0.5 s and 0.9 s when their times differ). So when a whole page
 * has one received_at, the rest of that time's events (their rowids) are numbered in id order once,
 * in a temp table, and the next pages walk it; the selection's filters are applied at each page, as
 * before. The order is unchanged; the temp table lives in the connection's temp file, not the
 * database (a dry run's read-only connection has one too).
 */
function eventPages(database: OpenDatabase, o: ReplayOptions, missingFor: readonly SinkConfig[], maxSeq: number) {
  const { db, sqlite } = database;
  let after: PageStart | null = null;
  /** Walking SAME_TIME: the last number read, and the last event of that received_at. */
  let sameTime: { read: number; end: PageStart } | null = null;
  const listSameTime = (from: PageStart): void => {
    sqlite.exec(`CREATE TEMP TABLE IF NOT EXISTS ${SAME_TIME} (n INTEGER PRIMARY KEY, event_rowid INTEGER NOT NULL)`);
    sqlite.exec(`DELETE FROM temp.${SAME_TIME}`);
    sqlite
      .prepare(
        `INSERT INTO temp.${SAME_TIME} (n, event_rowid)
         SELECT row_number() OVER (ORDER BY id), rowid FROM events WHERE received_at = ? AND rowid <= ? AND id > CAST(? AS TEXT)`,
      )
      .run(from.received_at, maxSeq, from.idBytes);
    const last = sqlite
      .prepare<[], Buffer>(`SELECT CAST(events.id AS BLOB) FROM temp.${SAME_TIME} g CROSS JOIN events WHERE events.rowid = g.event_rowid ORDER BY g.n DESC LIMIT 1`)
      .pluck()
      .get();
    sameTime = last === undefined ? null : { read: 0, end: { received_at: from.received_at, idBytes: last } };
  };
  return {
    /** The next `limit` events (fewer only at the selection's end). */
    async next(limit: number): Promise<SelectedEvent[]> {
      const page: SelectedEvent[] = [];
      if (sameTime) {
        const walked = selection(db, o, missingFor, maxSeq, true)
          .select([...pageColumns, sql<number>`g.n`.as('n')])
          .where(sql<SqlBool>`g.n > ${sameTime.read}`)
          .orderBy(sql`g.n`)
          .limit(limit);
        const rows = await walked.execute();
        page.push(...rows.map(toSelected));
        if (rows.length === limit) {
          sameTime.read = rows.at(-1)!.n;
          after = page.at(-1)!;
          return page;
        }
        after = sameTime.end;
        sameTime = null;
      }
      const rest = await selectEventsPage(db, o, missingFor, maxSeq, after, limit - page.length);
      page.push(...rest);
      if (rest.length > 0) after = rest.at(-1)!;
      if (rest.length === BATCH && rest[0]!.received_at === after!.received_at) listSameTime(after!);
      return page;
    },
  };
}

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
  const filtered = Boolean(o.id?.length || o.type?.length || o.since || o.until || o.application || o.source || o.missing);
  if (!filtered && !o.all) throw new UsageError('choose events with --id, --type, --since, --until, --application, --source or --missing (or --all for every event)');
  if (o.missing && !o.sink?.length) throw new UsageError('--missing needs --sink: the sinks whose missing events to send');
  // An empty window is a mistake (the ages swapped: --since 2h --until 3h), not "nothing to do".
  if (o.since && o.until && o.since >= o.until) throw new UsageError(`--since (${o.since}) must be before --until (${o.until})`);
  // On a terminal a real run shows a bar (its total counted first). Elsewhere, or when stdout
  // lists the events (a dry run) or waits for the end (--json: the line is rewritten in place on
  // a terminal then), progress lines, as the other long commands show them.
  const withBar = io.isTTY && !o.dryRun && !o.json;
  const progress = withBar ? noProgress : progressFor(io, o.progress, { tty: Boolean(o.json) });
  const targets = resolveTargetSinks(io, o.sink, databasePathOf(io.env, o.database));
  const processing = o.processing ?? targets.length === 0;
  // A dry run changes nothing, the database's journal mode included (a backup stays as it is).
  const database = openCliDatabase(databasePathOf(io.env, o.database), { readOnly: o.dryRun === true });
  let bar: Bar | null = null;
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
    bar = barTotal > 0 ? startBar(io.stderr, `${o.dryRun ? 'checking' : 'replaying'} [{bar}] {value}/{total} events | {eta_formatted} left`, barTotal) : null;
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
    for (;;) {
      const pageSize = Math.min(BATCH, (o.limit ?? Infinity) - counts.selected);
      if (pageSize <= 0) break;
      const batch = await pages.next(pageSize);
      if (batch.length === 0) break;
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
                const job = jobs.enqueue({ kind: JobKind.processEvent, payload: { event_id: e.id, refetch: true }, eventId: e.id, source: e.source }, now);
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
      for (const l of lines) io.out(l);
      bar?.update(Math.min(barTotal, counts.selected));
      progress.report(() => `replay: ${count(counts.selected)} events selected so far`);
      // The event loop's turn, for the bar's Ctrl-C and SIGTERM handler (see onInterrupt): the
      // batches' statements and promises never gave it one, and Ctrl-C waited for the whole replay
      // (200,000 events queued, exit 0), then was lost.
      await new Promise((resolve) => setImmediate(resolve));
      if (batch.length < pageSize) break;
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
    let waited: { done: number; failed: number; unfinished?: number; timed_out?: boolean } | null = null;
    if (o.wait && !o.dryRun) waited = await waitForReplay(io, db, replayed, pairs, startedIso, o, progress);

    if (o.json) printJson(io, { dry_run: Boolean(o.dryRun), ...counts, ...(notStored.length ? { not_stored: notStored } : {}), ...(waited ? { finished: waited } : {}) });
    else {
      const parts = [`${counts.selected} event${counts.selected === 1 ? '' : 's'} selected`];
      if (processing) parts.push(`processing: ${counts.processing.queued} ${verb}${counts.processing.already_queued ? `, ${counts.processing.already_queued} already queued` : ''}`);
      for (const [name, c] of Object.entries(counts.sinks)) {
        parts.push(`sink ${name}: ${c.queued} ${verb}${c.not_wanted ? `, ${c.not_wanted} not wanted by its filters` : ''}${c.not_settled ? `, ${c.not_settled} not settled yet` : ''}${c.has_record ? `, ${c.has_record} it has a record of` : ''}`);
      }
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
    if (counts.selected === 0 && o.source && database.sqlite.prepare('SELECT 1 FROM events WHERE source = ? LIMIT 1').get(o.source) === undefined) {
      const known = database.sqlite.prepare('SELECT DISTINCT source FROM events ORDER BY source').pluck().all() as string[];
      io.err(`warning: no stored event has source ${JSON.stringify(o.source)} (stored sources: ${known.join(', ') || 'none'})`);
    }
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
    bar?.stop();
    progress.end();
    await database.close();
  }
}

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

/**
 * `--wait`: until the work the replay queued has finished, bounded by --timeout. A replayed
 * event's processing is finished when its process_event job is, and what that job caused is:
 * the result read it queued (a fetch_result job made after the replay's first job; it may wait
 * for the 30 s poll spacing or a result still processing), and the deliveries of a new revision
 * that read settled (deliveries rows whose cycle was queued since the replay started). Each is
 * queued before the job that queues it completes, so "nothing open" cannot be seen early. Other
 * work on the event (an older delivery backing off for hours) is not waited for. It failed if
 * the process_event job, that read or one of those deliveries was dead-lettered. A replay to a
 * sink is finished when its (event, sink) delivery is delivered or dead and no job of that pair
 * is still to run.
 */
async function waitForReplay(
  io: CliIo,
  db: Kysely<Database>,
  replayed: { job: number; event: string }[],
  pairs: { event: string; sink: string }[],
  startedIso: string,
  o: ReplayOptions,
  progress: Progress,
) {
  const total = replayed.length + pairs.length;
  const deadline = Date.now() + o.timeout * 1000;
  const bar = io.isTTY && !o.json && total > 0 ? startBar(io.stderr, 'waiting   [{bar}] {value}/{total} finished', total) : null;
  const firstJob = replayed.reduce((min, r) => Math.min(min, r.job), Number.MAX_SAFE_INTEGER);
  // What is still read at each count: an item done for good is counted once and left out of the
  // reads (see waitStep). Every item counted every 200 ms took about a core of the CLI's CPU at
  // 50,000 items, and reads beside the receiver it waits on.
  let following: Following = { replayed, bySink: groupBy(pairs, (p) => p.sink, (p) => p.event) };
  let done = 0;
  let failed = 0;
  try {
    for (;;) {
      const step = await waitStep(db, following, firstJob, startedIso);
      done += step.doneForGood;
      following = step.following;
      failed = step.failed;
      bar?.update(done + failed);
      progress.report(() => `replay --wait: ${ofTotal(done + failed, total, 'finished')}`);
      if (done + failed >= total) return { done, failed };
      // Counted and said by the caller (in --json too), then exit 1.
      if (Date.now() > deadline) return { done, failed, unfinished: total - done - failed, timed_out: true };
      // Not past the deadline: the last count is the one just after it, as with a short pause.
      const pause = Math.min(waitPollMs(step.followed), deadline + 1 - Date.now());
      await new Promise((r) => setTimeout(r, Math.max(0, pause)));
    }
  } finally {
    bar?.stop();
    progress.end();
  }
}

/**
 * The pause between two counts of `--wait`, by how many items a count reads: 200 ms up to 5,000,
 * then longer (400 ms at 10,000), at most 1.5 s (from 37,500). A count of 50,000 unfinished items
 * took about 0.1 s of CPU; every 200 ms it kept the CLI near a core busy beside the receiver.
 */
export const waitPollMs = (followed: number): number => Math.min(1_500, Math.max(200, Math.round(followed / 25)));

interface Following {
  replayed: readonly { job: number; event: string }[];
  bySink: ReadonlyMap<string, readonly string[]>;
}

/**
 * One count of `--wait` over the items still followed. Done for good, and no longer read: a
 * replayed event whose process_event job is done (or pruned), with its result read done and the
 * deliveries of the revision it made delivered, none dead; a (event, sink) delivery delivered, with
 * no job of the pair still to run. A
 * later cycle of such a delivery is another change's (a later event's revision), not the
 * replay's, which is not waited for. Anything dead is counted failed but read again: it does not
 * stay so by itself. An operator's `dead-letters retry` revives a job or delivery in place; the
 * receiver itself requeues an application's dead reads that failed on 404s when another of its
 * events is folded, deletes an event's dead reads once another read gets the answer, settles the
 * event of a dead read as given_up in a second transaction (queueing its deliveries), and a sink's
 * lane that finds the result changed queues the next revision to every sink, dead deliveries too.
 */
async function waitStep(db: Kysely<Database>, following: Following, firstJob: number, startedIso: string) {
  let doneForGood = 0;
  let failed = 0;
  const replayed: { job: number; event: string }[] = [];
  // Counted per chunk with IN lists (a query per event, every 200 ms, took CPU the receiver needed).
  for (const chunk of inChunks(following.replayed)) {
    const events = chunk.map((r) => r.event);
    const own = new Map((await db.selectFrom('jobs').select(['id', 'state']).where('id', 'in', chunk.map((r) => r.job)).execute()).map((r) => [r.id, r.state]));
    const tally = new Map<string, { open: number; dead: number }>();
    const add = (rows: { event_id: string | null; open: number; dead: number }[]) => {
      for (const r of rows) {
        if (r.event_id === null) continue;
        const t = tally.get(r.event_id) ?? { open: 0, dead: 0 };
        t.open += Number(r.open);
        t.dead += Number(r.dead);
        tally.set(r.event_id, t);
      }
    };
    add(
      await db
        .selectFrom('jobs')
        .select(['event_id', sql<number>`sum(state IN ('pending', 'running'))`.as('open'), sql<number>`sum(state = 'dead')`.as('dead')])
        .where('event_id', 'in', events)
        .where(jobsByEventTerm)
        .where('kind', '=', JobKind.fetchResult)
        .where('id', '>', firstJob)
        .groupBy('event_id')
        .execute(),
    );
    add(
      await db
        .selectFrom('deliveries')
        .select(['event_id', sql<number>`sum(state NOT IN ('delivered', 'dead'))`.as('open'), sql<number>`sum(state = 'dead')`.as('dead')])
        .where('event_id', 'in', events)
        .where('queued_at', '>=', startedIso)
        .groupBy('event_id')
        .execute(),
    );
    for (const r of chunk) {
      // A job no longer there finished and was deleted meanwhile (`prune`: only finished jobs go).
      const state = own.get(r.job) ?? 'done';
      const follow = tally.get(r.event);
      if (state === 'done' && !(follow && (follow.open > 0 || follow.dead > 0))) {
        doneForGood++;
        continue;
      }
      replayed.push(r);
      if (state !== 'done' && state !== 'dead') continue;
      if (follow && follow.open > 0) continue;
      failed++;
    }
  }
  const bySink = new Map<string, string[]>();
  for (const [sink, ids] of following.bySink) {
    const left: string[] = [];
    for (const chunk of inChunks(ids)) {
      const states = new Map(
        (await db.selectFrom('deliveries').select(['event_id', 'state']).where('sink', '=', sink).where('event_id', 'in', chunk).execute()).map((r) => [r.event_id, r.state]),
      );
      // A pair whose job is still to run is not finished, whatever its row says: a send of the same
      // revision that was in flight when the replay came (its message id is the replay's) records
      // the row delivered (or dead) on completing, before the replay's own job has run.
      const open = new Set(
        (
          await db
            .selectFrom('jobs')
            .select('event_id')
            .where('event_id', 'in', chunk)
            .where(jobsByEventTerm)
            .where('kind', '=', sinkJobKind(sink))
            // Unary +: by the event ids (jobs_event), not every open job of the sink (jobs_kind_ready).
            .where(sql<string>`+state`, 'in', ['pending', 'running'])
            .execute()
        ).map((r) => r.event_id),
      );
      for (const event of chunk) {
        const state = states.get(event);
        if (open.has(event)) left.push(event);
        else if (state === 'delivered') doneForGood++;
        else {
          if (state === 'dead') failed++;
          left.push(event);
        }
      }
    }
    if (left.length > 0) bySink.set(sink, left);
  }
  const followed = replayed.length + [...bySink.values()].reduce((n, ids) => n + ids.length, 0);
  return { doneForGood, failed, followed, following: { replayed, bySink } };
}
