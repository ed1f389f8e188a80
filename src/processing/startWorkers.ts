import type { Config } from '../config/loadConfig.js';
import type { DatabaseFileWatch } from '../db/DatabaseFileWatch.js';
import { WORKERS_LOCK_SUFFIX } from '../db/databaseFiles.js';
import type { OpenDatabase } from '../db/openDatabase.js';
import { acquireWorkersLock, type WorkersLock } from '../db/workersLock.js';
import type { Logger } from '../observability/logger.js';
import type { JobQueue } from '../queue/JobQueue.js';
import type { FanOut } from '../sinks/FanOut.js';
import { backfillResultDigests } from './backfillDigests.js';
import type { ProcessingWorker } from './createProcessingWorkers.js';
import type { IngestFirst } from './IngestFirst.js';
import type { SourcePauses } from './SourcePauses.js';
import { StopDuringStart, whileLockHeld } from './whileLockHeld.js';
import type { WorkerSweeps } from './WorkerSweeps.js';

/** The workers lock, as the receiver's start, the workers' start and its stop hand it over. */
export interface WorkersLocks {
  /** Taken by the caller before the database was opened and migrated (AppDeps.workersLock), until the workers' start takes it over. */
  earlyLock: WorkersLock | null;
  /** Held while the workers run; released by the receiver's stop. */
  workersLock: WorkersLock | null;
}

export interface WorkersStartDeps {
  config: Config;
  logger: Logger;
  database: OpenDatabase;
  queue: JobQueue;
  pauses: SourcePauses;
  fanOut: FanOut;
  worker: ProcessingWorker;
  pacer: IngestFirst;
  sweeps: WorkerSweeps;
  fileWatch: DatabaseFileWatch;
  /** The file watch's once-a-second check (watchDatabaseFile). */
  watchFile: () => void;
  stopWatchingFile: () => void;
  /** Aborted by the receiver's stop (or interruptStart); only read here. */
  startStop: AbortController;
  run: WorkersLocks;
}

/**
 * The workers stopped where they are, their sweeps (every 5 minutes, and a prune in progress)
 * with them, for good: the database file found replaced, or the workers lock lost. Not drained:
 * nothing more of theirs may be written (into another file, or beside another process's workers).
 */
export function haltWorkers({ worker, fanOut, sweeps }: Pick<WorkersStartDeps, 'worker' | 'fanOut' | 'sweeps'>): void {
  void worker.stop();
  void fanOut.halt();
  sweeps.clearTimer();
  sweeps.abortPrune();
}

/**
 * Runs the queue's workers (processing and sinks) in this process. Only one process per
 * database runs workers (workersLock.ts), so the jobs it finds running were held by one that
 * is gone.
 */
export async function startWorkers({ config, logger, database, queue, pauses, fanOut, worker, pacer, sweeps, fileWatch, watchFile, stopWatchingFile, startStop, run }: WorkersStartDeps): Promise<void> {
  // Refused while another live process runs them: it would take that process's running jobs.
  const lock = run.earlyLock ?? acquireWorkersLock(database.sqlite.name);
  let processingStarted = false;
  watchFile();
  run.earlyLock = null;
  // Once the file is found replaced (or its -shm deleted: then it is the live file, written through a
  // wal-index no other process shares), the start writes no more into it: each step is skipped,
  // also one still waiting for the write lock. The watch's callback (app.ts) clears the sweeps'
  // timer only if it has started: a latch before startTimer() left it to run every 5 minutes.
  const unlessReplaced = <T>(step: () => Promise<T>, none: T) =>
    whileLockHeld(() => (fileWatch.problem === null ? step() : Promise.resolve(none)), startStop.signal, logger);
  try {
    // A restart may bring a new API key: every paused source is tried again, at once.
    const heldBack = await unlessReplaced(() => pauses.clearAll(), 0);
    if (heldBack > 0) logger.info({ jobs: heldBack }, 'paused sources are tried again: the jobs they held back run now');
    const filled = await unlessReplaced(() => backfillResultDigests(database.db), 0);
    if (filled > 0) logger.info({ events: filled }, 'events settled before migration 007 now have the digest of their stored result');
    const orphans = await unlessReplaced(() => queue.releaseOrphans(), 0);
    if (orphans > 0) logger.warn({ jobs: orphans }, 'jobs left running by a previous process run again');
    if (fileWatch.problem === null) await sweeps.sweepStrandedReads();
    if (fileWatch.problem === null) sweeps.startTimer();
    pacer.enabled = true;
    // The file found replaced during the start (its housekeeping may take seconds): the
    // workers were told to stop then, and must not start on the old file now. Nor once a stop
    // came during the start (runReceiver's interruptStart): it would only claim jobs to stop.
    processingStarted = fileWatch.problem === null && !startStop.signal.aborted;
    if (processingStarted) worker.start();
    await fanOut.start(startStop.signal);
  } catch (err) {
    // A StopDuringStart is not a failure: said below, as any stop during the start, and the
    // stop that follows releases the lock.
    if (!(err instanceof StopDuringStart)) {
      sweeps.clearTimer();
      // A `work` whose start failed must end: the file watch's timer is not unref'd.
      stopWatchingFile();
      await Promise.allSettled([worker.stop(), fanOut.stop()]);
      lock.release();
      throw err;
    }
  }
  run.workersLock = lock;
  if (fileWatch.problem !== null) {
    logger.warn('workers not started: the database file was found replaced during the start (see the error above); restart the receiver');
    return;
  }
  if (startStop.signal.aborted) {
    // Not 'workers started': the sink lanes did not start (fanOut.start), and the stop that
    // interrupted the start stops processing, if it began before the stop came.
    logger.info(processingStarted ? 'the stop came during the start: the sink lanes were not started, and processing stops with the receiver' : 'workers not started: the stop came during the start');
    return;
  }
  // Its lock file deleted under it, another process may take the lock and run workers beside these.
  lock.watch(() => {
    logger.error(
      { workers_lock: `${database.sqlite.name}${WORKERS_LOCK_SUFFIX}` },
      'the workers lock file was deleted or replaced, and another process now holds the lock on the file at its path and runs the workers: this process stops its workers (a `serve` goes on receiving deliveries). Never delete the lock file while a receiver runs: the kernel releases the lock when its process ends, so a refused start means a live process runs the workers',
    );
    haltWorkers({ worker, fanOut, sweeps });
  });
  logger.info({ concurrency: config.workerConcurrency, sinks: config.sinks.map((k) => k.name) }, 'workers started');
  // Not awaited: a long history is pruned a little at a time, beside the work.
  sweeps.prune();
}
