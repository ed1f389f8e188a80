import { linkSync, renameSync, rmSync } from 'node:fs';
import { realPathOf } from '../util/realPath.js';
import { identityOf, sameFile as same } from './fileIdentity.js';
import type { FileIdentity } from './openDatabase.js';

/**
 * Whether DATABASE_PATH (and its -wal) still name the files this process opened.
 *
 * SQLite keeps the files it opened: after `rm receiver.db`, or `mv backup.db receiver.db` (a
 * restore while the receiver runs, a volume swapped under it), every commit in WAL mode still
 * succeeds, into a file no one will open again (unlinked, its -wal with it or left at the path
 * for the next start to apply to another database). Each acknowledged delivery was lost at the
 * next start. So the ingest path checks, after each commit and before answering it, that the
 * path still names the opened file: one stat per commit batch (2-3 µs measured), not per
 * delivery. The -wal is checked by check() (a timer and /readyz), not per batch.
 *
 * Once a difference is found it stays found (latched): this process never again writes
 * deliveries anywhere, whatever comes back at the path; a restart opens what is there now.
 * Only a positive finding counts: a stat that fails otherwise (EACCES on the folder) is no
 * evidence, and the files SQLite holds are still the ones at the path.
 */
export class DatabaseFileWatch {
  private problemFound: string | null = null;
  private readonly db: FileIdentity | null;
  private readonly wal: FileIdentity | null;
  /**
   * The -shm, SQLite's wal-index, which every connection to the database maps: deleted under a
   * running receiver (taken for a stale lock file), the next process to open the database makes a
   * new one, and the two processes' writes no longer exclude each other. A second ingest-only
   * `serve` started after an `rm receiver.db-shm`, 800 deliveries acknowledged by each: the file
   * was "database disk image is malformed", every event lost (databaseReplaced.test.ts).
   */
  private readonly shm: FileIdentity | null;
  /**
   * Where SQLite keeps the file opened and its -wal: the path with its symbolic links resolved,
   * as SQLite resolves them at the open (DATABASE_PATH=/data/receiver.db linking to
   * /mnt/vol/receiver.db has its -wal at /mnt/vol/receiver.db-wal, none beside the link).
   */
  private readonly realPath: string;

  /**
   * `opened`: the file the database's first connection opened (OpenDatabase.opened, stat'ed right
   * after that open, before the migrations: a file moved to the path while they ran is found too).
   * The -wal's and -shm's identities are taken now: call it once the database is open. `:memory:` is never checked.
   */
  constructor(
    private readonly path: string,
    opened: FileIdentity | null,
    private readonly onReplaced: (problem: string) => void,
  ) {
    const file = path === ':memory:' || path === '' ? null : path;
    this.realPath = file ? realPathOf(file) : path;
    this.db = file ? opened : null;
    this.wal = file ? identityOf(this.walPath) : null;
    this.shm = file ? identityOf(this.shmPath) : null;
  }

  private get walPath(): string {
    return `${this.realPath}-wal`;
  }

  private get shmPath(): string {
    return `${this.realPath}-shm`;
  }

  /** What is wrong with the database file, once found (latched); null while it is the opened one. */
  get problem(): string | null {
    return this.problemFound;
  }

  /** The database file only: for the ingest path, once per commit batch. */
  checkDatabase(): string | null {
    if (this.problemFound !== null || this.db === null) return this.problemFound;
    return this.compare(this.path, this.db);
  }

  /** The database file, its -wal and its -shm: for a timer and /readyz. */
  check(): string | null {
    if (this.checkDatabase() !== null) return this.problemFound;
    if (this.wal !== null && this.compare(this.walPath, this.wal) !== null) return this.problemFound;
    if (this.shm !== null) return this.compare(this.shmPath, this.shm);
    return null;
  }

  /**
   * After this process closed the database, when the file is found replaced (or deleted): a -wal
   * still at the path that is the one this process opened is the replaced file's (SQLite does not
   * checkpoint nor remove the WAL of a moved database at close), and the next start would apply
   * its frames to the file now at the path, another database: pages of one written into the
   * other. It is renamed to `<path>-wal.replaced-<UTC time>` (not deleted: with the old file, if it
   * was moved rather than deleted, it is that file's latest commits). Returns the new name, or null.
   * Looked at here whether or not a check found it before: a file moved over the database right
   * before a stop (`mv backup.db receiver.db && kill -TERM`), with no commit nor tick of the
   * once-a-second check in between, left the old -wal at the path, and the restart applied it.
   */
  setAsideStaleWal(now: Date): string | null {
    if (this.db === null || this.wal === null) return null;
    const walPath = this.walPath;
    try {
      const wal = identityOf(walPath);
      // Beside its -wal: where DATABASE_PATH linked to at the open (a link pointed elsewhere since
      // leaves the opened file, and its -wal, where they were).
      const db = identityOf(this.realPath);
      // The -wal at the path is another one, or the opened file is back at the path (its WAL is right for it).
      if (wal === null || !same(wal, this.wal) || (db !== null && same(db, this.db))) return null;
      const aside = `${walPath}.replaced-${now.toISOString().replace(/[-:]|\.\d+/g, '')}`;
      renameSync(walPath, aside);
      return aside;
    } catch {
      return null;
    }
  }

  /**
   * Before this process closes the database, when the file at the path is still the one opened but
   * its -shm is not (deleted, or made again by a process that opened the database since): the
   * -wal gets a second name, and `restore` (after the close) puts it back if the close deleted it.
   * The close, the last on the file once the other process is gone (killed), checkpoints through
   * this process's wal-index, which knows none of the other's commits, then deletes the -wal that
   * holds them: every delivery the other acknowledged since its last checkpoint was lost (20 of 20
   * in databaseReplaced.test.ts). Put back, the next open recovers them from it. While the other
   * process runs, the close neither checkpoints nor deletes: the second name is removed.
   */
  holdWalThroughClose(): { restore(): string | null } {
    const none = { restore: () => null };
    if (this.db === null || this.wal === null || this.shm === null) return none;
    const walPath = this.walPath;
    const kept = `${walPath}.kept-${process.pid}`;
    try {
      const db = identityOf(this.realPath);
      const shm = identityOf(this.shmPath);
      if (db === null || !same(db, this.db) || (shm !== null && same(shm, this.shm))) return none;
      linkSync(walPath, kept);
    } catch {
      return none;
    }
    return {
      restore: () => {
        try {
          if (identityOf(walPath) !== null) {
            rmSync(kept, { force: true });
            return null;
          }
          renameSync(kept, walPath);
          return walPath;
        } catch {
          return null;
        }
      },
    };
  }

  private compare(file: string, opened: FileIdentity): string | null {
    let now: FileIdentity | null;
    try {
      now = identityOf(file);
    } catch {
      return null;
    }
    if (now !== null && same(now, opened)) return null;
    this.problemFound =
      now === null
        ? `${file} was deleted while the receiver had it open`
        : `${file} was replaced while the receiver had it open (another file is at that path now: moved there, or a volume swapped)`;
    this.onReplaced(this.problemFound);
    return this.problemFound;
  }
}

/** The code of the error an ingest batch fails with once the database file is found replaced. */
export const DATABASE_REPLACED = 'DATABASE_REPLACED';

export class DatabaseReplacedError extends Error {
  readonly code = DATABASE_REPLACED;
  constructor(problem: string) {
    super(problem);
    this.name = 'DatabaseReplacedError';
  }
}
