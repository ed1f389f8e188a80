import BetterSqlite3 from 'better-sqlite3';

/**
 * Whether another connection has the database at `path` open: a `serve` (also an ingest-only one,
 * WORKER_CONCURRENCY=0, which holds no workers lock), a `work`, a reader (sqlite3, Litestream, a
 * CLI command). In WAL mode every connection keeps a shared lock on the database file from its
 * first read until it closes; a connection in `locking_mode = EXCLUSIVE` must take the file's
 * exclusive lock on its first read, which SQLite answers SQLITE_BUSY at once (busy_timeout 0)
 * while one is held. Released again before it returns; on a free file its close writes the WAL
 * back, as the last connection's close does. False when the file cannot be opened: opening it
 * says why.
 */
export function openElsewhere(path: string): boolean {
  if (path === ':memory:' || path === '') return false;
  let probe: BetterSqlite3.Database;
  try {
    probe = new BetterSqlite3(path, { fileMustExist: true });
  } catch {
    return false;
  }
  try {
    probe.pragma('busy_timeout = 0');
    probe.pragma('locking_mode = EXCLUSIVE');
    probe.prepare('SELECT COUNT(*) FROM sqlite_master').get();
    return false;
  } catch (err) {
    if ((err as { code?: string }).code === 'SQLITE_BUSY') return true;
    return false;
  } finally {
    probe.close();
  }
}
