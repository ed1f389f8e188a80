import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { CheckpointProblem } from './checkpointer.js';
import { primarySqliteCode } from './sqliteHelpers.js';

/**
 * What the receiver does with a failed WAL checkpoint: logged, and counted by code once the metrics
 * exist (null: the first ones, in the start-up before them).
 */
export function logCheckpointProblems(metrics: Metrics | null, logger: Logger): (p: CheckpointProblem) => void {
  let checkpointLogged = { code: '', atMs: 0, since: 0 };
  return (p) => {
    // A thread started after one ended, open on the right file: checkpoints run again.
    if (p.restarted) {
      logger.info({ stopped_threads: p.restarted }, 'WAL checkpointer running again');
      checkpointLogged = { code: '', atMs: 0, since: 0 };
      return;
    }
    // Their end, so the log says the WAL is being reset again (the counter only stops rising).
    if (p.recovered) {
      logger.info({ failed_checkpoints: p.recovered }, 'WAL checkpoints succeed again');
      checkpointLogged = { code: '', atMs: 0, since: 0 };
      return;
    }
    // The primary result code (SQLITE_IOERR for SQLITE_IOERR_WRITE, ...): a small set of series.
    const code = primarySqliteCode(p.code) ?? 'error';
    metrics?.checkpointErrors.inc({ code });
    // The WAL keeps every commit; it only grows until a checkpoint succeeds. A full disk shows here
    // first, at every tick (twice a second): logged when the code changes, then once a minute. A
    // thread that ended is said each time: another starts after a pause of 1 s, doubled up to a minute.
    const now = Date.now();
    if (!p.stopped && code === checkpointLogged.code && now - checkpointLogged.atMs < 60_000) return void checkpointLogged.since++;
    logger.error(
      { code: p.code, err: p.message, ...(checkpointLogged.since > 0 ? { failed_since_last_line: checkpointLogged.since } : {}) },
      p.stopped ? 'WAL checkpointer stopped: the WAL grows until another thread starts' : 'WAL checkpoint failed: the WAL grows until one succeeds',
    );
    checkpointLogged = { code, atMs: now, since: 0 };
  };
}
