/** better-sqlite3 error codes meaning another connection holds the lock. */
export function isSqliteBusy(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return typeof code === 'string' && (code.startsWith('SQLITE_BUSY') || code.startsWith('SQLITE_LOCKED'));
}

/** Ids per `IN (...)` list: well under SQLite's bound-parameter limit. */
const IN_CHUNK = 500;

/** The list in consecutive slices of at most `size` items (for `IN (...)` lists). */
export function inChunks<T>(list: readonly T[], size = IN_CHUNK): T[][] {
  const chunks: T[][] = [];
  for (let i = 0; i < list.length; i += size) chunks.push(list.slice(i, i + size));
  return chunks;
}
