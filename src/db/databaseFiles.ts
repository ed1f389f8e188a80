import { accessSync, chmodSync, constants, statSync } from 'node:fs';
import { dirname } from 'node:path';

/** The receiver's own files beside the database (see ingestWaitSignal.ts and workersLock.ts). */
export const INGEST_WAIT_SUFFIX = '-ingest-wait';
export const WORKERS_LOCK_SUFFIX = '-workers-lock';

/** SQLite's own files beside the database: made by SQLite when it opens it, with its mode. */
export const SQLITE_SIDECARS = ['-wal', '-shm', '-journal'] as const;

/**
 * Every file kept beside the database, as suffixes of its path: SQLite's (-wal, -shm, and a
 * rollback -journal, which the workers lock, an SQLite file of its own, may have too) and the
 * receiver's. A file sink must never write to one; RUN_AS gives them to the user.
 */
export const DATABASE_SIDECARS = [...SQLITE_SIDECARS, INGEST_WAIT_SUFFIX, WORKERS_LOCK_SUFFIX, `${WORKERS_LOCK_SUFFIX}-journal`] as const;

/**
 * The mode for a new file beside the database: the database's own (as SQLite gives its -wal and
 * -shm), but always readable and writable by its owner. A database made read-only by mistake
 * (chmod 444) must not leave its side files read-only after it is fixed.
 */
export function sidecarMode(databaseMode: number): number {
  return (databaseMode & 0o777) | 0o600;
}

/** An existing side file of ours that a start under a read-only database left without owner write gets it back. */
export function repairSidecarMode(path: string): void {
  try {
    const st = statSync(path);
    if (typeof process.getuid === 'function' && st.uid === process.getuid() && (st.mode & 0o600) !== 0o600) chmodSync(path, sidecarMode(st.mode));
  } catch {
    // Not there yet, or not ours: opening it says what is wrong.
  }
}

/** Why this process may not create files beside the database: its folder, the errno, this process's uid (as ` (uid N)`). */
export interface UnwritableFolder {
  folder: string;
  code: string;
  uid: string;
}

/**
 * For an open of the database that failed: when this process may not create files in the
 * database's folder, that folder and why. SQLite's own errors name nothing ("unable to open
 * database file" for the workers lock, "attempt to write a readonly database" for a writable file
 * whose -wal it cannot create). Null when the folder is writable (or `:memory:`).
 */
export function unwritableFolder(path: string, cause: unknown): UnwritableFolder | null {
  if (path === ':memory:' || path === '') return null;
  // Only a failure that a folder it may not write can cause: a corrupt file, a newer schema or a
  // busy lock in such a folder keeps its own message.
  const causeCode = String((cause as { code?: unknown } | null)?.code ?? '');
  if (!/^(SQLITE_CANTOPEN|SQLITE_READONLY|SQLITE_PERM|EACCES$|EPERM$|EROFS$)/.test(causeCode)) return null;
  const folder = dirname(path);
  try {
    accessSync(folder, constants.W_OK);
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    // A missing folder is said where it is made (openDatabase).
    if (code !== 'EACCES' && code !== 'EPERM' && code !== 'EROFS') return null;
    return { folder, code, uid: typeof process.getuid === 'function' ? ` (uid ${process.getuid()})` : '' };
  }
}

/** unwritableFolder as the receiver's start-up error, or null. */
export function unwritableFolderError(path: string, cause: unknown): Error | null {
  const f = unwritableFolder(path, cause);
  if (!f) return null;
  return new Error(
    `cannot open the database at ${path} (DATABASE_PATH): this process${f.uid} may not create files in its folder ${f.folder} (${f.code}); ` +
      'SQLite makes the database\'s -wal and -shm there, and the receiver its -workers-lock and -ingest-wait: make the folder writable by this user',
    { cause },
  );
}
