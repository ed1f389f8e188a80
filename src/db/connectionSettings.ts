import type BetterSqlite3 from 'better-sqlite3';

export class DurabilityError extends Error {}

const SYNC = { FULL: 2, NORMAL: 1 } as const;

/**
 * Page cache per connection, in KiB. better-sqlite3 builds SQLite with 16 MB;
 * pages missing from a smaller cache come from the OS page cache with one
 * pread. Measured under wrk (bench/README.md): 16 MB -> 4 MB took peak RSS
 * from 134 to 119-123 MB with workers in process (112 -> 98 MB ingest only);
 * 4 MB -> 2 MB from 122-131 to 119-128 MB ("Eighth round"), each with
 * throughput within run-to-run noise; the cost of the second step is about
 * 1.5 ms of acknowledgement p99 at 2,500/s with workers in process.
 */
export const CACHE_KIB = 2048;

/**
 * Page size of a new database file (an existing file keeps its own). WAL mode
 * writes every page a commit touched whole, and most of what we write lands
 * at a random key: the events primary key, and the applications, results,
 * event_processing and application_events tables. Each such insert rewrites
 * one page. Measured with 2 KB events (bench/README.md, "Sixth round"): WAL
 * bytes per stored event 14.3 KB at 4 KB pages against 8.6 KB at 2 KB pages
 * (batches of 30), 33.7 against 19.6 KB (batches of 2); acknowledgement p99
 * at 2,500/s with workers in process 18.0/18.5 against 14.4/15.1 ms. 1 KB
 * pages wrote fewer bytes still but spent more CPU per event.
 */
export const NEW_DATABASE_PAGE_SIZE = 2048;

/**
 * WAL mode, with `synchronous` set per connection and read back.
 *
 * The ingest connection uses FULL: its commit is on disk (fsync of the WAL)
 * before the transaction returns, and only then is a delivery answered 2xx.
 * better-sqlite3's build defaults WAL to NORMAL, which can lose acknowledged
 * commits on power loss, so we set FULL and check it.
 *
 * The processing connection (queue, handlers, sinks) uses NORMAL: its commits
 * are made durable by the next WAL sync (the next ingest commit or
 * checkpoint). A power cut can only lose a suffix of them, and everything it
 * writes is recomputed from the durable events: a lost "done" re-runs an
 * idempotent job, a lost "delivered" re-sends a message with the same
 * webhook-id (at-least-once). Measured: each job costs three commits (claim,
 * work, complete), and with FULL their fsyncs blocked the event loop the
 * ingest path needs (bench/README.md).
 */
export function configure(sqlite: BetterSqlite3.Database, busyTimeoutMs: number, sync: keyof typeof SYNC, autoCheckpoint: boolean): void {
  // A no-op unless the file is still empty: it must come before the first write (journal_mode).
  sqlite.pragma(`page_size = ${NEW_DATABASE_PAGE_SIZE}`);
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma(`synchronous = ${sync}`);
  // macOS: fsync(2) leaves what it wrote in the drive's own cache, where a power loss takes it;
  // only fcntl(F_FULLFSYNC) empties that cache (Node's own fsync uses it: file sinks, backups).
  // SQLite's bundled build calls plain fsync unless told, so an ingest commit answered 2xx and
  // the pages a checkpoint copied were not on disk yet. On other systems SQLite has no
  // F_FULLFSYNC and syncs as before: a no-op there.
  sqlite.pragma('fullfsync = ON');
  sqlite.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
  sqlite.pragma('foreign_keys = ON');
  if (!autoCheckpoint) sqlite.pragma('wal_autocheckpoint = 0');
  sqlite.pragma(`cache_size = -${CACHE_KIB}`);
  const mode = sqlite.pragma('journal_mode', { simple: true });
  const actual = sqlite.pragma('synchronous', { simple: true });
  if (mode !== 'wal') throw new DurabilityError(`SQLite journal_mode is ${String(mode)}, expected wal`);
  if (actual !== SYNC[sync]) throw new DurabilityError(`SQLite synchronous is ${String(actual)}, expected ${SYNC[sync]} (${sync})`);
}
