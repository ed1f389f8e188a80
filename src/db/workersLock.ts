import { chmodSync, existsSync, realpathSync, statSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';

import { identityOf, sameFile } from './fileIdentity.js';
import type { FileIdentity } from './openDatabase.js';
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
  /**
   * Once a second (an unref'd timer, ended by release()), whether the lock file at the path is
   * still the one locked. Deleted under a running receiver (taken for a stale lock file: the message
   * of a refused start reads like one), the next process with workers made a new file, locked it
   * and ran its workers beside this one's, taking back the jobs this one was running. So the lock
   * is taken again at once on the file now at the path, without waiting; `onLost` is told (once,
   * and the timer ends) when another process holds that one already.
   */
  watch(onLost: () => void): void;
}

const NO_LOCK: WorkersLock = { release() {}, watch() {} };

/**
 * The lock file at `path` (identityOf); undefined when it cannot be looked at (EACCES on the
 * folder, EIO): no evidence either way.
 */
function lockFileIdentity(path: string): FileIdentity | null | undefined {
  try {
    return identityOf(path);
  } catch {
    return undefined;
  }
}

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
  let lock = lockFile(databasePath, real, path, WORKERS_LOCK_WAIT_MS);
  let locked = lockFileIdentity(path);
  let held = true;
  let timer: NodeJS.Timeout | null = null;
  const stopWatching = () => {
    if (timer) clearInterval(timer);
    timer = null;
  };
  return {
    release() {
      stopWatching();
      if (!held) return;
      held = false;
      lock.close();
    },
    watch(onLost) {
      if (!held || timer) return;
      timer = setInterval(() => {
        const now = lockFileIdentity(path);
        if (now === undefined || (now !== null && locked && sameFile(now, locked))) return;
        // Not known at the lock (a stat that failed then): the file there now is the one locked.
        if (!locked) return void (locked = now ?? undefined);
        try {
          const again = lockFile(databasePath, real, path, 0);
          lock.close();
          lock = again;
          locked = lockFileIdentity(path);
        } catch (err) {
          // Another process holds the file there now (it runs its workers); any other failure
          // (a folder this process may no longer write) is tried again at the next tick.
          if (!(err instanceof WorkersRunningError)) return;
          stopWatching();
          onLost();
        }
      }, 1000);
      timer.unref();
    },
  };
}

/** SQLite's exclusive lock on the lock file at `path`, waiting `waitMs` at most: the connection holding it. */
function lockFile(databasePath: string, real: string, path: string, waitMs: number): BetterSqlite3.Database {
  const created = !existsSync(path);
  // The lock is an SQLite file with a rollback journal of its own: both repaired if left read-only.
  for (const file of [path, `${path}-journal`]) repairSidecarMode(file);
  const lock = new BetterSqlite3(path);
  try {
    // The same permissions as the database, as SQLite gives its -wal and -shm: a `serve` and a
    // `work` under different users that may both write the database may both take this lock.
    if (created) chmodSync(path, sidecarMode(statSync(real).mode));
    lock.pragma(`busy_timeout = ${waitMs}`);
    lock.pragma('locking_mode = EXCLUSIVE');
    lock.exec('BEGIN EXCLUSIVE; COMMIT');
  } catch (err) {
    lock.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') throw new WorkersRunningError(databasePath);
    throw err;
  }
  return lock;
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
