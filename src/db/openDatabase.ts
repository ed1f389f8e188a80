import { closeSync, openSync, statSync } from 'node:fs';
import { dirname } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { BusyRetrySqliteDialect } from './busyRetryDialect.js';
import { CHECKPOINT_DEFAULTS, CheckpointerThread, onStderr, type CheckpointerOptions, type CheckpointProblem, type WalBlocked } from './checkpointer.js';
import { configure } from './connectionSettings.js';
import { NO_INGEST_WAIT, openIngestWaitSignal, type IngestWaitSignal } from './ingestWaitSignal.js';
import { migrate, readMigrations, refuseUnusable, type Migration } from './migrate.js';
import { OffLoopReads } from './OffLoopReads.js';
import { withStatementCache } from './statementCache.js';
import type { Database } from './schema.js';
import { ensureDirSync } from '../util/ensureDir.js';
import { syncFolderSync } from '../util/syncFolder.js';

export interface OpenDatabase {
  /** For everything but the ingest hot path: queue, handlers, readers. */
  readonly db: Kysely<Database>;
  /** The connection kysely uses (for pragmas and health checks). */
  readonly sqlite: BetterSqlite3.Database;
  /**
   * A second connection only the ingest group-commit writes on. Its write
   * transactions are synchronous (one tick), so they never interleave with
   * kysely's async transactions on the other connection; lock contention
   * between the two shows up as SQLITE_BUSY, which both sides retry.
   */
  readonly ingestSqlite: BetterSqlite3.Database;
  /**
   * Says when an ingest commit waits for the write lock, to every process on this database
   * (ingestWaitSignal.ts): the ingest committer writes it, the kysely connection's writes
   * (processing, here or in a `work` process) read it and let ingest go first.
   */
  readonly ingestWait: IngestWaitSignal;
  /**
   * Reads run on the checkpointer thread's connection, off the event loop (OffLoopReads): each
   * answers null when there is no thread (a tool's open, `:memory:`) or it cannot answer in time.
   */
  readonly offLoop: OffLoopReads;
  /** The migrations this open applied (none when the schema was current, or with migrate: false). */
  readonly migrated: readonly number[];
  /**
   * The file the first connection opened (device and inode, from a stat right after it): what the
   * checkpointer thread and the file watch (DatabaseFileWatch) hold the path to. Null for
   * `:memory:` and a read-only open.
   */
  readonly opened: FileIdentity | null;
  close(): Promise<void>;
}

/** A file as a stat names it: device and inode (bigint: exact on every filesystem). */
export interface FileIdentity {
  dev: bigint;
  ino: bigint;
}

/** How long pending migrations wait for the write lock another process holds (its own migrations, a CLI command). */
const MIGRATE_LOCK_WAIT_MS = 30_000;

export interface OpenOptions {
  /** Apply pending migrations (the server does; read-only tools may not). */
  migrate?: boolean;
  /**
   * How long a statement of the kysely connection waits for the write lock. Default 200. With
   * busyWait 'timer', a query may first wait up to 50 ms more while an ingest commit is waiting
   * (ingestWaitSignal.ts).
   */
  busyTimeoutMs?: number;
  /**
   * Who waits for the lock: `timer` (the default, for the server) sets SQLite's busy_timeout to 0
   * and runs a statement that found the lock busy again on timers (BusyRetrySqliteDialect), so
   * the event loop keeps serving while it waits. `sqlite` lets SQLite wait, sleeping on the
   * thread: for the CLI, whose commands also write through the bare connection (`sqlite`).
   */
  busyWait?: 'timer' | 'sqlite';
  /** Run WAL checkpoints on a worker thread (the server does); tools keep SQLite's automatic ones. */
  checkpointer?: boolean | CheckpointerOptions;
  /** A checkpoint that failed (a full disk shows here first): the server logs and counts it. Default: a line on stderr. */
  onCheckpointProblem?: (p: CheckpointProblem) => void;
  /** The WAL cannot be reset (WalBlocked): the server logs it and shows it in its metrics. Default: ignored. */
  onWalBlocked?: (b: WalBlocked) => void;
  /** Told before each pending migration is applied (the server logs it: one over a large table takes seconds). */
  onApplying?: (m: Migration, nth: number, pending: number) => void;
}

/**
 * A new database file is created readable by its owner only (0600): it holds candidate names,
 * emails and phone numbers. SQLite gives its -wal and -shm the database file's mode, and so does
 * the receiver for its own files beside it. An existing file keeps its mode (an operator may
 * have made it 0660 for a `serve` and a `work` under two users of one group).
 */
function createPrivate(path: string): void {
  try {
    closeSync(openSync(path, 'wx', 0o600));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
  }
}

/**
 * The database's folder, made when missing. A folder this process may not make is most often a
 * mistyped path or a volume mounted elsewhere (DATABASE_PATH=/dta/receiver.db, or /data while the
 * volume is at /mnt/data): said so, where mkdir says only `EACCES: permission denied, mkdir '/dta'`.
 */
function makeDatabaseFolder(folder: string): void {
  try {
    // Each folder made is fsynced in its parent (innermost first), so a power loss soon after the
    // first acknowledged deliveries cannot take the new folder, and the database in it, away:
    // SQLite fsyncs the database's own folder, not the ones above it.
    for (const made of ensureDirSync(folder).reverse()) syncFolderSync(dirname(made));
  } catch (err) {
    const { code, path: blocked } = err as NodeJS.ErrnoException;
    if ((code !== 'EACCES' && code !== 'EPERM' && code !== 'EROFS') || !blocked) throw err;
    const uid = typeof process.getuid === 'function' ? ` (uid ${process.getuid()})` : '';
    throw new Error(
      `the folder ${folder} does not exist, and this process${uid} may not create ${blocked} in ${dirname(blocked)} (${code}); ` +
        'is the path mistyped, or the volume mounted at another folder? Give the path of a folder that exists or that this process may create',
      { cause: err },
    );
  }
}

/** The open found DATABASE_PATH naming another file (or none) once it held its first lock: opened again. */
class PathChangedDuringOpen extends Error {}

/** How often an open that found the file removed or replaced under it (PathChangedDuringOpen) is tried. */
const OPEN_ATTEMPTS = 3;

export function openDatabase(path: string, opts: OpenOptions = {}): OpenDatabase {
  for (let attempt = 1; ; attempt++) {
    try {
      return openDatabaseOnce(path, opts);
    } catch (err) {
      if (!(err instanceof PathChangedDuringOpen) || attempt >= OPEN_ATTEMPTS) throw err instanceof PathChangedDuringOpen ? (err.cause as Error) : err;
    }
  }
}

/**
 * Whether `path` still names the file `opened` (after the first connection took its first lock).
 * A start whose open waited for the lock of a failed start's removal of the new file it made
 * (newDatabaseFiles.ts: removed under that lock) held a file no longer at the path: SQLite then
 * failed with "disk I/O error" (SQLITE_IOERR_FSTAT), or it would have run on a file no one opens again.
 */
function stillAtPath(path: string, opened: FileIdentity): boolean {
  const st = statSync(path, { bigint: true, throwIfNoEntry: false });
  return st !== undefined && st.dev === opened.dev && st.ino === opened.ino;
}

function openDatabaseOnce(path: string, opts: OpenOptions): OpenDatabase {
  if (path !== ':memory:') {
    makeDatabaseFolder(dirname(path));
    createPrivate(path);
  }
  const sqlite = new BetterSqlite3(path);
  const background = Boolean(opts.checkpointer) && path !== ':memory:';
  /** The file just opened: the checkpointer thread and the file watch hold the path to it. */
  let opened: FileIdentity | null = null;
  const checkpoints = { ...CHECKPOINT_DEFAULTS, ...(typeof opts.checkpointer === 'object' ? opts.checkpointer : {}) };
  let ingestSqlite: BetterSqlite3.Database | undefined;
  let migrated: number[] = [];
  let ingestWait: IngestWaitSignal | undefined;
  const busyTimeoutMs = opts.busyTimeoutMs ?? 200;
  const busyWait = opts.busyWait ?? 'timer';
  try {
    if (path !== ':memory:') {
      const st = statSync(path, { bigint: true, throwIfNoEntry: false });
      // Removed between its creation and this open (a failed start's removal, above): made again.
      if (!st) throw new PathChangedDuringOpen('the database file was removed during the open', { cause: new Error(`the database file at ${path} was removed while it was being opened`) });
      opened = { dev: st.dev, ino: st.ino };
    }
    let configureError: unknown = null;
    try {
      // Before configure's first write (journal_mode = WAL): a file refused here is left unchanged.
      refuseUnusable(sqlite);
      configure(sqlite, busyTimeoutMs, 'NORMAL', !background);
    } catch (err) {
      configureError = err;
    }
    // From here the connection holds its shared lock (WAL mode) for as long as it is open: a
    // removal checked under an exclusive lock (newDatabaseFiles.ts) can no longer happen unseen.
    // A configure that failed on a file removed under it (SQLITE_IOERR_FSTAT) is opened again too.
    if (opened && !stillAtPath(path, opened)) {
      const cause = configureError ?? new Error(`the database file at ${path} was removed or replaced while it was being opened`);
      throw new PathChangedDuringOpen('the database file was removed or replaced during the open', { cause });
    }
    if (configureError !== null) throw configureError;
    // Migrations run at start-up, before anything is served: SQLite may wait for them, and for
    // another process's (a `serve` and a `work` of a new version started together: the second
    // waits while the first applies them, an index over a large table taking seconds). A
    // database already current takes no lock (migrate), so a restart never waits here.
    if (opts.migrate !== false) {
      sqlite.pragma(`busy_timeout = ${Math.trunc(Math.max(busyTimeoutMs, MIGRATE_LOCK_WAIT_MS))}`);
      migrated = migrate(sqlite, readMigrations(), opts.onApplying);
      sqlite.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
    }
    if (busyWait === 'timer') sqlite.pragma('busy_timeout = 0');
    ingestSqlite = new BetterSqlite3(path);
    // The ingest committer never waits inside SQLite: it retries on its own timer.
    configure(ingestSqlite, 0, 'FULL', !background);
    if (background) {
      // Whichever connection rewinds the WAL truncates a file a burst left larger than this.
      for (const c of [sqlite, ingestSqlite]) c.pragma(`journal_size_limit = ${Math.trunc(checkpoints.maxWalBytes)}`);
    }
    // The CLI (busyWait 'sqlite') neither commits deliveries nor lets them go first.
    ingestWait = busyWait === 'timer' ? openIngestWaitSignal(path) : NO_INGEST_WAIT;
  } catch (err) {
    ingestSqlite?.close();
    sqlite.close();
    throw err;
  }
  const dialectConfig = { database: withStatementCache(sqlite) };
  const signal = ingestWait;
  const db = new Kysely<Database>({
    dialect:
      busyWait === 'timer'
        ? new BusyRetrySqliteDialect(dialectConfig, {
            inTransaction: () => sqlite.inTransaction,
            waitMs: busyTimeoutMs,
            ingestWaiting: () => signal.isWaiting(Date.now()),
            writeWaiting: () => signal.workersWaiting(Date.now()),
            writeThrough: () => signal.workersThrough(),
          })
        : new SqliteDialect(dialectConfig),
  });
  const ingest = ingestSqlite;
  const offLoop = new OffLoopReads(checkpoints.readAnswerMs);
  let checkpointer: CheckpointerThread | null;
  try {
    checkpointer =
      background && opened
        ? new CheckpointerThread(path, opened, checkpoints, opts.onCheckpointProblem ?? onStderr, opts.onWalBlocked ?? (() => {}), (w) => offLoop.attach(w))
        : null;
  } catch (err) {
    // A thread that cannot start (out of memory or threads) must not leave the connections open.
    // kysely has opened nothing yet: its driver connects on the first query.
    ingest.close();
    sqlite.close();
    signal.close();
    throw err;
  }
  return {
    db,
    sqlite,
    ingestSqlite: ingest,
    ingestWait: signal,
    offLoop,
    migrated,
    opened,
    async close() {
      if (checkpointer) {
        await checkpointer.stop();
        // Reads the thread answered before `stop` (OffLoopReads) can reach the loop together with
        // its exit: their askers (a /metrics scrape whose connection the stop has cut) go on in
        // the promise jobs after this one, on these connections. One turn of the loop lets them
        // finish first; closed under them, the scrape logged "unhandled error: The database
        // connection is not open".
        await new Promise((next) => setImmediate(next));
      }
      try {
        ingest.close();
        await db.destroy();
      } finally {
        // kysely closes `sqlite` only if it ran a query on it: a command that used only `sqlite`
        // (`migrate`) exited with it open, its WAL never checkpointed nor removed.
        sqlite.close();
        signal.close();
      }
    },
  };
}
