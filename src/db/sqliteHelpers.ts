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

/** Ids per `IN (...)` list: well under SQLite's bound-parameter limit. */
const IN_CHUNK = 500;

/** The list in consecutive slices of at most `size` items (for `IN (...)` lists). */
export function inChunks<T>(list: readonly T[], size = IN_CHUNK): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < list.length; i += size) chunks.push(list.slice(i, i + size));
  return chunks;
}
