import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { CACHE_KIB } from './connectionSettings.js';
import { NO_INGEST_WAIT } from './ingestWaitSignal.js';
import { OffLoopReads } from './OffLoopReads.js';
import type { OpenDatabase } from './openDatabase.js';
import { withStatementCache } from './statementCache.js';
import type { Database } from './schema.js';

/**
 * One read-only connection, for the commands that only look (`status`, the `list` and `show`
 * commands, dry runs): nothing is created, migrated or converted (a backup in rollback-journal
 * mode stays so). SQLite may still create the -wal and -shm files of a WAL database it reads, as
 * any reader does, so such a database in a folder this process cannot write is not readable
 * either. `ingestSqlite` is the same connection; writes fail with SQLITE_READONLY.
 */
export function openDatabaseReadOnly(path: string, busyTimeoutMs = 5000): OpenDatabase {
  const sqlite = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
  try {
    sqlite.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
    sqlite.pragma(`cache_size = -${CACHE_KIB}`);
  } catch (err) {
    sqlite.close();
    throw err;
  }
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  return {
    db,
    sqlite,
    ingestSqlite: sqlite,
    ingestWait: NO_INGEST_WAIT,
    offLoop: new OffLoopReads(0),
    migrated: [],
    opened: null,
    async close() {
      await db.destroy();
      // kysely closes the connection only if it ran a query on it; a command that used only `sqlite` left it open.
      sqlite.close();
    },
  };
}
