import { INGEST_WAIT_SUFFIX, repairSidecarMode, sidecarMode } from './databaseFiles.js';
import { closeSync, constants, fchmodSync, fstatSync, ftruncateSync, openSync, readSync, realpathSync, statSync, writeSync } from 'node:fs';

/**
 * Tells processes sharing a database that an ingest commit is waiting for the write lock.
 *
 * SQLite has one write lock and no queue: a `work` process folding back to back holds it
 * most of the time, and the `serve` process's group commit, which retries on a 1-4 ms
 * timer, keeps finding it taken (acknowledgement p99 at 2,500/s: 47-66 ms against 12-14 ms
 * with the workers in process; bench/README.md, "Eighth round"). So the committer writes the
 * time it found the lock busy into a small file beside the database (`<database>-ingest-wait`),
 * and 0 once it committed; right before each write that starts outside a transaction,
 * processing in any process on that database reads it and, while an ingest commit is waiting,
 * lets it go first (BusyRetrySqliteDialect).
 *
 * Eight bytes at offset 0 (a float64 of Unix ms), written and read with pwrite/pread on the
 * page cache: no fsync, nothing durable depends on it. A stale value (a `serve` killed while
 * waiting) stops counting after `staleMs`. Bytes 8-15, the workers' slot, say the same of a
 * write of processing (workersWaiting / workersThrough), for the CLI's bulk changes (`replay`,
 * `prune`, `dead-letters`, `sinks send-now`), which read both between two of their transactions
 * (openWaitSignalReader, cli/batchPause.ts); a file of 8 bytes (an older version's) has none
 * until a process of this version opens it, which extends it to 16.
 */
export interface IngestWaitSignal {
  /** The ingest commit found the lock held by another connection at `nowMs`. */
  waiting(nowMs: number): void;
  /** The ingest commit went through: nobody is waiting any more. */
  committed(): void;
  /** Whether an ingest commit is waiting now (it said so within the last `staleMs`). */
  isWaiting(nowMs: number): boolean;
  /**
   * A write outside a transaction on this process's kysely connection (the workers': a sink
   * batch's claim or completion, a fold; any other write there too) found the lock held by another
   * connection at `nowMs`: said in the file's second slot (bytes 8-15), which the CLI's bulk
   * changes read between two of their transactions (see WaitSignalReader).
   */
  workersWaiting(nowMs: number): void;
  /** That write went through (or gave up): the workers wait no more. */
  workersThrough(): void;
  /** Why this process takes no part although it could (the file could not be opened); for a warning. */
  readonly unavailable?: string;
  close(): void;
}

export { INGEST_WAIT_SUFFIX } from './databaseFiles.js';
const STALE_MS = 50;

/** For ':memory:', and for connections that take no part (the CLI's): nothing to share. */
export const NO_INGEST_WAIT: IngestWaitSignal = { waiting() {}, committed() {}, isWaiting: () => false, workersWaiting() {}, workersThrough() {}, close() {} };

/** Byte offsets of the file's two slots: an ingest commit waiting, the workers waiting. */
const INGEST_SLOT = 0;
const WORKERS_SLOT = 8;
const FILE_BYTES = 16;

/** Whether a slot's value `at` says "waiting" at `nowMs`: set (not 0), and said within `staleMs` (either way: a clock step). */
const saysWaiting = (at: number, nowMs: number, staleMs: number) => at > 0 && Math.abs(nowMs - at) < staleMs;

/**
 * While `waiting()` says so, waits on 1 ms timers, `boundMs` at most (the monotonic clock): how a
 * writer lets those that said they wait for the lock go first. Processing's write before an
 * ingest commit (BusyRetrySqliteDialect), a CLI's bulk change before its next transaction (cli/batchPause.ts).
 */
export async function letWaitersGoFirst(waiting: () => boolean, boundMs: number): Promise<void> {
  if (!waiting()) return;
  const until = performance.now() + boundMs;
  while (waiting() && performance.now() < until) await new Promise((r) => setTimeout(r, 1));
}

/**
 * Opens (or creates) the signal file of the database at `databasePath`, which must exist. Like
 * SQLite's `-wal` and `-shm`, it sits beside the database's real path (symlinks resolved) and
 * takes the database file's permissions, so a `serve` and a `work` that may both write the
 * database may both write it. If it cannot be opened, this process takes no part (`unavailable`)
 * rather than refusing to start over a file nothing durable depends on.
 */
export function openIngestWaitSignal(databasePath: string, staleMs = STALE_MS): IngestWaitSignal {
  if (databasePath === ':memory:' || databasePath === '') return NO_INGEST_WAIT;
  let fd: number | undefined;
  try {
    const real = realpathSync(databasePath);
    const mode = sidecarMode(statSync(real).mode);
    repairSidecarMode(`${real}${INGEST_WAIT_SUFFIX}`);
    fd = openSync(`${real}${INGEST_WAIT_SUFFIX}`, constants.O_RDWR | constants.O_CREAT, mode);
    // A new file gets the umask's cut of `mode`; SQLite sets its own files back to the database's mode too.
    const created = fstatSync(fd);
    if (created.size === 0 && (created.mode & 0o777) !== mode) fchmodSync(fd, mode);
    // Its 16 bytes, both slots, from the start (0: nobody waiting); an older version's 8 bytes
    // get the workers' slot. Extended, not written: another process that opened it meanwhile
    // may already have said it is waiting.
    if (created.size < FILE_BYTES) ftruncateSync(fd, FILE_BYTES);
  } catch (err) {
    if (fd !== undefined) closeSync(fd);
    return { ...NO_INGEST_WAIT, unavailable: `${databasePath}${INGEST_WAIT_SUFFIX}: ${(err as Error).message}` };
  }
  const file = fd;
  const buf = Buffer.alloc(8);
  // Whether the file may say "waiting": committed() writes only after a waiting() (and once at
  // first, to clear what a killed process left), not once per commit. workersThrough() writes only
  // after a workersWaiting(): what a killed process left in that slot stops counting after staleMs.
  let said = true;
  let workersSaid = false;
  /** What this process last wrote in the workers' slot: only that is cleared (see workersThrough). */
  let workersAt = 0;
  let closed = false;
  const write = (v: number, slot = INGEST_SLOT) => {
    buf.writeDoubleLE(v, 0);
    try {
      writeSync(file, buf, 0, 8, slot);
    } catch {
      // A full disk (the file's first block), an I/O error: nothing durable depends on these
      // 8 bytes, and this runs right after an ingest commit whose deliveries are still to be
      // answered. The other processes see a stale value, which stops counting after staleMs.
    }
  };
  return {
    waiting(nowMs) {
      if (closed) return;
      write(nowMs);
      said = true;
    },
    committed() {
      if (closed || !said) return;
      write(0);
      said = false;
    },
    isWaiting(nowMs) {
      if (closed || readSync(file, buf, 0, 8, 0) < 8) return false;
      return saysWaiting(buf.readDoubleLE(0), nowMs, staleMs);
    },
    workersWaiting(nowMs) {
      if (closed) return;
      write(nowMs, WORKERS_SLOT);
      workersAt = nowMs;
      workersSaid = true;
    },
    workersThrough() {
      if (closed || !workersSaid) return;
      workersSaid = false;
      // A `serve` and a `work` on one database share the slot: when another process said it waits
      // since this one did, its wait goes on, and zeroing the slot would hide it from a replay
      // until its next try (up to 25 ms later, past the replay's look).
      try {
        if (readSync(file, buf, 0, 8, WORKERS_SLOT) === 8 && buf.readDoubleLE(0) !== workersAt) return;
      } catch {
        // Unreadable: cleared, as before.
      }
      write(0, WORKERS_SLOT);
    },
    close() {
      if (closed) return;
      closed = true;
      closeSync(file);
    },
  };
}

/** What a process that writes no deliveries (a CLI's bulk change: cli/batchPause.ts) reads of the signal file. */
export interface WaitSignalReader {
  /** Whether an ingest commit or the workers of a running receiver wait for the write lock now (said within `staleMs`). */
  othersWaiting(nowMs: number): boolean;
  /** Whether the file was there to read (a regular file): false for NOBODY_WAITS. */
  readonly present: boolean;
  close(): void;
}

const NOBODY_WAITS: WaitSignalReader = { othersWaiting: () => false, present: false, close() {} };

/**
 * The signal file of the database at `databasePath`, opened to read only: none (nobody waits)
 * when it does not exist (no receiver ever ran on this database with workers or ingest) or cannot
 * be opened. Created by nobody here: a CLI command leaves the database's folder as it found it.
 * A file of 8 bytes (written by a version before the workers' slot) has no workers' slot.
 */
export function openWaitSignalReader(databasePath: string, staleMs = STALE_MS): WaitSignalReader {
  if (databasePath === ':memory:' || databasePath === '') return NOBODY_WAITS;
  let fd: number;
  try {
    // O_NONBLOCK: a FIFO put there would otherwise hold the open (the replay, before its first
    // batch) until something opened it to write. Only a regular file is read.
    fd = openSync(`${realpathSync(databasePath)}${INGEST_WAIT_SUFFIX}`, constants.O_RDONLY | constants.O_NONBLOCK);
  } catch {
    return NOBODY_WAITS;
  }
  if (!fstatSync(fd).isFile()) {
    closeSync(fd);
    return NOBODY_WAITS;
  }
  const buf = Buffer.alloc(16);
  let closed = false;
  return {
    present: true,
    othersWaiting(nowMs) {
      if (closed) return false;
      let n: number;
      try {
        n = readSync(fd, buf, 0, 16, 0);
      } catch {
        return false;
      }
      return (n >= 8 && saysWaiting(buf.readDoubleLE(INGEST_SLOT), nowMs, staleMs)) || (n >= 16 && saysWaiting(buf.readDoubleLE(WORKERS_SLOT), nowMs, staleMs));
    },
    close() {
      if (closed) return;
      closed = true;
      closeSync(fd);
    },
  };
}
