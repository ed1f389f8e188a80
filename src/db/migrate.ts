import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type BetterSqlite3 from 'better-sqlite3';

/** The folder of numbered SQL files, found from this module in src/ and in dist/ alike. */
export const MIGRATIONS_DIR = fileURLToPath(new URL('../../migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  sql: string;
  /**
   * The oldest build, by the last migration it knows, that still runs correctly on a database
   * with this migration applied: declared in the file as `-- compatible-from: N` (an index, a
   * column older builds neither read nor must fill). Without it, the migration's own version:
   * only builds that know it.
   */
  compatibleFrom: number;
}

export class NewerDatabaseError extends Error {
  constructor(readonly dbVersion: number, readonly knownVersion: number, readonly blocking: readonly number[] = []) {
    super(
      `the database is at schema version ${dbVersion}, but this build knows migrations up to ${knownVersion}: ` +
        `it was written by a newer version of the receiver${blocking.length > 0 ? ` (migration${blocking.length === 1 ? '' : 's'} ${blocking.join(', ')} changed what this build relies on)` : ''}. ` +
        'Run that version, or restore a backup taken before the upgrade (it loses what arrived since).',
    );
    this.name = 'NewerDatabaseError';
  }
}

/**
 * A SQLite database with tables but no schema_migrations of the receiver's, which every database
 * the receiver made has from its first start (created alone, before migration 001's tables):
 * another program's (DATABASE_PATH naming the wrong file). Migrating it would write the receiver's
 * tables into that program's file, and serve on it. A schema_migrations of another tool
 * (golang-migrate's, Rails', Ecto's, dbmate's) is no sign of the receiver's.
 */
export class ForeignDatabaseError extends Error {
  constructor(readonly tables: readonly string[]) {
    const shown = tables.slice(0, 5).join(', ') + (tables.length > 5 ? `, and ${tables.length - 5} more` : '');
    const why = tables.includes('schema_migrations')
      ? `its schema_migrations table is not the receiver's (it lacks the columns ${RECEIVER_SCHEMA_MIGRATIONS.join(', ')}, which every database the receiver made has)`
      : 'no schema_migrations table, which every database the receiver made has';
    super(
      `it is not the receiver's database but another program's: it has tables (${shown}) and ${why}. ` +
        'It was left as it was. Give the path of the receiver\'s database, or of a file that does not exist yet for a new one',
    );
    this.name = 'ForeignDatabaseError';
  }
}

/** The columns schema_migrations has had since the receiver's first version (6cc46f0). */
const RECEIVER_SCHEMA_MIGRATIONS = ['version', 'name', 'applied_at'] as const;

/**
 * The tables and views of a database that has no schema_migrations of the receiver's (empty for
 * one that has it, or an empty file).
 */
function foreignTables(sqlite: BetterSqlite3.Database): string[] {
  const names = sqlite
    .prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\' ORDER BY name")
    .pluck()
    .all() as string[];
  if (!names.includes('schema_migrations')) return names;
  const columns = sqlite.prepare("SELECT name FROM pragma_table_info('schema_migrations')").pluck().all() as string[];
  return RECEIVER_SCHEMA_MIGRATIONS.every((c) => columns.includes(c)) ? [] : names;
}

/**
 * Refuses, by reading only, a file this build must not write: another program's database
 * (ForeignDatabaseError), or one a newer version migrated that this build cannot run with
 * (NewerDatabaseError). Run before anything writes to it, the switch to WAL mode included, so a
 * refused file (a backup in rollback-journal mode among them) is left byte for byte as it was.
 */
export function refuseUnusable(sqlite: BetterSqlite3.Database, migrations: Migration[] = readMigrations()): void {
  const foreign = foreignTables(sqlite);
  if (foreign.length > 0) throw new ForeignDatabaseError(foreign);
  if (!sqlite.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").get()) return;
  const known = migrations.at(-1)?.version ?? 0;
  const current = appliedVersion(sqlite);
  if (current <= known) return;
  const blocking = blockingNewerMigrations(sqlite, known);
  if (blocking.length > 0) throw new NewerDatabaseError(current, known, blocking);
}

const COMPATIBLE_FROM = /^-- compatible-from: (\d+)\s*$/m;

/**
 * The last migration this build ships (pinned to migrations/ by test/db/migrations.test.ts: a new
 * migration raises it). An install missing only its last files would otherwise migrate a database
 * to an older schema than its code reads, and fail later, at a statement.
 */
export const LAST_MIGRATION = 11;

export function readMigrations(dir: string = MIGRATIONS_DIR): Migration[] {
  let files: string[];
  try {
    files = readdirSync(dir);
  } catch (err) {
    throw incompleteInstall(dir, `it cannot be read (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`);
  }
  const migrations = files
    .map((file) => /^(\d+)_([\w-]+)\.sql$/.exec(file))
    .filter((m): m is RegExpExecArray => m !== null)
    .map((m) => {
      const version = Number(m[1]);
      const text = readFileSync(`${dir}/${m[0]}`, 'utf8');
      const declared = COMPATIBLE_FROM.exec(text);
      const compatibleFrom = declared ? Number(declared[1]) : version;
      if (compatibleFrom > version) throw new Error(`migration ${m[0]}: compatible-from ${compatibleFrom} is past its own version`);
      return { version, name: m[2]!, sql: text, compatibleFrom };
    })
    .sort((a, b) => a.version - b.version);
  // A build shipped without them (a .dockerignore or a copy that left them out) would create a
  // database file with no tables and fail at its first statement ("no such table: events").
  if (migrations.length === 0) throw incompleteInstall(dir, 'it has no migration files (NNN_name.sql)');
  const gap = migrations.findIndex((m, i) => m.version !== i + 1);
  if (gap !== -1) throw incompleteInstall(dir, `migration ${gap + 1} is missing (found ${migrations.map((m) => m.version).join(', ')})`);
  const last = migrations.at(-1)!.version;
  if (dir === MIGRATIONS_DIR && last < LAST_MIGRATION) throw incompleteInstall(dir, `its last migration is ${last}, where this build's is ${LAST_MIGRATION}`);
  return migrations;
}

function incompleteInstall(dir: string, problem: string): Error {
  return new Error(`the receiver's migrations folder ${dir} is incomplete: ${problem}. The install or image is broken: reinstall, or rebuild the image with migrations/ in it`);
}

/**
 * A database past this build's last migration (a rollback after an upgrade): which of its newer
 * migrations this build cannot run with. Empty when every one declared this build compatible
 * (`-- compatible-from:`), recorded when it was applied; a database whose schema_migrations has
 * no such column (written before it existed) cannot say, so every newer migration blocks.
 */
export function blockingNewerMigrations(sqlite: BetterSqlite3.Database, known: number): number[] {
  if (!hasCompatibleFrom(sqlite)) return sqlite.prepare('SELECT version FROM schema_migrations WHERE version > ? ORDER BY version').pluck().all(known) as number[];
  return sqlite
    .prepare('SELECT version FROM schema_migrations WHERE version > ? AND (compatible_from IS NULL OR compatible_from > ?) ORDER BY version')
    .pluck()
    .all(known, known) as number[];
}

const hasCompatibleFrom = (sqlite: BetterSqlite3.Database): boolean =>
  (sqlite.prepare("SELECT name FROM pragma_table_info('schema_migrations')").pluck().all() as string[]).includes('compatible_from');

/** schema_migrations' compatible_from column (older builds only read MAX(version): they never mind it). */
function addCompatibleFrom(sqlite: BetterSqlite3.Database): void {
  if (!hasCompatibleFrom(sqlite)) sqlite.exec('ALTER TABLE schema_migrations ADD COLUMN compatible_from INTEGER');
}

function appliedVersion(sqlite: BetterSqlite3.Database): number {
  const row = sqlite.prepare('SELECT MAX(version) AS v FROM schema_migrations').get() as { v: number | null };
  return row.v ?? 0;
}

/**
 * Applies every migration not yet recorded, each in its own IMMEDIATE
 * transaction (so two processes starting at once serialize, and each re-checks
 * what is applied after taking the lock). Returns the versions applied.
 * `onApplying` is told before each one is applied, with its place among those
 * pending at the start (the CLI's progress: an index over a large table takes seconds).
 */
export function migrate(
  sqlite: BetterSqlite3.Database,
  migrations: Migration[] = readMigrations(),
  onApplying?: (m: Migration, nth: number, pending: number) => void,
): number[] {
  refuseUnusable(sqlite, migrations);
  sqlite.exec(
    'CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)',
  );
  const known = migrations.at(-1)?.version ?? 0;
  const current = appliedVersion(sqlite);
  if (current > known) {
    // A rollback: allowed when every newer migration declared this build compatible.
    const blocking = blockingNewerMigrations(sqlite, known);
    if (blocking.length > 0) throw new NewerDatabaseError(current, known, blocking);
    return [];
  }
  // The write lock only when there is something to write: a start on a current database (every
  // restart) must not fail, or wait, because another process (a `work`, a CLI command) holds it.
  if (!hasCompatibleFrom(sqlite) || needsMigration7Repair(sqlite)) {
    sqlite
      .transaction(() => {
        addCompatibleFrom(sqlite);
        repairMigration7(sqlite);
      })
      .immediate();
  }
  const applied: number[] = [];
  const recorded = new Set(sqlite.prepare('SELECT version FROM schema_migrations').pluck().all() as number[]);
  const todo = migrations.filter((m) => !recorded.has(m.version));
  const pending = todo.length;
  for (const m of todo) {
    const run = sqlite.transaction(() => {
      const done = sqlite.prepare('SELECT 1 FROM schema_migrations WHERE version = ?').get(m.version);
      if (done) return false;
      onApplying?.(m, applied.length + 1, pending);
      try {
        sqlite.exec(m.sql);
      } catch (err) {
        throw new Error(`migration ${String(m.version).padStart(3, '0')}_${m.name} failed (nothing of it was applied): ${(err as Error).message}`, { cause: err });
      }
      sqlite
        .prepare('INSERT INTO schema_migrations (version, name, applied_at, compatible_from) VALUES (?, ?, ?, ?)')
        .run(m.version, m.name, new Date().toISOString(), m.compatibleFrom);
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
  if (needsMigration7Repair(sqlite)) sqlite.exec('ALTER TABLE event_processing ADD COLUMN result_digest TEXT');
}

function needsMigration7Repair(sqlite: BetterSqlite3.Database): boolean {
  if (!sqlite.prepare('SELECT 1 FROM schema_migrations WHERE version = 7').get()) return false;
  const columns = sqlite.prepare("SELECT name FROM pragma_table_info('event_processing')").pluck().all() as string[];
  return !columns.includes('result_digest');
}

/** True when every known migration is recorded in the database. */
export function isMigrated(sqlite: BetterSqlite3.Database, migrations: Migration[] = readMigrations()): boolean {
  const known = migrations.at(-1)?.version ?? 0;
  try {
    const current = appliedVersion(sqlite);
    // Past this build's migrations (a rollback) counts when the newer ones declared it compatible.
    return current === known || (current > known && blockingNewerMigrations(sqlite, known).length === 0);
  } catch {
    return false;
  }
}

/** The database's schema version (0 before any migration). */
export function schemaVersion(sqlite: BetterSqlite3.Database): number {
  try {
    return appliedVersion(sqlite);
  } catch {
    return 0;
  }
}
