import type BetterSqlite3 from 'better-sqlite3';
import type { SqliteDatabase } from 'kysely';
import { lruGet } from '../util/collections.js';

/**
 * What kysely's SqliteDialect is given instead of the bare connection: the same
 * connection, with `prepare` answered from an LRU of prepared statements keyed
 * by SQL text. kysely prepares every query it runs (BEGIN and COMMIT included),
 * and in the profile of the receiver at 2,500 deliveries/s with workers,
 * SQLite's prepare and finalize were about 8% of all samples: parsing and
 * planning the same few dozen statements again on every job.
 *
 * Reuse is safe here: better-sqlite3 runs `all`/`run` to completion
 * synchronously and resets the statement, and kysely's connection mutex means
 * only one query (or one streamed `iterate`) uses the connection at a time.
 * Statements differing only in the length of an `IN (...)` list are distinct
 * entries; the LRU bound keeps those from growing without limit.
 */
export function withStatementCache(sqlite: BetterSqlite3.Database, max = 256): SqliteDatabase {
  const cache = new Map<string, BetterSqlite3.Statement>();
  return {
    prepare(sql: string) {
      return lruGet(cache, sql, max, () => sqlite.prepare(sql));
    },
    close() {
      cache.clear();
      sqlite.close();
    },
  };
}
