import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import { CACHE_KIB } from './connectionSettings.js';
import type { FileIdentity } from './openDatabase.js';

/**
 * WAL checkpoints copy committed pages back into the database file and fsync
 * it. SQLite's automatic checkpoint runs inside whichever commit crosses 1,000
 * pages, on the event loop: the benchmark traced ingest p99 spikes (~20 ms) to
 * it. Here a worker thread with its own connection checkpoints twice a second.
 *
 * A checkpoint copies pages; SQLite rewinds the WAL to its start only when a
 * writer begins while every frame has been copied back and no reader still
 * uses old frames. Under sustained writes a single PASSIVE pass never ends in
 * that state (commits keep landing during it), so the WAL used to grow for as
 * long as the load lasted: 1.6 GB in 20 s of the ingest benchmark, 47 MB/s at
 * 1,000 deliveries/s with processing. So each tick:
 *  1. PASSIVE (never blocks writers or readers); if another connection is
 *     checkpointing (log = -1), nothing more this tick;
 *  2. while the WAL holds at least 1,000 frames and grew during the last
 *     pass, up to 4 more short PASSIVE passes: each copies only what the
 *     previous one missed, and the WAL often ends fully copied between two
 *     commits, so the next writer rewinds it (a pass that finds another
 *     connection checkpointing ends them; the previous pass's result counts);
 *  3. if the WAL still holds `maxWalBytes` or more, RESTART: it takes the
 *     write lock, copies the frames left and fsyncs, then waits until no
 *     reader uses the WAL, so that the next writer rewinds it. Writers wait
 *     for all of that (the copy, the fsyncs, and lock waits that share
 *     `restartWaitMs`); the ingest committer retries on its own timer, within
 *     its write timeout. busy = 1 means the write lock was not free in time
 *     (SQLite then ran it as PASSIVE) or a reader kept old frames (writers
 *     were held meanwhile): the next RESTART waits 1, 2, then 4 ticks, so a
 *     long reader does not hold writers on every tick, and a saturated
 *     writer is retried within 2 s. Both counters reset once the WAL is
 *     below the bound.
 * `journal_size_limit` on the writing connections then truncates a WAL file
 * left larger than `maxWalBytes` by a burst, at the rewinding writer's commit.
 *
 * Between ticks the thread also answers reads the receiver asks of it (OffLoopReads): the counts
 * of a /metrics scrape, which walk an index, stall this thread rather than the event loop.
 */
const CHECKPOINTER = `
const { parentPort, workerData } = require('node:worker_threads');
const { statSync } = require('node:fs');
const Database = require(workerData.driver);
const db = new Database(workerData.path, { fileMustExist: true });
const st = statSync(workerData.path, { bigint: true });
if (String(st.dev) !== workerData.dev || String(st.ino) !== workerData.ino) {
  db.close();
  throw new Error('the database file at ' + workerData.path + ' is no longer the one the receiver opened (moved or replaced since): no checkpoints');
}
db.pragma('busy_timeout = ' + workerData.restartWaitMs);
// The checkpoints' fsyncs of the database file and the WAL: F_FULLFSYNC on macOS, as the
// receiver's own connections (configure in connectionSettings.ts); a no-op elsewhere.
db.pragma('fullfsync = ON');
// The receiver's connections' page cache, not better-sqlite3's 16 MB, and emptied after each read
// asked here (OffLoopReads, shrink_memory): the job counts of a scrape at 300,000 jobs filled it,
// +17 MB RSS (120-124 -> 138-141 MB); with both, 116-127 MB, as without the reads.
db.pragma('cache_size = -' + workerData.cacheKib);
const pageSize = db.pragma('page_size', { simple: true });
const maxFrames = Math.max(1, Math.floor(workerData.maxWalBytes / pageSize));
const catchUpFrames = Math.min(1000, maxFrames);
const passive = () => db.pragma('wal_checkpoint(PASSIVE)')[0];
// Open on the right file: a thread started after its predecessor ended says it runs (CheckpointerThread).
parentPort.postMessage({ ready: true });
let skipRestarts = 0;
let restartBackoff = 1;
// By the monotonic clock (performance.now), as the ticks are: told by Date.now, a wall clock set
// back while the WAL was blocked silenced the reports for as long as the step (walBlockedClockBack.test.ts).
// A thread started after one ended while the WAL was blocked goes on from there (blockedForMs):
// else the receiver's gauge kept the old report, never ended, once the WAL was reset.
let blockedSince = workerData.blockedForMs === null ? null : performance.now() - workerData.blockedForMs;
let reportedAt = blockedSince ?? 0;
// Why the WAL is not reset, by r, the last checkpoint's result: a frame it could not copy
// (checkpointed < log) is one a reader's snapshot still needs. All copied: a reader at the WAL's
// end, or the write lock never free for the RESTART (writes back to back, a write transaction
// held open), which a look at the write lock tells apart (busy: writes).
function causeOf(r) {
  if (r.checkpointed < r.log) return 'reader';
  db.pragma('busy_timeout = 0');
  try {
    db.exec('BEGIN IMMEDIATE');
    db.exec('ROLLBACK');
    return 'reader';
  } catch (err) {
    return err && err.code === 'SQLITE_BUSY' ? 'writes' : 'reader';
  } finally {
    db.pragma('busy_timeout = ' + workerData.restartWaitMs);
  }
}
function noteBlocked(blocked, r) {
  const now = performance.now();
  const walBytes = 32 + r.log * (pageSize + 24);
  if (!blocked) {
    if (blockedSince !== null) parentPort.postMessage({ walBlocked: { since: null, blockedMs: now - blockedSince, walBytes, cause: null } });
    blockedSince = null;
    return;
  }
  if (blockedSince === null) blockedSince = reportedAt = now;
  else if (now - reportedAt < workerData.blockedReportMs) return;
  reportedAt = now;
  const cause = causeOf(r);
  const blockedMs = now - blockedSince;
  parentPort.postMessage({ walBlocked: { since: Date.now() - blockedMs, blockedMs, walBytes, cause } });
}
function checkpoint() {
  let r = passive();
  if (r.log < 0) return;
  for (let i = 0; i < 4 && r.log >= catchUpFrames; i++) {
    const before = r.log;
    const next = passive();
    // Another connection checkpointing now (log -1) says nothing of the WAL: the last pass decides.
    if (next.log < 0) break;
    r = next;
    if (r.log === before) break;
  }
  if (r.log < maxFrames) {
    skipRestarts = 0;
    restartBackoff = 1;
    return noteBlocked(false, r);
  }
  if (skipRestarts > 0) {
    skipRestarts--;
    return noteBlocked(true, r);
  }
  const restart = db.pragma('wal_checkpoint(RESTART)')[0];
  if (restart.busy) {
    skipRestarts = restartBackoff;
    restartBackoff = Math.min(restartBackoff * 2, 4);
    noteBlocked(true, restart.log < 0 ? r : restart);
  } else {
    restartBackoff = 1;
    noteBlocked(false, r);
  }
}
// Ticks that failed since the last that went through: the first to go through after them says so.
let failedTicks = 0;
// When the last tick ran, by the monotonic clock: told by Date.now, a wall clock set back (NTP
// stepping a restored VM's clock, \`date -s\`) made every tick look not due for as long as the step,
// and no checkpoint ran meanwhile (checkpointerClockBack.test.ts).
let tickedAt = performance.now();
function tick() {
  tickedAt = performance.now();
  try {
    checkpoint();
    if (failedTicks > 0) parentPort.postMessage({ recovered: failedTicks });
    failedTicks = 0;
  } catch (err) {
    failedTicks++;
    parentPort.postMessage({ message: String(err && err.message), code: (err && err.code) || null });
  }
}
// A read (below) that ran a tick due meanwhile leaves the timer's next one out, so that the
// RESTART backoff, counted in ticks, keeps its length in time.
const timer = setInterval(() => {
  if (performance.now() - tickedAt >= workerData.intervalMs / 2) tick();
}, workerData.intervalMs);
// Reads the parent asks for (OffLoopReads): run here, between ticks, so that a statement that walks
// a large range stalls this thread, not the event loop that answers deliveries. Read-only
// statements only (below); each prepared once. Node hands a worker up to 1,000 messages in a row without
// running its timers: with scrapes back to back (8 at once, 30-100 ms per count) the queue never
// emptied and no tick ran, the WAL grew to 34 MB over a 1 MB bound (jobCountsOffLoop.test.ts). So
// a read first runs the tick that is due.
const reads = new Map();
function answer(m) {
  if (performance.now() - tickedAt >= workerData.intervalMs) tick();
  try {
    let st = reads.get(m.sql);
    if (!st) {
      // A query, and one that writes nothing: \`reader\` alone (returns rows) let DELETE ... RETURNING
      // and PRAGMA journal_mode = DELETE through. A PRAGMA is refused before its prepare, which
      // already applies some (PRAGMA busy_timeout = 0 set this connection's, whose RESTART then
      // never waited), though the statement then says \`readonly\`.
      if (!/^\\s*(SELECT|WITH)\\b/i.test(m.sql)) throw new Error('not a query: ' + m.sql);
      st = db.prepare(m.sql);
      if (!st.reader || !st.readonly) throw new Error('not a read: ' + m.sql);
      reads.set(m.sql, st);
    }
    const rows = st.all();
    db.pragma('shrink_memory');
    parentPort.postMessage({ read: { id: m.id, rows } });
  } catch (err) {
    parentPort.postMessage({ read: { id: m.id, error: String(err && err.message) } });
  }
}
parentPort.on('message', (m) => {
  if (m && m.read) return answer(m.read);
  if (m !== 'stop') return;
  clearInterval(timer);
  try { passive(); } catch {}
  db.close();
  process.exit(0);
});
`;

export interface CheckpointerOptions {
  /** Milliseconds between checkpoints. Default 500. */
  intervalMs?: number;
  /** WAL size past which a RESTART checkpoint makes the next writer start the WAL over. Default 128 MiB. */
  maxWalBytes?: number;
  /** busy_timeout of the checkpointer: the lock waits of one RESTART (the write lock, then readers of old frames) share it. Default 10. */
  restartWaitMs?: number;
  /** While the WAL cannot be reset (WalBlocked), how often the thread says so again. Default 60000. */
  blockedReportMs?: number;
  /** How long a read asked of the thread (OffLoopReads) may take before the asker reads on its own connection. Default 2000. */
  readAnswerMs?: number;
  /** After the thread ended unasked, the pauses before another is started (RestartPauses). */
  restartPauses?: RestartPauses;
}

/**
 * The WAL is at or over `maxWalBytes` and the checkpoints cannot make the next writer start it
 * over: a reader holds a snapshot older than its end (another program's long read transaction),
 * or the write lock was never free for a RESTART. It then grows with every commit (10 MB/s at
 * 150 deliveries/s, measured) until that ends. Reported when it starts (`blockedMs` 0), every
 * `blockedReportMs` while it lasts, and once when it ends (`since` null).
 */
export interface WalBlocked {
  /** When it started, as a Date.now() time (the wall clock now, less blockedMs); null: it has ended. */
  since: number | null;
  /** How long it has lasted, by the monotonic clock. */
  blockedMs: number;
  walBytes: number;
  /**
   * Why, by the last checkpoint: `reader`, frames it could not copy (a reader's snapshot needs
   * them), or all copied and the write lock free (a reader at the WAL's end); `writes`, every
   * frame copied and the write lock taken (commits back to back: sustained load, another process
   * writing in a loop or holding a write transaction open). Null once it has ended.
   */
  cause: 'reader' | 'writes' | null;
}

/**
 * A checkpoint that failed (`stopped`: the checkpointer thread itself ended; another is started
 * after a pause), with `recovered` (how many ticks had failed) the first that went through after
 * failures, or with `restarted` (how many threads had ended) a thread started after one ended,
 * running on the right file: their end.
 */
export interface CheckpointProblem {
  message: string;
  code: string | null;
  stopped: boolean;
  recovered?: number;
  restarted?: number;
}

export const onStderr = (p: CheckpointProblem) =>
  process.stderr.write(
    p.restarted
      ? `wal checkpointer running again after ${p.restarted} stopped\n`
      : p.recovered
        ? `wal checkpoints succeed again after ${p.recovered} failed\n`
        : `wal checkpoint${p.stopped ? 'er stopped' : ' failed'}: ${p.message}\n`,
  );

/**
 * After a thread ended unasked, the pause before the next is started: `firstMs`, doubled after each
 * that ended again, up to `maxMs`; back to `firstMs` once one has run `steadyMs`.
 */
export interface RestartPauses {
  firstMs: number;
  maxMs: number;
  steadyMs: number;
}

export const CHECKPOINT_DEFAULTS: Required<CheckpointerOptions> = {
  intervalMs: 500,
  maxWalBytes: 128 * 1024 * 1024,
  restartWaitMs: 10,
  blockedReportMs: 60_000,
  readAnswerMs: 2000,
  restartPauses: { firstMs: 1000, maxMs: 60_000, steadyMs: 60_000 },
};

/**
 * The checkpointer thread, started again whenever it ends unasked. Without it nothing checkpoints
 * (the receiver's connections run with wal_autocheckpoint = 0): the WAL would grow with every
 * commit until the disk is full and ingest answers 503, for as long as the process runs. A thread
 * ends on an error outside a tick (each tick's own is reported and the next tick tries again): its
 * open failing (no file descriptor, no memory), its code throwing, or the file at the path no
 * longer the one opened, where every new thread ends the same way (the receiver's file watch
 * answers 503 meanwhile, DatabaseFileWatch) and the growing pauses bring the reports down to one
 * a minute after about the first minute (pauses of 1, 2, 4 ... 32 s, then 60 s).
 *
 * The thread opens the database by its path once it has booted (tens of ms, more under load), after
 * the connections it serves. A file moved to the path meanwhile (a restore under a starting
 * receiver) is another database, whose WAL-index SQLite would still share by path: the thread's
 * checkpoint and its close, the last on that file, copied the opened file's WAL into it
 * (integrity_check "wrong # of entries in index") and deleted that WAL. So it checks, before
 * reading anything, that the path names the file opened here (`opened`), and ends otherwise; a
 * path deleted meanwhile is not created anew (fileMustExist).
 */
export class CheckpointerThread {
  private worker: Worker | null = null;
  private pause: NodeJS.Timeout | null = null;
  private stopping = false;
  /** Threads that ended unasked since one last said it runs. */
  private ended = 0;
  /**
   * Since when the WAL is blocked, by the receiver's performance.now() (the last report's arrival less
   * its blockedMs; null: not, or no longer): the next thread goes on from it. Not WalBlocked.since,
   * a wall-clock time: a clock set back meanwhile made the next thread start the block at 0.
   */
  private walBlockedAt: number | null = null;
  private nextPauseMs: number;

  /**
   * Starts the first thread; throws if it cannot be started (out of memory or threads). `onThread`
   * is called with each thread started (OffLoopReads sends its reads to the latest).
   */
  constructor(
    private readonly path: string,
    private readonly opened: FileIdentity,
    private readonly opts: Required<CheckpointerOptions>,
    private readonly onProblem: (p: CheckpointProblem) => void,
    private readonly onWalBlocked: (b: WalBlocked) => void,
    private readonly onThread: (worker: Worker) => void,
  ) {
    this.nextPauseMs = opts.restartPauses.firstMs;
    this.start();
  }

  /** Ends the thread (a last PASSIVE checkpoint first), and starts no other. */
  async stop(): Promise<void> {
    this.stopping = true;
    if (this.pause) clearTimeout(this.pause);
    this.pause = null;
    const worker = this.worker;
    if (!worker || worker.threadId === -1) return;
    const exited = new Promise((r) => worker.once('exit', r));
    // unref'd while running so it never holds the process open; held while it finishes.
    worker.ref();
    worker.postMessage('stop');
    await exited;
  }

  /** The pause before the next thread, after one that ran `ranMs`; doubles the one after it. */
  private takePause(ranMs: number): number {
    const pauseMs = ranMs >= this.opts.restartPauses.steadyMs ? this.opts.restartPauses.firstMs : this.nextPauseMs;
    this.nextPauseMs = Math.min(pauseMs * 2, this.opts.restartPauses.maxMs);
    return pauseMs;
  }

  private startAfter(pauseMs: number): void {
    this.pause = setTimeout(() => {
      this.pause = null;
      if (this.stopping) return;
      try {
        this.start();
      } catch (err) {
        // Not started (out of memory or threads): as a thread that ended at once.
        this.onProblem({ message: (err as Error).message, code: (err as { code?: string }).code ?? null, stopped: true });
        this.ended++;
        this.startAfter(this.takePause(0));
      }
    }, pauseMs);
    this.pause.unref();
  }

  private start(): void {
    const driver = createRequire(import.meta.url).resolve('better-sqlite3');
    const identity = { dev: String(this.opened.dev), ino: String(this.opened.ino) };
    const blockedForMs = this.walBlockedAt === null ? null : performance.now() - this.walBlockedAt;
    const worker = new Worker(CHECKPOINTER, { eval: true, workerData: { path: resolve(this.path), driver, cacheKib: CACHE_KIB, ...identity, ...this.opts, blockedForMs } });
    const startedAt = performance.now();
    let errored = false;
    this.worker = worker;
    // A failing checkpointer must not take the receiver down: SQLite's WAL keeps every commit
    // regardless; only the file grows until the next checkpoint. Reported to onProblem.
    worker.on('error', (err) => {
      errored = true;
      this.onProblem({ message: err.message, code: (err as { code?: string }).code ?? null, stopped: true });
    });
    worker.on('exit', (code) => {
      if (this.stopping || worker !== this.worker) return;
      this.worker = null;
      // Ended without an error of its own (terminated, out of memory): said here.
      if (!errored) this.onProblem({ message: `the checkpointer thread ended (exit code ${code})`, code: null, stopped: true });
      this.ended++;
      this.startAfter(this.takePause(performance.now() - startedAt));
    });
    worker.on('message', (m: { message: string; code: string | null } | { walBlocked: WalBlocked } | { recovered: number } | { read: unknown } | { ready: true }) => {
      // Answers to reads are OffLoopReads' (its own listener).
      if ('read' in m) return;
      if ('ready' in m) {
        if (this.ended > 0) this.onProblem({ message: 'the checkpointer thread runs again', code: null, stopped: false, restarted: this.ended });
        this.ended = 0;
        return;
      }
      if ('walBlocked' in m) {
        this.walBlockedAt = m.walBlocked.since === null ? null : performance.now() - m.walBlocked.blockedMs;
        this.onWalBlocked(m.walBlocked);
      } else if ('recovered' in m) this.onProblem({ message: 'checkpoints succeed again', code: null, stopped: false, recovered: m.recovered });
      else this.onProblem({ message: String(m.message), code: m.code, stopped: false });
    });
    worker.unref();
    this.onThread(worker);
  }
}
