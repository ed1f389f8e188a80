import { pruneFinishedJobs } from '../../queue/pruneJobs.js';
import { batchPause } from '../batchPause.js';
import { openCliDatabase } from '../cliDatabase.js';
import { databasePathOf } from '../cliConfig.js';
import { saidStopped, sayHowFar, stoppedBySignal } from '../errors.js';
import { printJson, type CliIo } from '../io.js';
import { stopOnInterrupt } from '../onInterrupt.js';
import { count, progressFor } from '../progress.js';

export interface PruneOptions {
  database?: string;
  olderThan: number;
  dryRun?: boolean;
  json?: boolean;
  /** Progress lines on stderr also when it is not a terminal. */
  progress?: boolean;
}

/**
 * Deletes finished jobs older than --older-than (pruneFinishedJobs), next to a running receiver:
 * short transactions with a pause between them, so its writers get the lock meanwhile (batchPause).
 * SIGINT or SIGTERM stops it after the transaction in flight, saying how many it deleted (a dry
 * run, which changes nothing, is ended at once as before).
 */
export async function runPrune(io: CliIo, o: PruneOptions): Promise<number> {
  const progress = progressFor(io, o.progress);
  const path = databasePathOf(io.env, o.database);
  const database = openCliDatabase(path, { readOnly: o.dryRun === true });
  const stop = o.dryRun ? undefined : stopOnInterrupt();
  const between = batchPause(path);
  try {
    const before = new Date(Date.now() - o.olderThan).toISOString();
    const onBatch = (deleted: number) => progress.report(() => `prune: ${count(deleted)} jobs deleted so far`);
    const jobsDeleted = (n: number) => `${count(n)} finished job${n === 1 ? '' : 's'} deleted`;
    const { written: jobs, stopped } = await sayHowFar(
      io,
      progress,
      () => pruneFinishedJobs(database.db, before, { dryRun: o.dryRun === true, pause: between.pause, onBatch, signal: stop?.signal }),
      (n) => `prune: stopped part-way by the error below: ${jobsDeleted(n)} before it (they stay deleted); run it again for the rest`,
    );
    progress.end();
    const by = stopped ? stop?.by() : undefined;
    if (by) {
      return saidStopped(io, by, stoppedBySignal('prune', by, jobs, jobsDeleted(jobs), 'they stay deleted'), o.json ? { dry_run: false, finished_before: before, jobs } : undefined);
    }
    if (o.json) printJson(io, { dry_run: Boolean(o.dryRun), finished_before: before, jobs });
    else io.out(`${o.dryRun ? 'would delete' : 'deleted'} ${jobs} finished job${jobs === 1 ? '' : 's'} (state done, finished before ${before}); jobs still to run and dead letters are kept`);
    return 0;
  } finally {
    stop?.off();
    between.close();
    progress.end();
    await database.close();
  }
}
