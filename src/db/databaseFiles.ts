/** The receiver's own files beside the database (see ingestWaitSignal.ts and workersLock.ts). */
export const INGEST_WAIT_SUFFIX = '-ingest-wait';
export const WORKERS_LOCK_SUFFIX = '-workers-lock';

/**
 * Every file kept beside the database, as suffixes of its path: SQLite's (-wal, -shm, and a
 * rollback -journal, which the workers lock, an SQLite file of its own, may have too) and the
 * receiver's. A file sink must never write to one; RUN_AS gives them to the user.
 */
export const DATABASE_SIDECARS = ['-wal', '-shm', '-journal', INGEST_WAIT_SUFFIX, WORKERS_LOCK_SUFFIX, `${WORKERS_LOCK_SUFFIX}-journal`] as const;
