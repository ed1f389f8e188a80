import { lstatSync, rmdirSync, statSync, unlinkSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { INGEST_WAIT_SUFFIX, WORKERS_LOCK_SUFFIX } from './databaseFiles.js';
import { acquireWorkersLock, WorkersRunningError, type WorkersLock } from './workersLock.js';
import type { FileIdentity } from './openDatabase.js';

/**
 * A DATABASE_PATH that named nothing before this start (a new database, or a mistyped path), and
 * the folders above it that were missing: what a start that then fails removes again
 * (removeNewDatabase), so that the next `status` on a mistyped path does not report an empty
 * receiver. Null for a path that exists (in any form), `:memory:`, or one that cannot be looked at.
 */
export interface NewDatabasePath {
  readonly path: string;
  /** The receiver's own files beside it that did not exist either. */
  readonly sidecars: readonly string[];
  /** The folders that did not exist, innermost first. */
  readonly folders: readonly string[];
}

/**
 * The receiver's files beside the database, removed with it when this start made them. Not
 * SQLite's -wal and -shm: the last connection to close removes them; one still there after the
 * check's own close belongs to another process that opened the file meanwhile.
 */
const OWN_SIDECARS = ['-journal', INGEST_WAIT_SUFFIX, WORKERS_LOCK_SUFFIX, `${WORKERS_LOCK_SUFFIX}-journal`] as const;

/** The tables that hold what was received: a file with a row in one is never removed. */
const RECEIVED_TABLES = ['events', 'event_conflicts', 'quarantine'] as const;

function missing(path: string): boolean {
  try {
    lstatSync(path);
    return false;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT';
  }
}

/** Before the database is opened: whether DATABASE_PATH names nothing yet. */
export function noteNewDatabase(databasePath: string): NewDatabasePath | null {
  if (databasePath === ':memory:' || databasePath === '') return null;
  const path = resolve(databasePath);
  if (!missing(path)) return null;
  const folders: string[] = [];
  for (let folder = dirname(path); folder !== dirname(folder) && missing(folder); folder = dirname(folder)) folders.push(folder);
  return { path, sidecars: OWN_SIDECARS.map((s) => `${path}${s}`).filter(missing), folders };
}

/** `removed`: the file and what was made with it; `none`: no file was made (only folders, removed); else why it is kept. */
export type NewDatabaseOutcome = 'removed' | 'none' | { kept: string };

/**
 * After a start that failed, with every connection of this process to the database closed: the
 * file this start created is removed, with the receiver's files beside it and the folders made
 * for it (each only if still empty). Kept, and why, when it may be anyone else's: it is no longer
 * the file this start opened (`opened`), another connection has it open (a `serve` and a `work`
 * started together on it, a reader: checked under an exclusive lock), or it holds a delivery
 * (a failure after the port was bound, once one was acknowledged).
 */
export function removeNewDatabase(created: NewDatabasePath, opened: FileIdentity | null): NewDatabaseOutcome {
  const { path } = created;
  let st;
  try {
    st = statSync(path, { bigint: true });
  } catch {
    // Never made (the start failed before): only the folders made for it are left.
    removeFolders(created.folders);
    return 'none';
  }
  if (!st.isFile()) return { kept: 'it is not a regular file' };
  if (opened && (st.dev !== opened.dev || st.ino !== opened.ino)) return { kept: 'it is no longer the file this start created' };
  // Another start that found the file takes the workers lock before it opens the database: its
  // lock file, and the file it is about to open, are its own (this start's stop released its lock).
  const workersLock = created.sidecars.includes(`${path}${WORKERS_LOCK_SUFFIX}`) ? holdWorkersLock(path) : null;
  if (workersLock === 'busy') return { kept: 'another process holds its workers lock' };
  try {
    const refusal = removeUnderLock(path, { dev: st.dev, ino: st.ino });
    if (refusal !== null) return { kept: refusal };
    for (const file of created.sidecars) {
      try {
        unlinkSync(file);
      } catch {
        // Not made by this start after all, or gone.
      }
    }
  } finally {
    workersLock?.release();
  }
  removeFolders(created.folders);
  return 'removed';
}

/** The database's workers lock, held (its removal then comes under the lock); 'busy' while another process holds it; null when it cannot be taken. */
function holdWorkersLock(databasePath: string): WorkersLock | 'busy' | null {
  try {
    return acquireWorkersLock(databasePath);
  } catch (err) {
    return err instanceof WorkersRunningError ? 'busy' : null;
  }
}

/**
 * Removes the file, under an exclusive lock taken while no other connection has it open, once it
 * is found to hold nothing received; else why it is kept. Removed while the lock is held: another
 * start that opened the file meanwhile waits for the lock, then finds the path changed and opens
 * again (openDatabase), where a removal after the lock's release could come after its check.
 */
function removeUnderLock(path: string, identity: FileIdentity): string | null {
  let check: BetterSqlite3.Database;
  try {
    check = new BetterSqlite3(path, { fileMustExist: true });
  } catch (err) {
    return `it could not be opened to check it: ${(err as Error).message}`;
  }
  try {
    try {
      check.pragma('busy_timeout = 0');
      // Exclusive from the first read: refused while any other connection (in WAL mode each holds
      // a shared lock on the file as long as it is open) has the file open.
      check.pragma('locking_mode = EXCLUSIVE');
      check.exec('BEGIN EXCLUSIVE');
      try {
        // The file locked is the one looked at above (none moved to the path in between).
        const locked = statSync(path, { bigint: true, throwIfNoEntry: false });
        if (!locked || locked.dev !== identity.dev || locked.ino !== identity.ino) return 'it is no longer the file this start created';
        const tables = new Set((check.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").pluck().all() as string[]));
        for (const table of RECEIVED_TABLES) {
          if (tables.has(table) && check.prepare(`SELECT 1 FROM ${table} LIMIT 1`).get() !== undefined) return `it holds what was received (its ${table} table is not empty)`;
        }
      } finally {
        check.exec('COMMIT');
      }
      // Still held (locking_mode EXCLUSIVE). Out of WAL mode first: the close of a WAL connection
      // deletes <path>-wal by its name, which, once the file is removed, may be another start's.
      check.pragma('journal_mode = DELETE');
    } catch (err) {
      const code = (err as { code?: string }).code ?? '';
      return code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED') ? 'another process has it open' : `it could not be checked: ${(err as Error).message}`;
    }
    unlinkSync(path);
    return null;
  } finally {
    check.close();
  }
}

function removeFolders(folders: readonly string[]): void {
  for (const folder of folders) {
    try {
      rmdirSync(folder);
    } catch {
      // Not empty (something else is there now), or gone: it and the folders above it stay.
      return;
    }
  }
}
