import type { Config } from '../config/loadConfig.js';
import { DatabaseReplacedError, type DatabaseFileWatch } from '../db/DatabaseFileWatch.js';
import type { OpenDatabase } from '../db/openDatabase.js';
import { isSqliteBusy } from '../db/sqliteHelpers.js';
import type { Logger } from '../observability/logger.js';
import { RepeatedFailureLog } from '../observability/repeatedFailure.js';
import type { Metrics } from '../observability/metrics.js';
import { monotonicClock, type Clock } from '../util/clock.js';
import { createIngestWriter, type IngestItem, type IngestOutcome } from './eventStore.js';
import { GroupCommitter } from './GroupCommitter.js';
import type { IngestState } from './IngestState.js';
import type { WriteLockHold } from './WriteLockHold.js';

export interface IngestCommitterDeps {
  config: Pick<Config, 'writeTimeoutMs'>;
  database: OpenDatabase;
  fileWatch: DatabaseFileWatch;
  clock: Clock;
  logger: Logger;
  metrics: Metrics;
  lockHold: WriteLockHold;
  /** storageFailure is set here (for /readyz). */
  state: IngestState;
  /** After each committed batch, last (the processing pacer and the fold worker hear of it). */
  onCommitted: () => void;
  /** A batch found the write lock held by another connection (the processing pacer holds back). */
  onLockBusy: () => void;
}

/**
 * The group committer of the deliveries: batches written into the database opened at start,
 * refused once the file watch finds DATABASE_PATH names another file, each outcome counted,
 * logged and told to /readyz (lockHold, state.storageFailure).
 */
export function createIngestCommitter({ config, database, fileWatch, clock, logger, metrics, lockHold, state, onCommitted, onLockBusy }: IngestCommitterDeps) {
  const ingestWrite = createIngestWriter(database.ingestSqlite);
  // A full disk fails every batch for as long as it lasts, each delivery already logged at error
  // with its `storage_error`: this line says the cause and what to do when it starts or changes,
  // then once a minute with a count, and its end at info.
  const failures = new RepeatedFailureLog({ logger, clock, level: 'error', msg: 'ingest transaction failed', recovered: 'ingest transactions commit again' });
  return new GroupCommitter<IngestItem, IngestOutcome>({
    write: (items) => {
      if (fileWatch.problem !== null) throw new DatabaseReplacedError(fileWatch.problem);
      const results = ingestWrite(items);
      // After the commit, before any answer: a batch committed into a file no longer at
      // DATABASE_PATH would be lost at the next start, so it is answered 503 and redelivered.
      const problem = fileWatch.checkDatabase();
      if (problem !== null) throw new DatabaseReplacedError(problem);
      return results;
    },
    isBusy: isSqliteBusy,
    // WRITE_TIMEOUT_MS by the monotonic clock: by the wall clock, a step back (NTP, a VM resumed)
    // while another process held the lock kept a delivery waiting that much longer, long after the
    // service gave up on it, and a step forward answered 503 at once one whose lock came free soon.
    clock: monotonicClock,
    timeoutMs: config.writeTimeoutMs,
    onBatch: (size, durationMs) => {
      state.storageFailure = null;
      failures.succeeded();
      lockHold.obtained();
      database.ingestWait.committed();
      metrics.batchSize.observe(size);
      metrics.commitDuration.observe(durationMs / 1000);
      onCommitted();
    },
    onError: (err, size) => {
      // Said once, by the file watch; /readyz asks it.
      if (err instanceof DatabaseReplacedError) return;
      if (isSqliteBusy(err)) {
        // Deliveries wait for another process's lock: processing, here or in a `work` process,
        // must not take it first.
        database.ingestWait.waiting(Date.now());
        lockHold.held(clock.now());
        onLockBusy();
        logger.debug({ batch: size }, 'ingest write lock busy; retrying');
      } else {
        state.storageFailure = { code: (err as { code?: string }).code ?? 'error', atMs: clock.now() };
        // Not a held lock: this write failed otherwise (a full disk); storageFailure says so.
        lockHold.obtained();
        failures.failed(err, { batch: size });
      }
    },
    onLockWaited: (waitedMs) => metrics.ingestLockWait.observe(waitedMs / 1000),
    // /readyz: deliveries are being refused for the lock (a commit a probe sees since does not end that).
    onLockTimedOut: () => lockHold.refused(clock.now(), config.writeTimeoutMs),
    onBatchError: (err) => logger.error({ err: (err as Error).message }, 'bookkeeping after an ingest commit failed (its deliveries were answered)'),
  });
}
