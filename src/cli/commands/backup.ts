import { closeSync, existsSync, fsyncSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { DATABASE_SIDECARS } from '../../db/databaseFiles.js';
import { identityOf, sameFile } from '../../db/fileIdentity.js';
import { databasePathOf } from '../cliConfig.js';
import { CliError, UsageError } from '../errors.js';
import { printJson, type CliIo } from '../io.js';
import { onInterrupt } from '../onInterrupt.js';
import { ofTotal, progressFor } from '../progress.js';
import { realPathOf } from '../../util/realPath.js';
import { makeFolderFor, syncFolder } from '../../util/syncFolder.js';

export interface BackupOptions {
  database?: string;
  force?: boolean;
  json?: boolean;
  /** Progress lines on stderr also when it is not a terminal. */
  progress?: boolean;
}

/** `receiver-20261125T043000Z.db`: the name a backup gets inside a folder. */
export const backupName = (now: Date): string => `receiver-${now.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}.db`;

/**
 * A consistent copy of the database while the receiver runs, as one self-contained file: SQLite's
 * online backup copies every page under one read snapshot (the receiver keeps writing meanwhile;
 * WAL), then the copy is switched to a rollback journal (no -wal beside it), checked
 * (`quick_check`), made 0600 (it holds candidate data), synced, and renamed into place, so a
 * file at the destination is always a whole backup. Works on any schema version: a backup is
 * what one takes before an upgrade. Needs no `sqlite3` program (the Docker image has none).
 */
export async function runBackup(io: CliIo, destination: string, o: BackupOptions): Promise<number> {
  const source = databasePathOf(io.env, o.database);
  const progress = progressFor(io, o.progress);
  if (!existsSync(source)) throw new CliError(`no database at ${source} (set DATABASE_PATH or --database)`);

  if (destination.trim() === '') throw new UsageError('no destination: give a file or a folder for the backup');
  let target = destination;
  // What makes the backup's name in its folder durable (and the folders made for it, if any).
  let madeDurable = (): Promise<void> => syncFolder(dirname(resolve(target)));
  const isDir = (p: string) => existsSync(p) && statSync(p).isDirectory();
  if (destination.endsWith('/')) {
    const folder = destination.replace(/\/+$/, '') || '/';
    if (existsSync(folder) && !isDir(folder)) throw new CliError(`${folder} is not a folder`);
    // A path ending in / names a folder: made if missing (as `mkdir -p`, 0700: backups hold
    // candidate data), so `backup /data/backups/` works on a new volume as the runbook shows it.
    if (!existsSync(folder)) {
      try {
        madeDurable = await makeFolderFor(folder, { mode: 0o700 });
      } catch (err) {
        throw new CliError(`cannot create the folder ${folder} for the backup: ${(err as Error).message}`);
      }
    }
  }
  if (destination.endsWith('/') || isDir(destination)) target = join(destination, backupName(new Date()));
  else if (isDir(dirname(resolve(target))) === false && existsSync(dirname(resolve(target)))) throw new CliError(`${dirname(resolve(target))} is not a folder`);
  if (!existsSync(dirname(resolve(target)))) throw new CliError(`no folder ${dirname(resolve(target))} for the backup: create it first`);

  const realSource = realPathOf(source);
  const realTarget = realPathOf(target);
  // By name, and by the file a name reaches: on macOS's case-insensitive APFS `Receiver.db` is
  // `receiver.db` under another spelling, and so is a hard link anywhere. Replaced by the copy's
  // rename, the receiver would go on writing a file no name reaches any more.
  const sourceFiles = [source, ...DATABASE_SIDECARS.map((s) => `${source}${s}`)].map(identityOf).filter((id) => id !== null);
  let targetFile: ReturnType<typeof identityOf>;
  try {
    targetFile = identityOf(target);
  } catch (err) {
    // A link that loops (ELOOP), a folder on the way that cannot be read (EACCES): not a destination.
    const code = (err as NodeJS.ErrnoException).code;
    throw new CliError(`cannot use ${target} as the destination: ${code === 'ELOOP' ? 'it is a symbolic link that leads back to itself' : (err as Error).message}`);
  }
  if (
    realTarget === realSource ||
    DATABASE_SIDECARS.some((s) => realTarget === `${realSource}${s}`) ||
    (targetFile !== null && sourceFiles.some((id) => sameFile(id, targetFile)))
  ) {
    throw new CliError(`${target} is the database or one of its files: choose another destination`);
  }
  if (existsSync(target) && !o.force) throw new CliError(`${target} already exists: choose another name, or --force to replace it`);
  // SQLite would take a -wal or -journal left beside the destination (an old database crashed
  // there) as part of the copy, and corrupt it when it is next opened.
  const leftovers = ['-wal', '-journal', '-shm'].map((x) => `${target}${x}`).filter((f) => existsSync(f));
  if (leftovers.length > 0) {
    throw new CliError(`${leftovers.join(', ')} ${leftovers.length === 1 ? 'is' : 'are'} beside the destination (left by another database there): SQLite would apply ${leftovers.length === 1 ? 'it' : 'them'} to the copy; remove ${leftovers.length === 1 ? 'it' : 'them'} or choose another name`);
  }

  let db: Database.Database;
  try {
    db = new Database(source, { readonly: true, fileMustExist: true });
    db.pragma('busy_timeout = 5000');
  } catch (err) {
    throw new CliError(`cannot open the database at ${source}: ${(err as Error).message}`);
  }

  const started = performance.now();
  // Beside the target, so the final rename stays on one file system; created 0600 up front.
  const partial = `${target}.partial-${process.pid}`;
  const removePartial = () => {
    for (const f of [partial, `${partial}-journal`, `${partial}-wal`, `${partial}-shm`]) {
      try {
        rmSync(f, { force: true });
      } catch {
        // Cleanup only: what is reported is the backup's own error, or the signal.
      }
    }
  };
  // Ctrl-C or a supervisor's SIGTERM (a cron job's `timeout`) midway left the partial copy, as large
  // as the database, under a name no later backup reuses: each one interrupted filled the folder more.
  const offSignals = onInterrupt(() => {
    progress.end();
    removePartial();
  });
  let pages: number;
  let summary: { version: number; events: number };
  try {
    closeSync(openSync(partial, 'wx', 0o600));
    // Every page is copied under ONE read snapshot, this connection's open read transaction
    // (the backup steps use it rather than taking their own): the receiver's commits meanwhile
    // are not in the copy, and do not restart it. Without it, each step took a new snapshot, and
    // steps restart whenever the receiver commits in between, which a busy receiver does every
    // few milliseconds. In steps (about 1% of the pages, 4096 at most: ~50 ms) only to report
    // progress between them: as fast as one step (400 MB: 1.3 s either way, within noise).
    db.exec('BEGIN');
    db.prepare('SELECT 1 FROM sqlite_schema LIMIT 1').get();
    const result = await db.backup(partial, {
      progress: ({ totalPages, remainingPages }) => {
        progress.report(() => `backup: ${ofTotal(totalPages - remainingPages, totalPages, 'pages')}`);
        return Math.min(4096, Math.max(100, Math.ceil(totalPages / 100)));
      },
    });
    db.exec('COMMIT');
    pages = result.totalPages;
    progress.report(() => `backup: ${ofTotal(pages, pages, 'pages')}; checking the copy`, { phase: true });
    const copy = new Database(partial, { fileMustExist: true });
    try {
      copy.pragma('journal_mode = DELETE');
      const check = copy.pragma('quick_check', { simple: true });
      if (check !== 'ok') throw new Error(`the copy failed its check (quick_check: ${String(check)})`);
      const hasTable = (name: string) => copy.prepare("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?").get(name) !== undefined;
      const version = hasTable('schema_migrations') ? ((copy.prepare('SELECT MAX(version) FROM schema_migrations').pluck().get() as number | null) ?? 0) : 0;
      const events = hasTable('events') ? (copy.prepare('SELECT COUNT(*) FROM events').pluck().get() as number) : 0;
      summary = { version, events };
    } finally {
      copy.close();
    }
    progress.report(() => 'backup: syncing the copy to disk', { phase: true });
    const fd = openSync(partial, 'r+');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(partial, target);
    await madeDurable();
  } catch (err) {
    removePartial();
    throw new CliError(`backup of ${source} failed: ${(err as Error).message}${noRoomFor(err, target, source)}`);
  } finally {
    offSignals();
    progress.end();
    db.close();
  }

  const bytes = statSync(target).size;
  const seconds = Math.round(performance.now() - started) / 1000;
  if (o.json) {
    printJson(io, { database: source, backup: target, bytes, pages, schema_version: summary.version, events: summary.events, seconds });
  } else {
    io.out(`${source} backed up to ${target}: ${bytes} bytes, schema version ${summary.version}, ${summary.events} events, in ${seconds} s`);
  }
  return 0;
}

/**
 * For a copy that failed for want of space: whose disk it was. SQLite says "database or disk is
 * full", which read as the receiver's own database; the backup only reads that one and writes the
 * copy in the destination's folder.
 */
function noRoomFor(err: unknown, target: string, source: string): string {
  const code = (err as { code?: unknown }).code;
  if (code !== 'SQLITE_FULL' && code !== 'ENOSPC') return '';
  let size = '';
  try {
    size = ` (the database is ${Math.ceil(statSync(source).size / 1e6)} MB, and the copy about as large)`;
  } catch {
    // the size is only a hint
  }
  return `: no room for the copy in ${dirname(target)}${size}; the database itself was only read, and no partial copy was left`;
}
