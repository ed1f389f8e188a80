import { migrate, readMigrations } from '../../db/migrate.js';
import { openDatabase } from '../../db/openDatabase.js';
import { databasePathOf } from '../cliConfig.js';
import { CliError } from '../errors.js';
import { printJson, type CliIo } from '../io.js';

/** Creates the database if needed and applies pending migrations (the server also does at start-up). */
export async function runMigrate(io: CliIo, o: { database?: string; json?: boolean }): Promise<number> {
  const path = databasePathOf(io.env, o.database);
  let database;
  try {
    database = openDatabase(path, { migrate: false, busyTimeoutMs: 5000, busyWait: 'sqlite' });
  } catch (err) {
    throw new CliError(`cannot open the database at ${path}: ${(err as Error).message}`);
  }
  try {
    let applied: number[];
    try {
      applied = migrate(database.sqlite);
    } catch (err) {
      throw new CliError((err as Error).message);
    }
    const version = readMigrations().at(-1)?.version ?? 0;
    if (o.json) printJson(io, { database: path, applied, version });
    else io.out(applied.length === 0 ? `${path} is up to date (schema version ${version})` : `${path}: applied migration${applied.length === 1 ? '' : 's'} ${applied.join(', ')}; schema version ${version}`);
    return 0;
  } finally {
    await database.close();
  }
}
