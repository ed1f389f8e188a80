import { closeSync, constants, openSync, readSync, writeSync } from 'node:fs';

/**
 * Tells processes sharing a database that an ingest commit is waiting for the write lock.
 *
 * SQLite has one write lock and no queue: a `work` process folding back to back holds it
 * most of the time, and the `serve` process's group commit, which retries on a 1-4 ms
 * timer, keeps finding it taken (acknowledgement p99 at 2,500/s: 47-66 ms against 13-14 ms
 * with the workers in process; bench/README.md, "Eighth round"). So the committer writes the
 * time it found the lock busy into a small file beside the database (`<database>-ingest-wait`),
 * and 0 once it committed; before each write of its own, processing in any process on that
 * database reads it and, while an ingest commit is waiting, lets it go first.
 *
 * Eight bytes at offset 0 (a float64 of Unix ms), written and read with pwrite/pread on the
 * page cache: no fsync, nothing durable depends on it. A stale value (a `serve` killed while
 * waiting) stops counting after `staleMs`.
 */
export interface IngestWaitSignal {
  /** The ingest commit found the lock held by another connection at `nowMs`. */
  waiting(nowMs: number): void;
  /** The ingest commit went through: nobody is waiting any more. */
  committed(): void;
  /** Whether an ingest commit is waiting now (it said so within the last `staleMs`). */
  isWaiting(nowMs: number): boolean;
  close(): void;
}

export const INGEST_WAIT_SUFFIX = '-ingest-wait';
const STALE_MS = 50;

/** For ':memory:', and for connections that take no part (the CLI's): nothing to share. */
export const NO_INGEST_WAIT: IngestWaitSignal = { waiting() {}, committed() {}, isWaiting: () => false, close() {} };

export function openIngestWaitSignal(databasePath: string, staleMs = STALE_MS): IngestWaitSignal {
  if (databasePath === ':memory:' || databasePath === '') return NO_INGEST_WAIT;
  const fd = openSync(`${databasePath}${INGEST_WAIT_SUFFIX}`, constants.O_RDWR | constants.O_CREAT, 0o600);
  const buf = Buffer.alloc(8);
  // Whether the file may say "waiting": committed() writes only after a waiting(), not per commit.
  let said = true;
  const write = (v: number) => {
    buf.writeDoubleLE(v, 0);
    writeSync(fd, buf, 0, 8, 0);
  };
  let closed = false;
  return {
    waiting(nowMs) {
      write(nowMs);
      said = true;
    },
    committed() {
      if (!said) return;
      write(0);
      said = false;
    },
    isWaiting(nowMs) {
      if (readSync(fd, buf, 0, 8, 0) < 8) return false;
      const at = buf.readDoubleLE(0);
      return at > 0 && nowMs - at < staleMs && nowMs - at > -staleMs;
    },
    close() {
      if (closed) return;
      closed = true;
      closeSync(fd);
    },
  };
}
