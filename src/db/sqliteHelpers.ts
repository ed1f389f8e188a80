import type BetterSqlite3 from 'better-sqlite3';
import { sql, type RawBuilder } from 'kysely';

const codeOf = (err: unknown): string => {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : '';
};

/** SQLITE_BUSY*: another connection holds the lock, so waiting until it lets go can succeed. */
export function isLockHeldElsewhere(err: unknown): boolean {
  return codeOf(err).startsWith('SQLITE_BUSY');
}

/** better-sqlite3 error codes meaning a lock was not obtained: SQLITE_BUSY*, or SQLITE_LOCKED* (a conflict on this connection). */
export function isSqliteBusy(err: unknown): boolean {
  return isLockHeldElsewhere(err) || codeOf(err).startsWith('SQLITE_LOCKED');
}

/**
 * The primary result code of an SQLite error code or message (SQLITE_IOERR for SQLITE_IOERR_WRITE):
 * a small set, for metric labels. Null when the text starts with none.
 */
export function primarySqliteCode(text: string | null | undefined): string | null {
  return /^SQLITE_[A-Z]+/.exec(text ?? '')?.[0] ?? null;
}

/**
 * The pause between two short write transactions of the sink housekeeping at the workers' start
 * (a CLI's bulk change pauses as cli/batchPause.ts says): a running receiver's ingest commits (its
 * own connection, retried every 1-4 ms, or another process's) take the write lock meanwhile. A
 * timer, not a microtask: the event loop turns, so this process's ingest runs.
 */
export const betweenBatches = (): Promise<void> => new Promise((r) => setTimeout(r, 5));

/** Ids per `IN (...)` list: well under SQLite's bound-parameter limit. */
const IN_CHUNK = 500;

/** The list in consecutive slices of at most `size` items (for `IN (...)` lists). */
export function inChunks<T>(list: readonly T[], size = IN_CHUNK): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < list.length; i += size) chunks.push(list.slice(i, i + size));
  return chunks;
}

/**
 * Proves the connection may write the file: takes the write lock and runs a write that changes
 * nothing, then rolls back. BEGIN IMMEDIATE alone succeeds on a file SQLite opened read-only (in
 * WAL mode the lock lives in the -shm); the write is what SQLite refuses (SQLITE_READONLY).
 * Throws what SQLite threw (SQLITE_BUSY when another connection holds the lock).
 */
export function probeWrite(sqlite: BetterSqlite3.Database): void {
  sqlite.exec('BEGIN IMMEDIATE');
  try {
    sqlite.exec('DELETE FROM schema_migrations WHERE 0');
  } finally {
    sqlite.exec('ROLLBACK');
  }
}

/**
 * `build` run once per connection: its prepared statements (or whatever it makes of the
 * connection) are kept as long as the connection is, and given back on every later call.
 */
export function oncePerConnection<T>(build: (sqlite: BetterSqlite3.Database) => T): (sqlite: BetterSqlite3.Database) => T {
  const built = new WeakMap<BetterSqlite3.Database, T>();
  return (sqlite) => {
    let value = built.get(sqlite);
    if (value === undefined) {
      value = build(sqlite);
      built.set(sqlite, value);
    }
    return value;
  };
}

/**
 * A row made or, when it is there already, updated, in two statements, saying which: true when
 * `insert` made it (it inserts nothing on conflict), false when `update` changed the row that
 * was there. Another writer can delete the row between the two (a resume, an enable): the update
 * then changes nothing, and the row is made again, by this call, unless `stands` (asked then)
 * says that writer's row must stand as it is: false, with nothing written. Bounded: each further
 * turn needs another deletion between this call's two statements; `gone` names the failure after 5.
 */
export async function insertElseUpdate(
  insert: () => Promise<{ numInsertedOrUpdatedRows?: bigint }>,
  update: () => Promise<{ numUpdatedRows: bigint }>,
  gone: string,
  stands: () => Promise<boolean> = async () => false,
): Promise<boolean> {
  for (let turn = 0; turn < 5; turn++) {
    if (Number((await insert()).numInsertedOrUpdatedRows ?? 0) > 0) return true;
    if ((await update()).numUpdatedRows > 0n) return false;
    if (await stands()) return false;
  }
  throw new Error(gone);
}

/**
 * `column`, a stored ISO 8601 UTC time, moved back by `stepMs` in the same stored form: the times
 * set on a wall clock that has since stepped back (Worker's clock step handling).
 */
export function isoMovedBack(column: string, stepMs: number): RawBuilder<string> {
  return sql<string>`strftime('%Y-%m-%dT%H:%M:%fZ', ${sql.ref(column)}, ${`-${(stepMs / 1000).toFixed(3)} seconds`})`;
}
