import { pruneFinishedJobs } from '../../queue/pruneJobs.js';
import { betweenBatches, openCliDatabase } from '../cliDatabase.js';
import { databasePathOf } from '../cliConfig.js';
import { sayHowFar } from '../errors.js';
import { printJson, type CliIo } from '../io.js';
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
 * short transactions with a pause between them, so its ingest commits get the lock meanwhile.
 */
export async function runPrune(io: CliIo, o: PruneOptions): Promise<number> {
  const progress = progressFor(io, o.progress);
  const database = openCliDatabase(databasePathOf(io.env, o.database), { readOnly: o.dryRun === true });
  try {
    const before = new Date(Date.now() - o.olderThan).toISOString();
    const onBatch = (deleted: number) => progress.report(() => `prune: ${count(deleted)} jobs deleted so far`);
    const jobs = await sayHowFar(
      io,
      progress,
      () => pruneFinishedJobs(database.db, before, { dryRun: o.dryRun === true, pause: betweenBatches, onBatch }),
      (n) => `prune: stopped part-way by the error below: ${count(n)} finished job${n === 1 ? '' : 's'} deleted before it (they stay deleted); run it again for the rest`,
    );
    progress.end();
    if (o.json) printJson(io, { dry_run: Boolean(o.dryRun), finished_before: before, jobs });
    else io.out(`${o.dryRun ? 'would delete' : 'deleted'} ${jobs} finished job${jobs === 1 ? '' : 's'} (state done, finished before ${before}); jobs still to run and dead letters are kept`);
    return 0;
  } finally {
    progress.end();
    await database.close();
  }
}
