import { existsSync, readdirSync, statfsSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { openElsewhere } from '../../db/openElsewhere.js';
import { acquireWorkersLock, workersLockHeld, WorkersRunningError, type WorkersLock } from '../../db/workersLock.js';
import { copyFormat } from '../../util/copyFormat.js';
import { addressMatcher, canonicalAddress, looksLikeAddress } from '../../util/namesAddress.js';
import { rewriteWithoutLines } from '../../util/rewriteWithoutLines.js';
import { databasePathOf } from '../cliConfig.js';
import { openCliDatabase } from '../cliDatabase.js';
import { CliError, exitBySignal, UsageError } from '../errors.js';
import { stopOnInterrupt, type StopRequest } from '../onInterrupt.js';
import { printJson, type CliIo } from '../io.js';
import { configuredSinks, type SinkConfig } from '../sinkOps.js';

export interface EraseOptions {
  database?: string;
  email?: string;
  application?: string[];
  deletedAtService?: boolean;
  finish?: boolean;
  dryRun?: boolean;
  json?: boolean;
  /** Erase without CONFIG_FILE although the events went to sinks: their file sinks' lines are taken out by hand. */
  withoutSinkFiles?: boolean;
}

/** The service retries a delivery for 10 h 50 min (spec 6.3: 6 attempts); a margin rounds it up. */
export const SERVICE_RETRY_WINDOW_MS = 11 * 3_600_000;

/** What erasing leaves alone: said by every run, so no operator takes the database for the whole of it. */
const OUTSIDE = 'backups and Litestream replicas of the database, and what http and stdout sinks sent (their consumers keep it): erase it there';

/**
 * The tables in the order they are cleared (README, "Personal data and erasure"), each with the rows
 * of the selection: @apps and @events are JSON arrays of ids. A text names the candidate through the
 * SQL functions `withMatchers` gives the connection: the address as a whole address (a substring
 * test, `instr`, took `joan@…`'s rows for `an@…`'s, and missed `an\u0040…`), or a selected id.
 */
const APPS = 'SELECT value FROM json_each(@apps)';
const EVENTS = 'SELECT value FROM json_each(@events)';
// Not SQLite's lower(), which folds A-Z only: `JOSÉ@…` stored was not `josé@…` typed (canonicalAddress).
const SAME_ADDRESS = (column: string) => `erase_same_address(${column}) = 1`;
const NAMES_ADDRESS = (column: string) => `erase_names_address(${column}) = 1`;
const NAMES_CANDIDATE = (column: string) => `erase_names_candidate(${column}, @apps, @events) = 1`;
const TABLES: readonly (readonly [table: string, where: string])[] = [
  ['applications', `id IN (${APPS})`],
  ['application_status_history', `application_id IN (${APPS})`],
  ['interview_results', `application_id IN (${APPS})`],
  ['cv_evaluation_results', `application_id IN (${APPS})`],
  ['insights_results', `application_id IN (${APPS})`],
  ['legacy_interview_results', `application_id IN (${APPS})`],
  ['application_events', `application_id IN (${APPS}) OR event_id IN (${EVENTS})`],
  ['event_processing', `event_id IN (${EVENTS})`],
  ['deliveries', `event_id IN (${EVENTS})`],
  ['jobs', `event_id IN (${EVENTS})`],
  ['event_conflicts', `event_id IN (${EVENTS}) OR ${NAMES_CANDIDATE('envelope')}`],
  // Bodies are BLOBs (LIKE never matches them where SQLite has LIKE_DOESNT_MATCH_BLOBS, Debian's):
  // the function reads them as text. A candidate chosen by --application alone is named by its id.
  ['quarantine', NAMES_CANDIDATE('body')],
  ['events', `id IN (${EVENTS})`],
];

interface Selection {
  applications: string[];
  events: string[];
  problems: string[];
}

/** A stored value as text: a quarantined body is bytes (UTF-8 mostly; one with NULs may be UTF-16). */
function asText(v: unknown): string {
  if (Buffer.isBuffer(v)) return v.includes(0) ? `${v.toString('utf8')}\n${v.toString('utf16le')}` : v.toString('utf8');
  return typeof v === 'string' ? v : String(v);
}

/** Whether a line or a value names the candidate: the address, or a selected id as a JSON string. */
function candidateMatcher(address: string | null, ids: readonly string[]): (text: string) => boolean {
  const quoted = ids.map((id) => JSON.stringify(id));
  const names = address === null ? () => false : addressMatcher(address);
  return (text) => names(text) || quoted.some((q) => text.includes(q));
}

/** The SQL functions of SAME_ADDRESS, NAMES_ADDRESS and NAMES_CANDIDATE, on this connection. */
function withMatchers(sqlite: BetterSqlite3.Database, address: string | null): void {
  sqlite.function('erase_same_address', { deterministic: true }, (v: unknown) => (v !== null && address !== null && canonicalAddress(String(v)) === address ? 1 : 0));
  const names = address === null ? null : addressMatcher(address);
  sqlite.function('erase_names_address', { deterministic: true }, (v: unknown) => (v !== null && names !== null && names(asText(v)) ? 1 : 0));
  let cached: { key: string; names: (text: string) => boolean } | null = null;
  sqlite.function('erase_names_candidate', { deterministic: true }, (v: unknown, apps: unknown, events: unknown) => {
    const key = `${String(apps)}\n${String(events)}`;
    if (cached?.key !== key) cached = { key, names: candidateMatcher(address, [...(JSON.parse(String(apps)) as string[]), ...(JSON.parse(String(events)) as string[])]) };
    return v !== null && cached.names(asText(v)) ? 1 : 0;
  });
}

/** The candidate's applications and events, and why erasing them now is refused (none: it may go on). */
function select(sqlite: BetterSqlite3.Database, address: string | null, ids: readonly string[], o: EraseOptions, now: number, sinks: readonly SinkConfig[] | null): Selection {
  const apps = sqlite
    .prepare(`SELECT id, deleted_at FROM applications WHERE ${SAME_ADDRESS('candidate_email')} OR id IN (SELECT value FROM json_each(@ids)) ORDER BY id`)
    .all({ ids: JSON.stringify(ids) }) as { id: string; deleted_at: string | null }[];
  const applications = apps.map((a) => a.id);
  const events = sqlite
    .prepare(
      `SELECT id, received_at FROM events WHERE id IN (SELECT event_id FROM application_events WHERE application_id IN (${APPS}))
         OR application_id IN (${APPS}) OR ${NAMES_ADDRESS('envelope')} ORDER BY received_at`,
    )
    .all({ apps: JSON.stringify(applications), address }) as { id: string; received_at: string }[];
  const problems: string[] = [];
  const missing = ids.filter((id) => !applications.includes(id));
  for (const id of missing) problems.push(`no application has id ${JSON.stringify(id)}`);
  if (applications.length === 0 && address !== null) {
    problems.push('no application has the candidate email given (compared ignoring case; if an earlier `erase` of this candidate stopped before its VACUUM, `hiring-receiver erase --finish` completes it)');
  }
  // Without CONFIG_FILE no sink is known here, and sinks are configured nowhere else: events that
  // went to sinks mean the receiver has one (a file sink's lines would stay, the database erased,
  // and a run with CONFIG_FILE afterwards finds no application to take its lines by).
  if (sinks === null && !o.withoutSinkFiles) {
    const sent = sqlite.prepare(`SELECT DISTINCT sink FROM deliveries WHERE event_id IN (${EVENTS}) ORDER BY sink`).pluck().all({ events: JSON.stringify(events.map((e) => e.id)) }) as string[];
    if (sent.length > 0) {
      problems.push(
        `CONFIG_FILE is unset here, and the candidate's events went to the sinks ${sent.join(', ')}: give erase the receiver's CONFIG_FILE, so that its file sinks' lines are taken out too, or add --without-sink-files to erase the database alone (then take the lines out of each file sink's file yourself)`,
      );
    }
  }
  // A file sink's file not found here (a relative path read from another working folder, a moved
  // file) would be "0 lines taken out" while its lines stay where the receiver writes them.
  for (const sink of sinks ?? []) {
    const path = sink.type === 'file' ? (sink.options as { path: string }).path : null;
    if (path === null || existsSync(path)) continue;
    const delivered = sqlite.prepare("SELECT COUNT(*) FROM deliveries WHERE sink = ? AND state = 'delivered'").pluck().get(sink.name) as number;
    if (delivered > 0) {
      problems.push(
        `file sink ${sink.name}: ${resolve(path)} does not exist here, yet ${delivered} message${delivered === 1 ? ' was' : 's were'} delivered to it: run erase in the receiver's working folder (a relative path is read from the current one) with the CONFIG_FILE it uses`,
      );
    }
  }
  for (const a of apps) {
    if (a.deleted_at === null && !o.deletedAtService) {
      problems.push(
        `application ${a.id} is not deleted at the service (no job_application.deleted stored): delete it there first, and let the receiver store the deletion; for one stored again by a redelivery after an earlier erasure, check that the service answers 404 for it, then add --deleted-at-service`,
      );
    }
  }
  const last = events.at(-1)?.received_at;
  if (last !== undefined && Date.parse(last) > now - SERVICE_RETRY_WINDOW_MS) {
    problems.push(
      `the last of its events was stored at ${last}: the service may deliver it again (storing the candidate again) until ${new Date(Date.parse(last) + SERVICE_RETRY_WINDOW_MS).toISOString()}, the end of its retry window (11 h, spec 6.3); run it after that`,
    );
  }
  // Events past the processing cursor are not folded yet: an application of theirs may not be in
  // `applications`, nor their events in `application_events`, so the selection would miss them.
  if (sqlite.prepare('SELECT EXISTS (SELECT 1 FROM events WHERE rowid > (SELECT last_event_rowid FROM processing_cursor))').pluck().get() === 1) {
    problems.push('processing is not caught up (`status`): let the receiver process every event first');
  }
  return { applications, events: events.map((e) => e.id), problems };
}

/** Rows of each table the selection names: counted (dry run) or deleted. */
function eachTable(sqlite: BetterSqlite3.Database, s: Selection, address: string | null, erase: boolean): Record<string, number> {
  const params = { apps: JSON.stringify(s.applications), events: JSON.stringify(s.events), address };
  const rows: Record<string, number> = {};
  for (const [table, where] of TABLES) {
    rows[table] = erase
      ? sqlite.prepare(`DELETE FROM ${table} WHERE ${where}`).run(params).changes
      : (sqlite.prepare(`SELECT COUNT(*) FROM ${table} WHERE ${where}`).pluck().get(params) as number);
  }
  return rows;
}

interface SinkFileResult {
  sink: string;
  path: string;
  lines: number;
  rotated: { path: string; lines: number }[];
  not_touched: string[];
}

/** Compressions of a rotated copy this command cannot rewrite (gzip it can), by name. */
const UNREADABLE_COPY = /\.(bz2|xz|zst|lz4|lzma|z|zip|7z)$/i;

/** A rotated copy this command cannot read lines from: compressed otherwise than with gzip, by its name or its bytes (copyFormat). */
const unreadableCopy = (copy: string): boolean => UNREADABLE_COPY.test(copy) || copyFormat(copy) === 'other';

/** Copies log rotation left beside a sink's file: its name with a suffix (events.ndjson.1, events.ndjson-20261127.gz). */
function rotatedCopies(path: string): string[] {
  const name = basename(path);
  const folder = dirname(path);
  if (!existsSync(folder)) return [];
  return readdirSync(folder)
    .filter((f) => f.length > name.length && f.startsWith(name) && /^[.\-_]/.test(f.slice(name.length)) && !f.includes('.rewrite-'))
    .map((f) => join(folder, f))
    .filter((f) => statSync(f).isFile())
    .sort();
}

/** Rotated copies of the file sinks' files compressed in a format this command cannot rewrite: a reason to refuse each. */
function unreadableCopies(sinks: readonly SinkConfig[]): string[] {
  const problems: string[] = [];
  for (const sink of sinks) {
    if (sink.type !== 'file') continue;
    const path = (sink.options as { path: string }).path;
    let unreadable: string[];
    try {
      unreadable = rotatedCopies(path).filter(unreadableCopy);
    } catch (err) {
      // A rotated copy that cannot be read (a dangling symlink, no permission): said with its sink, as a rewrite's failure is.
      throw new CliError(`file sink ${sink.name}: cannot read the rotated copies of ${path}: ${(err as Error).message}`);
    }
    for (const copy of unreadable) {
      problems.push(
        `file sink ${sink.name}: the rotated copy ${copy} is compressed in a format this command does not rewrite (only gzip), and may hold the candidate's lines: decompress it (\`bunzip2 <file>\`, \`unxz <file>\`), run erase again, which then takes them out of it too, and compress it again if you wish`,
      );
    }
  }
  return problems;
}

/** Takes the candidate's lines out of each file sink's file and its rotated copies. */
async function eraseFromSinkFiles(sinks: readonly SinkConfig[], s: Selection, address: string | null, dryRun: boolean, stop?: StopRequest): Promise<SinkFileResult[]> {
  const names = candidateMatcher(address, [...s.applications, ...s.events]);
  const results: SinkFileResult[] = [];
  for (const sink of sinks) {
    if (sink.type !== 'file') continue;
    const path = (sink.options as { path: string }).path;
    const result: SinkFileResult = { sink: sink.name, path, lines: 0, rotated: [], not_touched: [] };
    let at = path;
    try {
      if (existsSync(path)) result.lines = await rewriteWithoutLines(path, names, { dryRun, stop });
      for (const copy of rotatedCopies(path)) {
        at = copy;
        if (unreadableCopy(copy)) result.not_touched.push(copy);
        else result.rotated.push({ path: copy, lines: await rewriteWithoutLines(copy, names, { dryRun, stop }) });
      }
    } catch (err) {
      const by = stop?.by();
      if (by !== undefined) throw new Interrupted(by, at);
      // The file that failed, not the sink's path "or its rotated copies": a corrupt `.3.gz` among ten was the operator's to find.
      throw new CliError(`file sink ${sink.name}: cannot take the candidate's lines out of ${at}: ${(err as Error).message}`);
    }
    results.push(result);
  }
  return results;
}

/** Ctrl-C (SIGINT) or SIGTERM while a file sink's file was rewritten: its temporary copy is removed, the file left as it was. */
class Interrupted extends Error {
  constructor(
    readonly by: NodeJS.Signals,
    readonly path: string,
  ) {
    super(`stopped by ${by} while taking the candidate's lines out of ${path}`);
  }
}

/**
 * VACUUM writes a copy of the database in the temporary folder, then the whole copy into the WAL:
 * about its size free in each. Refused before anything is erased, rather than stop after it.
 */
function noRoomForVacuum(io: CliIo, path: string): string | null {
  const size = statSync(path).size;
  const tmp = [io.env['SQLITE_TMPDIR'], io.env['TMPDIR'], '/var/tmp', '/usr/tmp', '/tmp'].find((d) => d !== undefined && d !== '' && existsSync(d)) ?? dirname(path);
  const folders = [dirname(path), tmp];
  const need = new Map<number, { folder: string; bytes: number }>();
  for (const folder of folders) {
    const dev = statSync(folder).dev;
    const n = need.get(dev);
    need.set(dev, { folder: n?.folder ?? folder, bytes: (n?.bytes ?? 0) + size });
  }
  for (const { folder, bytes } of need.values()) {
    const fs = statfsSync(folder);
    const free = fs.bavail * fs.bsize;
    if (free < bytes) return `not enough free disk space for the VACUUM: it needs about ${Math.ceil(bytes / 1e6)} MB in ${folder} (the database is ${Math.ceil(size / 1e6)} MB), ${Math.floor(free / 1e6)} MB are free`;
  }
  return null;
}

/** VACUUM, then the WAL written back and truncated: until then, earlier copies of the rows remain. */
function compact(sqlite: BetterSqlite3.Database, commandLine: string): string {
  sqlite.exec('VACUUM');
  const r = sqlite.prepare('PRAGMA wal_checkpoint(TRUNCATE)').raw().get() as number[];
  const answer = r.join('|');
  if (answer !== '0|0|0') {
    throw new CliError(
      `the checkpoint answered ${answer}, not 0|0|0: another process (a reader, an ingest-only \`serve\`) holds the database open, and the erased data may remain in its -wal file and in pages of the database file until they close; stop them, then run \`${commandLine}\`, which completes the VACUUM and checkpoint`,
    );
  }
  return answer;
}

/**
 * `erase`: one candidate out of the database (a GDPR request), the steps of README "Personal data
 * and erasure" in one command. Refuses, erasing nothing, unless the applications are deleted at the
 * service, the service's retry window has passed, processing is caught up and no process runs the
 * workers; then, in one IMMEDIATE transaction with secure_delete on, takes the lines out of the
 * file sinks' files and deletes the rows; then VACUUMs (deleted rows leave copies in pages still
 * in use) and truncates the WAL. Prints application ids, never the address or the name.
 */
export async function runErase(io: CliIo, o: EraseOptions): Promise<number> {
  const ids = o.application ?? [];
  if (o.email === '') throw new UsageError('--email: the address is empty');
  if (o.finish && (o.email !== undefined || ids.length > 0 || o.dryRun)) throw new UsageError('--finish takes no selection and no --dry-run: it completes the VACUUM and checkpoint of an earlier erasure');
  if (!o.finish && o.email === undefined && ids.length === 0) throw new UsageError('say whose data to erase: --email <address>, or --application <id> for a candidate without one');
  const address = o.email === undefined ? null : canonicalAddress(o.email);
  // Not printed: the address is personal data too.
  if (address !== null && !looksLikeAddress(address)) throw new UsageError('--email: not an email address (a name, one @ and a domain, no spaces): a part of one would match other candidates too');
  const path = databasePathOf(io.env, o.database);
  const finishLine = `hiring-receiver erase --finish${o.database === undefined ? '' : ' --database <path>'}`;

  const workersRunning = (err: WorkersRunningError) => `${err.message}; stop it (and every process that has the database open) first`;
  const refused = (problems: string[]) => new CliError(problems.map((p) => `erase refused, nothing erased: ${p}`).join('\nerror: '));
  const { sinks, problems: sinkProblems } = configuredSinks(io.env, path);
  const sinkRefusals = sinkProblems.map((p) => `CONFIG_FILE: ${p} (its file sinks must be read to erase their lines)`);
  if (sinkRefusals.length > 0 && !o.dryRun && !o.finish) throw refused(sinkRefusals);
  // The sinks select() checks the candidate's deliveries against: none known without CONFIG_FILE.
  const knownSinks = (io.env['CONFIG_FILE'] ?? '') === '' ? null : sinks;

  let lock: WorkersLock | null = null;
  if (!o.dryRun) {
    // Held to the end: no `serve` or `work` starts its workers (nor writes a file sink) meanwhile.
    try {
      lock = acquireWorkersLock(path);
    } catch (err) {
      if (err instanceof WorkersRunningError) throw refused([workersRunning(err)]);
      throw err;
    }
  }
  // Not only the workers: an ingest-only `serve` (WORKER_CONCURRENCY=0) takes no workers lock, and
  // it (or a reader) stores the candidate again, or keeps the erased rows in the -wal and in pages
  // of the file (the checkpoint at the end could only say so, after the rows were deleted).
  if (!o.dryRun && !o.finish && openElsewhere(path)) {
    lock?.release();
    throw refused([
      'another process has the database open (a `serve`, also one with WORKER_CONCURRENCY=0, which takes no workers lock, or a reader: sqlite3, Litestream, another hiring-receiver command): stop every process that has it open first',
    ]);
  }
  // Ctrl-C (SIGINT) or SIGTERM stops the rewrite of a file sink's file at its next chunk, its
  // temporary copy removed: ended at once by the signal, that copy (the other candidates' lines)
  // stayed beside the file. The database steps after it are synchronous and run to their end.
  // Not for --finish, which rewrites no file: a handler there only held the signal until its
  // VACUUM was done (or failed), then dropped it, exit 0 and not a word; ended at once, as
  // before, the VACUUM is rolled back whole.
  const stop = o.dryRun || o.finish ? undefined : stopOnInterrupt();
  try {
    const room = o.dryRun ? null : noRoomForVacuum(io, path);
    if (room) throw refused([room]);
    const database = openCliDatabase(path, { readOnly: o.dryRun === true });
    try {
      const sqlite = database.sqlite;
      withMatchers(sqlite, address);
      if (o.finish) {
        const checkpoint = compact(sqlite, finishLine);
        if (o.json) printJson(io, { dry_run: false, vacuumed: true, checkpoint });
        else io.out(`database compacted (VACUUM) and its WAL truncated (checkpoint ${checkpoint})`);
        return 0;
      }
      const now = Date.now();
      let s: Selection;
      let rows: Record<string, number>;
      let files: SinkFileResult[];
      if (o.dryRun) {
        ({ s, rows } = database.sqlite.transaction(() => {
          const s = select(sqlite, address, ids, o, now, knownSinks);
          return { s, rows: eachTable(sqlite, s, address, false) };
        })());
        s.problems.push(...sinkRefusals);
        s.problems.push(...unreadableCopies(sinks));
        // The erasure takes the workers lock first and stops there: a dry run beside a running
        // receiver said `refused: []` (exit 0) for a run that would be refused. Asked without
        // taking the lock, so that a receiver starting meanwhile is not refused for it.
        if (workersLockHeld(path)) s.problems.push(workersRunning(new WorkersRunningError(path)));
        files = await eraseFromSinkFiles(sinks, s, address, true);
      } else {
        sqlite.pragma('secure_delete = ON');
        sqlite.exec('BEGIN IMMEDIATE');
        try {
          s = select(sqlite, address, ids, o, now, knownSinks);
          s.problems.push(...unreadableCopies(sinks));
          if (s.problems.length > 0) throw refused(s.problems);
          // The sink files first, while the selection is still in the database: a failure or a crash
          // here leaves the rows, and the same command run again finds them and does the rest (a
          // file already rewritten has no line left to take out).
          try {
            files = await eraseFromSinkFiles(sinks, s, address, false, stop);
          } catch (err) {
            if (err instanceof Interrupted) {
              sqlite.exec('ROLLBACK');
              io.err(
                `erase: ${err.message}: stopped there, its temporary copy removed and ${err.path} left unchanged; nothing erased from the database (lines already taken out of an earlier file stay out); run it again to erase the candidate`,
              );
              return exitBySignal(err.by);
            }
            io.err(`erase: stopped by the error below before the database: nothing erased from it (lines already taken out of a file sink stay out); run it again once it is fixed`);
            throw err;
          }
          rows = eachTable(sqlite, s, address, true);
          sqlite.exec('COMMIT');
        } catch (err) {
          if (sqlite.inTransaction) sqlite.exec('ROLLBACK');
          throw err;
        }
      }
      let checkpoint: string | null = null;
      if (!o.dryRun) {
        try {
          checkpoint = compact(sqlite, finishLine);
        } catch (err) {
          io.err(`erase: the candidate's rows are deleted (applications ${s.applications.join(', ')}) and the file sinks rewritten, but the file is not clean yet:`);
          throw err;
        }
      }
      report(io, o, s, rows, files, sinks, checkpoint);
      const late = stop?.by();
      if (late !== undefined) {
        const when = files.length > 0 ? 'once the file sinks were rewritten' : 'during the database steps';
        io.err(`erase: ${late} came ${when}: the erasure went on to its end (above)`);
      }
      if (s.problems.length > 0) {
        for (const p of s.problems) io.err(`error: erase would be refused: ${p}`);
        return 1;
      }
      return 0;
    } finally {
      await database.close();
    }
  } finally {
    stop?.off();
    lock?.release();
  }
}

function report(io: CliIo, o: EraseOptions, s: Selection, rows: Record<string, number>, files: SinkFileResult[], sinks: readonly SinkConfig[], checkpoint: string | null): void {
  const others = sinks.filter((k) => k.type !== 'file').map((k) => `${k.type} sink ${k.name}`);
  const notReached = `not reached: ${OUTSIDE}${others.length > 0 ? ` (here: ${others.join(', ')})` : ''}`;
  const noSinkFiles = (io.env['CONFIG_FILE'] ?? '') === '' ? 'CONFIG_FILE is unset here, so no file sink was rewritten: give the command the receiver\'s CONFIG_FILE' : null;
  if (o.json) {
    printJson(io, {
      dry_run: o.dryRun === true,
      applications: s.applications,
      events: s.events.length,
      rows,
      file_sinks: files,
      vacuumed: checkpoint !== null,
      checkpoint,
      not_reached: notReached.replace(/^not reached: /, ''),
      ...(o.dryRun ? { refused: s.problems } : {}),
    });
    if (noSinkFiles) io.err(`warning: ${noSinkFiles}`);
    return;
  }
  const would = o.dryRun ? 'would erase' : 'erased';
  io.out(`${would} ${s.applications.length} application${s.applications.length === 1 ? '' : 's'}: ${s.applications.join(', ') || '-'}`);
  io.out(`rows ${o.dryRun ? 'to delete' : 'deleted'}: ${Object.entries(rows).map(([t, n]) => `${t} ${n}`).join(', ')}`);
  for (const f of files) {
    io.out(`file sink ${f.sink}: ${f.lines} line${f.lines === 1 ? '' : 's'} ${o.dryRun ? 'to take out of' : 'taken out of'} ${f.path}`);
    for (const r of f.rotated) io.out(`  rotated copy ${r.path}: ${r.lines} line${r.lines === 1 ? '' : 's'} ${o.dryRun ? 'to take out' : 'taken out'}`);
    for (const n of f.not_touched) io.out(`  rotated copy ${n}: not rewritten (compressed in a format this command does not rewrite): decompress it, then run erase`);
  }
  if (noSinkFiles) io.err(`warning: ${noSinkFiles}`);
  if (checkpoint !== null) io.out(`database compacted (VACUUM) and its WAL truncated (checkpoint ${checkpoint})`);
  io.out(notReached);
}
