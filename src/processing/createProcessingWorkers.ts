import type { Config } from '../config/loadConfig.js';
import { createFetchDeadLetterHandler, createFetchResultHandler, movePollsBack } from '../handlers/fetchResult.js';
import { createNewEventFolder } from '../handlers/foldNewEvents.js';
import { createProcessEventHandler, PROCESS_EVENT_BATCH } from '../handlers/processEvent.js';
import type { ProcessingContext } from '../handlers/ProcessingContext.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { JobQueue } from '../queue/JobQueue.js';
import { JobKind } from '../queue/jobKinds.js';
import { Worker, type WorkerOptions } from '../queue/Worker.js';
import type { Clock } from '../util/clock.js';
import { IngestFirst } from './IngestFirst.js';
import type { SourcePauses } from './SourcePauses.js';

export interface ProcessingWorkersDeps {
  config: Config;
  queue: JobQueue;
  pauses: SourcePauses;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  processing: ProcessingContext;
}

/**
 * The processing workers: the fold worker (new events, process_event retries and replays) and
 * the fetch worker (result reads), sharing one pacer; `worker` drives both as one.
 */
export function createProcessingWorkers({ config, queue, pauses, clock, logger, metrics, processing }: ProcessingWorkersDeps) {
  const fetchDeadLetter = createFetchDeadLetterHandler(processing);
  const newEvents = createNewEventFolder(processing, {
    logger,
    onFolded: (outcome) => {
      metrics.jobsSettled.inc({ kind: JobKind.processEvent, outcome });
      if (outcome === 'done') fetcher.kick();
    },
  });
  // One pacer for both workers. A fetch is charged its wall time (network wait included), so
  // under load finished reads also hold back folds. Measured at 2,500/s: one pacer per
  // worker gave p50 27 ms / p99 82 ms against 4-5 / 20-35 ms with one shared pacer. Except while
  // the loop has room (under 80% busy): there the folds wait on their own charges only, or the
  // reads' wall time held them to one batch per 50 ms (IngestFirst).
  const pacer = new IngestFirst({ share: config.processingShare / 100 });
  const onJobSettled: WorkerOptions['onJobSettled'] = (job, outcome) => metrics.jobsSettled.inc({ kind: job.kind, outcome });
  // Folding events is local work, done in batches (one transaction per claim); fetching results
  // is network-bound and runs WORKER_CONCURRENCY reads at once. Two workers, so a batch of folds
  // never takes the slots of the reads, nor the reads those of the folds.
  const folder = new Worker({
    queue,
    clock,
    logger,
    gate: pauses,
    // Never held back by a paused source: folding needs no API key.
    gatedKinds: [],
    onJobSettled: (job, outcome) => {
      onJobSettled(job, outcome);
      if (outcome === 'done') fetcher.kick();
    },
    concurrency: PROCESS_EVENT_BATCH,
    // Folds are held back from 60% loop utilization, reads from 90%; under 80%, held folds wait
    // on their own charges only (see IngestFirst).
    pacer: pacer.from(0.6),
    // New events, from the processing cursor; process_event jobs are retries and replays.
    source: newEvents,
    handlers: { [JobKind.processEvent]: createProcessEventHandler(processing) },
  });
  const fetcher = new Worker({
    queue,
    clock,
    logger,
    gate: pauses,
    // A refused key pauses the reads from the service only; events keep being folded into applications.
    gatedKinds: [JobKind.fetchResult],
    onDeadLetter: async (job, error) => {
      if (job.kind === JobKind.fetchResult) await fetchDeadLetter(job, error);
    },
    onJobSettled,
    onClockStepBack: async (now, stepMs) => {
      await movePollsBack(processing, now, stepMs);
      await pauses.moveBack(now, stepMs);
    },
    concurrency: Math.max(1, config.workerConcurrency),
    pacer,
    handlers: { [JobKind.fetchResult]: createFetchResultHandler(processing) },
  });
  return { fetchDeadLetter, pacer, folder, worker: bothWorkers(folder, fetcher) };
}

/** The `worker` of createProcessingWorkers (bothWorkers). */
export type ProcessingWorker = ReturnType<typeof bothWorkers>;

/** The processing workers as one (start, stop, wake, and run-until-idle for tests and the CLI). */
function bothWorkers(folder: Worker, fetcher: Worker) {
  return {
    start: () => {
      folder.start();
      fetcher.start();
    },
    stop: async () => {
      await Promise.all([folder.stop(), fetcher.stop()]);
    },
    kick: () => {
      folder.kick();
      fetcher.kick();
    },
    /** The sources they hold (the fetcher's; the folder is never gated, so it holds none). */
    heldSources: (now: number) => [...folder.heldSources(now), ...fetcher.heldSources(now)],
    async runUntilIdle(maxJobs = 10_000): Promise<number> {
      let total = 0;
      for (;;) {
        const folded = await folder.runUntilIdle(maxJobs - total);
        const fetched = total + folded < maxJobs ? await fetcher.runUntilIdle(maxJobs - total - folded) : 0;
        total += folded + fetched;
        if (folded + fetched === 0 || total >= maxJobs) return total;
      }
    },
  };
}
