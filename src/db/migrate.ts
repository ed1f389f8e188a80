import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type BetterSqlite3 from 'better-sqlite3';

/** The folder of numbered SQL files, found from this module in src/ and in dist/ alike. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export class NewerDatabaseError extends Error {
  constructor(readonly dbVersion: number, readonly knownVersion: number) {
    super(
      `the database is at schema version ${dbVersion}, but this build knows migrations up to ${knownVersion}: ` +
        'it was written by a newer version of the receiver. Run that version, or restore a backup taken before the upgrade.',
    );
    this.name = 'NewerDatabaseError';
  }
}

export function readMigrations(dir: string = MIGRATIONS_DIR): Migration[] {
  return readdirSync(dir)
    .map((file) => /^(\d+)_([\w-]+)\.sql$/.exec(file))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => ({ version: Number(m[1]), name: m[2]!, sql: readFileSync(`${dir}/${m[0]}`, 'utf8') }))
    .sort((a, b) => a.version - b.version);
}

function appliedVersion(sqlite: BetterSqlite3.Database): number {
  const row = sqlite.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null };
  return row.v ?? 0;
}

/**
 * Applies every migration not yet recorded, each in its own IMMEDIATE
 * transaction (so two processes starting at once serialize, and each re-checks
 * what is applied after taking the lock). Returns the versions applied.
 */
export function migrate(sqlite: BetterSqlite3.Database, migrations: Migration[] = readMigrations()): number[] {
  sqlite.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
  );
  const known = migrations.at(-1)?.version ?? 0;
  const current = appliedVersion(sqlite);
  if (current > known) throw new NewerDatabaseError(current, known);
  sqlite.transaction(() => repairMigration7(sqlite)).immediate();
  const applied: number[] = [];
  for (const m of migrations) {
    const run = sqlite.transaction(() => {
      const done = sqlite.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(m.version);
      if (done) return false;
      try {
        sqlite.exec(m.sql);
      } catch (err) {
        throw new Error(`migration ${String(m.version).padStart(3, '0')}_${m.name} failed (nothing of it was applied): ${(err as Error).message}`, { cause: err });
      }
      sqlite
        .prepare('INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)')
        .run(m.version, m.name, new Date().toISOString());
      return true;
    });
    if (run.immediate()) applied.push(m.version);
  }
  return applied;
}

/**
 * Migration 007 gained its second column (`event_processing.result_digest`) in a later commit
 * (3bf6dff) than the one that added it (0a7ff40), and a migration recorded as applied is never
 * run again: a database that applied the first form lacked the column, and migration 008 (an
 * index on it) then failed at every start. Such a database gets the column here. Released
 * migrations are not edited any more (test/db/migrations.test.ts pins their text).
 */
function repairMigration7(sqlite: BetterSqlite3.Database): void {
  if (!sqlite.prepare('SELECT 1 FROM schema_migrations WHERE version = 7').get()) return;
  const columns = sqlite.prepare("SELECT name FROM pragma_table_info('event_processing')").pluck().all() as string[];
  if (!columns.includes('result_digest')) sqlite.exec('ALTER TABLE event_processing ADD COLUMN result_digest TEXT');
}

/** True when every known migration is recorded in the database. */
export function isMigrated(sqlite: BetterSqlite3.Database, migrations: Migration[] = readMigrations()): boolean {
  const known = migrations.at(-1)?.version ?? 0;
  try {
    return appliedVersion(sqlite) === known;
  } catch {
    return false;
  }
}
