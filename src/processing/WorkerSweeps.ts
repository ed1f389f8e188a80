import type { Kysely } from 'kysely';
import type { Config } from '../config/loadConfig.js';
import type { Database } from '../db/schema.js';
import type { Logger } from '../observability/logger.js';
import { pruneFinishedJobs } from '../queue/pruneJobs.js';
import type { Clock } from '../util/clock.js';

/** How often the workers look for dead-lettered reads whose follow-up never committed (createStrandedReadSweep). */
const STRANDED_SWEEP_MS = 5 * 60_000;
/** Finished jobs deleted at most per sweep (pruneHistory): 20 transactions of about 15 ms each 5 minutes, up to 2.9 million a day. */
export const PRUNE_PER_SWEEP = 10_000;

export interface WorkerSweepsDeps {
  config: Pick<Config, 'jobRetentionMs'>;
  db: Kysely<Database>;
  clock: Clock;
  logger: Logger;
  /** Settles the dead reads whose follow-up never committed (createStrandedReadSweep); how many. */
  strandedReads: () => Promise<number>;
}

/**
 * The workers' housekeeping beside the work: the stranded-read sweep, at their start and every
 * STRANDED_SWEEP_MS, and the prune of finished jobs. Shared by the workers' start, which begins
 * them, and stop(), which ends them and awaits what is in flight (pruning, sweeping).
 */
export class WorkerSweeps {
  private strandedSweep: NodeJS.Timeout | null = null;
  pruning: Promise<void> = Promise.resolve();
  /** The periodic stranded-read sweep in flight, with the prune it starts. */
  sweeping: Promise<void> = Promise.resolve();
  /** Whether `sweeping` has not ended yet (the next period then lets it be). */
  private sweepInFlight = false;
  private readonly pruneStop = new AbortController();

  constructor(private readonly deps: WorkerSweepsDeps) {}

  /** Dead reads whose follow-up never committed (createStrandedReadSweep): settled now, said at warn. */
  async sweepStrandedReads(): Promise<void> {
    try {
      const n = await this.deps.strandedReads();
      if (n > 0) this.deps.logger.warn({ reads: n }, 'dead-lettered result reads whose results were still processing are given up now, and their events settled');
    } catch (err) {
      this.deps.logger.error({ err: (err as Error).message }, 'the sweep for dead-lettered reads failed; it runs again in a few minutes');
    }
  }

  /**
   * Finished jobs past JOB_RETENTION_DAYS, deleted a bounded number at a time (pruneFinishedJobs):
   * at the workers' start and with each sweep, so the table stops growing with history.
   */
  private async pruneHistory(): Promise<void> {
    if (this.deps.config.jobRetentionMs <= 0) return;
    const before = new Date(this.deps.clock.now() - this.deps.config.jobRetentionMs).toISOString();
    try {
      const { written: n } = await pruneFinishedJobs(this.deps.db, before, { maxRows: PRUNE_PER_SWEEP, pause: () => new Promise((r) => setTimeout(r, 10)), signal: this.pruneStop.signal });
      if (n > 0) this.deps.logger.info({ jobs: n, finished_before: before }, 'finished jobs past JOB_RETENTION_DAYS deleted');
    } catch (err) {
      this.deps.logger.error({ err: (err as Error).message }, 'deleting finished jobs past JOB_RETENTION_DAYS failed; it is tried again in a few minutes');
    }
  }

  /** The sweep every STRANDED_SWEEP_MS (unref'd), each followed by a prune. */
  startTimer(): void {
    this.strandedSweep = setInterval(() => {
      // One at a time: a sweep (or its prune) still running when the next period comes lets that
      // period pass. Begun beside it, the two gave up the same reads, and stop() awaited only the
      // later one, so the earlier could still write once the database was closed.
      if (this.sweepInFlight) return;
      this.sweepInFlight = true;
      // Awaited by stop() (clearing the interval does not end a sweep in flight): no sweep or
      // prune writes once the database is closed, and none begins after the stop.
      this.sweeping = this.sweepStrandedReads()
        .then(() => {
          if (!this.pruneStop.signal.aborted) this.prune();
          return this.pruning;
        })
        .finally(() => {
          this.sweepInFlight = false;
        });
    }, STRANDED_SWEEP_MS);
    this.strandedSweep.unref();
  }

  clearTimer(): void {
    if (this.strandedSweep) clearInterval(this.strandedSweep);
  }

  /**
   * A prune once the one in progress has ended (pruneHistory never rejects), not awaited: stop()
   * awaits `pruning`, the last. The start's prune still running when the first sweep came ran
   * beside the sweep's: both deleted the same history, and stop() awaited only the later.
   */
  prune(): void {
    this.pruning = this.pruning.then(() => (this.pruneStop.signal.aborted ? undefined : this.pruneHistory()));
  }

  /** The prune in progress ends at its next batch, and the sweeps start no other. */
  abortPrune(): void {
    this.pruneStop.abort();
  }
}
