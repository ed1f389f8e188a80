import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { migrate } from './migrate.js';
import type { Database } from './schema.js';

export interface OpenDatabase {
  /** For everything but the ingest hot path: queue, handlers, readers. */
  readonly db: Kysely<Database>;
  /** The connection kysely uses (for pragmas and health checks). */
  readonly sqlite: BetterSqlite3.Database;
  /**
   * A second connection only the ingest group-commit writes on. Its write
   * transactions are synchronous (one tick), so they never interleave with
   * kysely's async transactions on the other connection; lock contention
   * between the two shows up as SQLITE_BUSY, which both sides retry.
   */
  readonly ingestSqlite: BetterSqlite3.Database;
  close(): Promise<void>;
}

export class DurabilityError extends Error {}

/**
 * WAL with synchronous=FULL: a commit is on disk (fsync of the WAL) before the
 * transaction returns. better-sqlite3's build defaults WAL to NORMAL, which can
 * lose acknowledged commits on power loss, so we set FULL and read it back.
 */
function configure(sqlite: BetterSqlite3.Database, busyTimeoutMs: number): void {
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma('synchronous = FULL');
  sqlite.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
  sqlite.pragma('foreign_keys = ON');
  const mode = sqlite.pragma('journal_mode', { simple: true });
  const sync = sqlite.pragma('synchronous', { simple: true });
  if (mode !== 'wal') throw new DurabilityError(`SQLite journal_mode is ${String(mode)}, expected wal`);
  if (sync !== 2) throw new DurabilityError(`SQLite synchronous is ${String(sync)}, expected 2 (FULL)`);
}

export interface OpenOptions {
  /** Apply pending migrations (the server does; read-only tools may not). */
  migrate?: boolean;
  /**
   * Busy timeout of the kysely connection. Kept short: better-sqlite3 waits
   * synchronously, blocking the event loop, so callers retry instead.
   */
  busyTimeoutMs?: number;
}

export function openDatabase(path: string, opts: OpenOptions = {}): OpenDatabase {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new BetterSqlite3(path);
  let ingestSqlite: BetterSqlite3.Database | undefined;
  try {
    configure(sqlite, opts.busyTimeoutMs ?? 50);
    if (opts.migrate !== false) migrate(sqlite);
    ingestSqlite = new BetterSqlite3(path);
    // The ingest committer never waits inside SQLite: it retries on its own timer.
    configure(ingestSqlite, 0);
  } catch (err) {
    ingestSqlite?.close();
    sqlite.close();
    throw err;
  }
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: sqlite }) });
  const ingest = ingestSqlite;
  return {
    db,
    sqlite,
    ingestSqlite: ingest,
    async close() {
      ingest.close();
      await db.destroy(); // closes `sqlite`
    },
  };
}
