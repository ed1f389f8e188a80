import { existsSync, readFileSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';

/**
 * Reads the receiver's database the way the README tells downstream programs
 * to: read-only, short statements, while the receiver writes.
 */
export function withDb<T>(path: string, fn: (db: BetterSqlite3.Database) => T): T {
  const db = new BetterSqlite3(path, { readonly: true, fileMustExist: true });
  try {
    db.pragma('busy_timeout = 2000');
    return fn(db);
  } finally {
    db.close();
  }
}

export const count = (db: BetterSqlite3.Database, sql: string, ...params: unknown[]) => db.prepare(sql).pluck().get(...params) as number;

/** Ids of a file sink's NDJSON lines; throws on a line that is not whole JSON (a torn write). */
export function sinkFileIds(path: string): string[] {
  if (!existsSync(path)) return [];
  const text = readFileSync(path, 'utf8');
  if (text.length === 0) return [];
  if (!text.endsWith('\n')) throw new Error(`${path}: last line has no newline (torn write)`);
  return text
    .slice(0, -1)
    .split('\n')
    .map((line, i) => {
      try {
        return (JSON.parse(line) as { id: string }).id;
      } catch {
        throw new Error(`${path}: line ${i + 1} is not JSON: ${line.slice(0, 80)}`);
      }
    });
}

/**
 * Work that would be stuck: jobs running with an expired lease, or pending
 * and due in the past (a worker that idles would have taken them), or dead;
 * and stored events that processing never took (past its cursor).
 */
export function stuckJobs(db: BetterSqlite3.Database, nowIso: string) {
  return {
    runningExpired: count(db, "SELECT COUNT(*) FROM jobs WHERE state = 'running' AND lease_expires_at <= ?", nowIso),
    running: count(db, "SELECT COUNT(*) FROM jobs WHERE state = 'running'"),
    pendingDue: count(db, "SELECT COUNT(*) FROM jobs WHERE state = 'pending' AND run_at <= ?", nowIso),
    pending: count(db, "SELECT COUNT(*) FROM jobs WHERE state = 'pending'"),
    dead: count(db, "SELECT COUNT(*) FROM jobs WHERE state = 'dead'"),
    eventsNotTaken: count(db, 'SELECT COUNT(*) FROM events WHERE rowid > (SELECT last_event_rowid FROM processing_cursor)'),
  };
}
