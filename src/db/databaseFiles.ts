import { chmodSync, statSync } from 'node:fs';

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
