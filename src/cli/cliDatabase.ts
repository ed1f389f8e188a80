import { accessSync, constants, existsSync } from 'node:fs';
import { unwritableFolder } from '../db/databaseFiles.js';
import { readMigrations, refuseUnusable } from '../db/migrate.js';
import { openDatabase, type OpenDatabase } from '../db/openDatabase.js';
import { openDatabaseReadOnly } from '../db/openDatabaseReadOnly.js';
import { CliError } from './errors.js';

/**
 * Opens the receiver's database for an operator command, next to a running
 * server (WAL lets both work). Never creates a database and never migrates
 * (that is `migrate`'s job); refuses a schema this build does not match.
 * The busy timeout is longer than the server's: a CLI may block for a moment
 * while the server commits, rather than fail.
 */
export function openCliDatabase(path: string, opts: { readOnly?: boolean } = {}): OpenDatabase {
  if (path !== ':memory:' && !existsSync(path)) {
    throw new CliError(`no database at ${path} (set DATABASE_PATH or --database; \`migrate\` creates one)`);
  }
  const open = (readOnly: boolean): OpenDatabase => {
    try {
      // Commands that only look open it read-only: `status` on a backup must not turn it into WAL.
      return readOnly ? openDatabaseReadOnly(path, 5000) : openDatabase(path, { migrate: false, busyTimeoutMs: 5000, busyWait: 'sqlite' });
    } catch (err) {
      throw openFailure(path, err);
    }
  };
  // The schema is checked on a read-only handle first: a file this build refuses (a backup of
  // another version, an empty file) is left as it was, not turned into WAL mode by the refusal.
  const looking = open(true);
  try {
    // Another program's database, or a newer version's this build cannot run with: said as such,
    // not as a schema to migrate.
    refuseUnusable(looking.sqlite);
  } catch (err) {
    void looking.close();
    throw new CliError(`cannot open the database at ${path}: ${(err as Error).message}`);
  }
  const known = readMigrations().at(-1)?.version ?? 0;
  let version = 0;
  try {
    version = (looking.sqlite.prepare('SELECT MAX(version) FROM schema_migrations').pluck().get() as number | null) ?? 0;
  } catch {
    version = 0;
  }
  // Past this build's last migration is usable here: refuseUnusable let through only a newer
  // version's database whose newer migrations declared this one compatible (a rollback).
  if (version === 0) {
    // An empty file (`touch`, a copy that failed) or one no receiver ever migrated: no older
    // receiver to stop, as the message below would have it.
    void looking.close();
    throw new CliError(`the database at ${path} has no receiver schema yet (an empty file, or one never migrated): run \`migrate\`, or start the receiver, which migrates`);
  }
  if (version < known) {
    void looking.close();
    throw new CliError(
      `the database at ${path} is at schema version ${version}, this build needs ${known}: stop the receiver running on it (an older version), then run \`migrate\`, or start the new version, which migrates`,
    );
  }
  if (opts.readOnly) return looking;
  void looking.close();
  // SQLite opens a file it may not write read-only without a word: the first write then failed
  // with "attempt to write a readonly database", naming neither the file nor the user.
  const unwritable = unwritableFile(path);
  if (unwritable) throw unwritable;
  return open(false);
}

/** What an operator on another account than the receiver's is told to do. */
const AS_THE_RECEIVER = 'run the command as the user the receiver runs as';
const uidOf = () => (typeof process.getuid === 'function' ? ` (uid ${process.getuid()})` : '');

/**
 * An open that failed: in a folder this process may not create files in (SQLite's words: "attempt
 * to write a readonly database", even for `status`), said as such; otherwise SQLite's message.
 */
function openFailure(path: string, err: unknown): CliError {
  const unreadable = deniedBy(path, constants.R_OK);
  if (unreadable) return new CliError(`cannot open the database at ${path}: this process${uidOf()} may not read it (${unreadable}): ${AS_THE_RECEIVER}`);
  const f = unwritableFolder(path, err);
  if (f) {
    return new CliError(
      `cannot open the database at ${path}: this process${f.uid} may not create files in its folder ${f.folder} (${f.code}), where SQLite makes the -wal and -shm it reads and writes the database through: ${AS_THE_RECEIVER}`,
    );
  }
  return new CliError(`cannot open the database at ${path}: ${(err as Error).message}`);
}

/** For a command that writes: a database file this process may not write, as an error; else null. */
function unwritableFile(path: string): CliError | null {
  const denied = deniedBy(path, constants.W_OK);
  return denied ? new CliError(`cannot write the database at ${path}: this process${uidOf()} may not write it (${denied}): ${AS_THE_RECEIVER}`) : null;
}

/** The errno when this process may not access `path` as `mode` asks (a permission, a read-only mount); else null. */
function deniedBy(path: string, mode: number): string | null {
  if (path === ':memory:') return null;
  try {
    accessSync(path, mode);
    return null;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code ?? '';
    return code === 'EACCES' || code === 'EPERM' || code === 'EROFS' ? code : null;
  }
}
