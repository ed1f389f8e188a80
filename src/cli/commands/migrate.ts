import { isMigrated, migrate, readMigrations, schemaVersion, type Migration } from '../../db/migrate.js';
import { acquireWorkersLock, WorkersRunningError, type WorkersLock } from '../../db/workersLock.js';
import { openDatabase } from '../../db/openDatabase.js';
import { databasePathOf } from '../cliConfig.js';
import { CliError } from '../errors.js';
import { printJson, type CliIo } from '../io.js';
import { progressFor } from '../progress.js';

/** Creates the database if needed and applies pending migrations (the server also does at start-up). */
export async function runMigrate(io: CliIo, o: { database?: string; json?: boolean; progress?: boolean }): Promise<number> {
  const path = databasePathOf(io.env, o.database);
  const progress = progressFor(io, o.progress);
  let database;
  try {
    database = openDatabase(path, { migrate: false, busyTimeoutMs: 5000, busyWait: 'sqlite' });
  } catch (err) {
    throw new CliError(`cannot open the database at ${path}: ${(err as Error).message}`);
  }
  let lock: WorkersLock | undefined;
  try {
    let applied: number[];
    try {
      // A receiver running on the database (an older version, during an upgrade) would go on
      // with a schema it does not know: its workers lock says it is there. Not taken when there
      // is nothing to apply, so `migrate` beside a current receiver just says so.
      if (!isMigrated(database.sqlite) && path !== ':memory:') lock = acquireWorkersLock(path);
      // Each migration named as it starts (one on a large table takes seconds: an index, a copy).
      const label = (m: Migration) => `${String(m.version).padStart(3, '0')}_${m.name}`;
      applied = migrate(database.sqlite, readMigrations(), (m, nth, pending) => progress.report(() => `migrate: applying ${label(m)} (${nth} of ${pending})`, { phase: true }));
      progress.end();
    } catch (err) {
      if (err instanceof WorkersRunningError) {
        throw new CliError(`a receiver is running on ${path} (it holds the workers lock): stop it, then run \`migrate\`, or start the new version, which migrates`);
      }
      throw new CliError((err as Error).message);
    }
    // Past this build's last migration after a rollback (its newer migrations declared it compatible).
    const version = Math.max(readMigrations().at(-1)?.version ?? 0, schemaVersion(database.sqlite));
    if (o.json) printJson(io, { database: path, applied, version });
    else io.out(applied.length === 0 ? `${path} is up to date (schema version ${version})` : `${path}: applied migration${applied.length === 1 ? '' : 's'} ${applied.join(', ')}; schema version ${version}`);
    return 0;
  } finally {
    progress.end();
    lock?.release();
    await database.close();
  }
}
