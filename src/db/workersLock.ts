import { chmodSync, existsSync, realpathSync, statSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';

import { repairSidecarMode, sidecarMode, WORKERS_LOCK_SUFFIX } from './databaseFiles.js';

/** Another live process runs the workers of this database. */
export class WorkersRunningError extends Error {
  constructor(readonly databasePath: string) {
    super(
      `another process is already running the workers of ${databasePath} (a \`serve\` with WORKER_CONCURRENCY above 0, or a \`work\`): ` +
        'run one per database; a second `serve` for ingest only needs WORKER_CONCURRENCY=0',
    );
    this.name = 'WorkersRunningError';
  }
}

export interface WorkersLock {
  release(): void;
}

const NO_LOCK: WorkersLock = { release() {} };

/**
 * How long a start waits for the workers lock while another connection has the lock file locked.
 * A live holder keeps it for as long as its workers run, so a second start is refused after this
 * wait; a read of the file (workersLockHeld, `erase --dry-run`) locks it for one statement, and a
 * start landing in that statement must wait it out rather than be refused and exit 1.
 */
export const WORKERS_LOCK_WAIT_MS = 1_000;

/**
 * One process per database runs the workers. At start-up they take every job still marked
 * running as left by a process that is gone (JobQueue.releaseOrphans), so a second one would
 * take the live one's jobs. This lock makes "one per database" hold instead of relying on it.
 *
 * The lock is SQLite's own exclusive lock on a small file beside the database
 * (`<database>-workers-lock`), held for as long as the workers run: `locking_mode=EXCLUSIVE`
 * keeps it after the first transaction. It is a POSIX lock, so the kernel releases it when the
 * process ends, SIGKILL included: a crashed receiver never leaves it behind. A second
 * connection asking for it, in this process or another, is answered SQLITE_BUSY once
 * WORKERS_LOCK_WAIT_MS has passed (SQLite's busy handler, sleeping between tries).
 */
export function acquireWorkersLock(databasePath: string): WorkersLock {
  if (databasePath === ':memory:' || databasePath === '') return NO_LOCK;
  const real = realpathSync(databasePath);
  const path = `${real}${WORKERS_LOCK_SUFFIX}`;
  const created = !existsSync(path);
  // The lock is an SQLite file with a rollback journal of its own: both repaired if left read-only.
  for (const file of [path, `${path}-journal`]) repairSidecarMode(file);
  const lock = new BetterSqlite3(path);
  try {
    // The same permissions as the database, as SQLite gives its -wal and -shm: a `serve` and a
    // `work` under different users that may both write the database may both take this lock.
    if (created) chmodSync(path, sidecarMode(statSync(real).mode));
    lock.pragma(`busy_timeout = ${WORKERS_LOCK_WAIT_MS}`);
    lock.pragma('locking_mode = EXCLUSIVE');
    lock.exec('BEGIN EXCLUSIVE; COMMIT');
  } catch (err) {
    lock.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') throw new WorkersRunningError(databasePath);
    throw err;
  }
  let held = true;
  return {
    release() {
      if (!held) return;
      held = false;
      lock.close();
    },
  };
}

/**
 * Whether a live process holds the workers lock, asked without taking it: a read of the lock
 * file, read-only, which the holder's exclusive lock refuses at once (SQLITE_BUSY). For what
 * only reports (`erase --dry-run`): no file is created, and the shared lock of that read lasts
 * one statement. No lock file, or one this process may not read, says no.
 */
export function workersLockHeld(databasePath: string): boolean {
  if (databasePath === ':memory:' || databasePath === '') return false;
  let probe: BetterSqlite3.Database;
  try {
    probe = new BetterSqlite3(`${realpathSync(databasePath)}${WORKERS_LOCK_SUFFIX}`, { readonly: true, fileMustExist: true });
  } catch {
    return false;
  }
  try {
    probe.pragma('busy_timeout = 0');
    probe.prepare('SELECT COUNT(*) FROM sqlite_master').get();
    return false;
  } catch (err) {
    return (err as { code?: string }).code === 'SQLITE_BUSY';
  } finally {
    probe.close();
  }
}
