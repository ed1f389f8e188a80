import { accessSync, constants, existsSync, statSync } from 'node:fs';
import type { CheckpointProblem, WalBlocked } from './checkpointer.js';
import type { Migration } from './migrate.js';
import { openDatabase, type OpenDatabase } from './openDatabase.js';
import { repairSidecarMode, SQLITE_SIDECARS, unwritableFolderError } from './databaseFiles.js';
import { isSqliteBusy, probeWrite } from './sqliteHelpers.js';

/** The server's database; an error names the path and the setting it came from. */
export function openServerDatabase(
  path: string,
  onCheckpointProblem: (p: CheckpointProblem) => void,
  onWalBlocked?: (b: WalBlocked) => void,
  onApplying?: (m: Migration, nth: number, pending: number) => void,
) {
  // A file this process may not write, refused before SQLite opens it: SQLite would open it
  // read-only and create its -wal and -shm with the file's read-only mode, which then stop the
  // next start too, once the file itself is fixed. SQLite's files an earlier start left read-only
  // get their owner's write back (the receiver's own files are repaired where they are opened).
  for (const side of SQLITE_SIDECARS) repairSidecarMode(`${path}${side}`);
  if (path !== ':memory:' && existsSync(path)) {
    try {
      accessSync(path, constants.W_OK);
    } catch (err) {
      throw readOnlyDatabase(path, err);
    }
    for (const side of ['-wal', '-shm'] as const) {
      const file = `${path}${side}`;
      try {
        accessSync(file, constants.R_OK | constants.W_OK);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw sidecarNotOurs(path, file, err);
      }
    }
  }
  let database: OpenDatabase;
  try {
    database = openDatabase(path, { checkpointer: true, onCheckpointProblem, onWalBlocked, onApplying });
  } catch (err) {
    const folder = unwritableFolderError(path, err);
    if (folder) throw folder;
    throw new Error(`cannot open the database at ${path} (DATABASE_PATH): ${(err as Error).message}`, { cause: err });
  }
  // SQLite opens a file it may not write read-only, and says so only at the first write
  // ("attempt to write a readonly database", naming nothing): found out here, at start.
  try {
    probeWrite(database.sqlite);
  } catch (err) {
    const code = (err as { code?: string }).code ?? '';
    if (!isSqliteBusy(err)) {
      void database.close();
      if (code.startsWith('SQLITE_READONLY')) throw unwritableFolderError(path, err) ?? readOnlyDatabase(path, err);
      throw new Error(`cannot write the database at ${path} (DATABASE_PATH): ${(err as Error).message}`, { cause: err });
    }
  }
  return database;
}

function readOnlyDatabase(path: string, cause: unknown): Error {
  const uid = typeof process.getuid === 'function' ? ` (the receiver runs as uid ${process.getuid()})` : '';
  return new Error(
    `cannot write the database at ${path} (DATABASE_PATH): the file is read-only to this process${uid}; the receiver writes it, and SQLite needs the folder writable too for its -wal and -shm`,
    { cause },
  );
}

/**
 * A -wal or -shm this process may not open (SQLite says only "unable to open database file"):
 * usually made by another user, such as a reader that opened the database while nothing else had.
 */
function sidecarNotOurs(path: string, file: string, cause: unknown): Error {
  const uid = typeof process.getuid === 'function' ? ` (uid ${process.getuid()})` : '';
  let owner = '';
  try {
    const st = statSync(file);
    owner = `; it belongs to uid ${st.uid}, gid ${st.gid}, mode ${(st.mode & 0o777).toString(8).padStart(4, '0')}`;
  } catch {
    // Gone meanwhile: the message still names it.
  }
  return new Error(
    `cannot open the database at ${path} (DATABASE_PATH): ${file} is not readable and writable by this process${uid}${owner}. ` +
      'Another user made it (a reader opening the database while the receiver was stopped?): give the folder the group of both users with its setgid bit (README, "The database"), or, while nothing has the database open and the -wal is empty, remove the -wal and -shm',
    { cause },
  );
}
