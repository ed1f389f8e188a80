import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Hono } from 'hono';
import type { Config } from './config/loadConfig.js';
import type { CheckpointProblem, OpenDatabase } from './db/openDatabase.js';
import { openServerDatabase } from './db/openServerDatabase.js';
import { logCheckpointProblems } from './db/logCheckpointProblems.js';
import type { HttpClient } from './http/httpClient.js';
import { createHttpApp } from './http/createHttpApp.js';
import { workMetricsApp } from './http/workMetricsApp.js';
import { closeNow } from './http/closeNow.js';
import { closeWithinGrace } from './http/closeWithinGrace.js';
import { listen } from './http/listen.js';
import { WriteLockHold } from './ingest/WriteLockHold.js';
import type { IngestState } from './ingest/IngestState.js';
import { createIngestCommitter } from './ingest/createIngestCommitter.js';
import { watchDatabaseFile } from './db/watchDatabaseFile.js';
import type { WorkersLock } from './db/workersLock.js';
import { createStrandedReadSweep } from './handlers/fetchResult.js';
import type { ProcessingContext } from './handlers/ProcessingContext.js';
import pino from 'pino';
import { createLogger, type Logger } from './observability/logger.js';
import { createProcessingContext } from './processing/createProcessingContext.js';
import { createProcessingWorkers } from './processing/createProcessingWorkers.js';
import { startWorkers, type WorkersLocks } from './processing/startWorkers.js';
import { WorkerSweeps } from './processing/WorkerSweeps.js';
import { readMigrations, schemaVersion } from './db/migrate.js';
import { createMetrics } from './observability/metrics.js';
import type { FanOutOptions } from './sinks/FanOut.js';
import { systemClock, type Clock } from './util/clock.js';
import { isLoopbackHost } from './util/loopback.js';

export interface AppDeps {
  config: Config;
  clock?: Clock;
  logger?: Logger;
  /** An already open database; by default the one at config.databasePath is opened and migrated. */
  database?: OpenDatabase;
  /** Outbound HTTP of the hiring API clients and the http sinks (tests inject one to count or fault requests). */
  http?: HttpClient;
  /** Overrides of the processing timings (poll spacing, give-up bound). */
  processing?: Partial<Pick<ProcessingContext, 'minPollIntervalMs' | 'maxPollIntervalMs' | 'giveUpAfterMs' | 'notFoundAttempts'>>;
  /** Lease of a claimed job; an expired lease makes the job claimable again. */
  leaseMs?: number;
  /**
   * The workers lock (acquireWorkersLock), already held: taken by the caller before the database is
   * opened and migrated. startWorkers uses it; stop(), or a failed start(), releases it.
   */
  workersLock?: WorkersLock;
  /** Seams of the fan-out to sinks: stdout stream, retry schedule, idle poll. */
  sinks?: Partial<Pick<FanOutOptions, 'stdout' | 'backoff' | 'pollIntervalMs'>>;
}

export type App = ReturnType<typeof createApp>;


/** The receiver's logger: JSON lines on stdout, or on stderr when a stdout sink writes its messages there. */
export function receiverLogger(config: Config): Logger {
  return createLogger(config.logLevel, config.sinks.some((s) => s.type === 'stdout') ? pino.destination(2) : undefined);
}


/** Builds the receiver. Nothing listens until start(); stop() drains and closes everything. */
export function createApp(deps: AppDeps) {
  const { config } = deps;
  const clock = deps.clock ?? systemClock;
  // With a stdout sink, stdout is that sink's NDJSON stream: the logs go to stderr, so a reader
  // that stops reading the messages cannot block the process's logging (pino writes fd 1 in
  // place), and the stream holds messages only.
  const logger = deps.logger ?? receiverLogger(config);
  // The workers lock, when the caller took it before the database was opened and migrated
  // (runReceiver: an upgrade started beside the old version must not migrate under it).
  const run: WorkersLocks = { earlyLock: deps.workersLock ?? null, workersLock: null };
  let database: OpenDatabase;
  // Set once the metrics exist (below); a checkpoint runs first after 500 ms.
  let checkpointProblem = (p: CheckpointProblem) => logger.error({ code: p.code, err: p.message }, p.stopped ? 'WAL checkpointer stopped' : 'WAL checkpoint failed');
  try {
    database = deps.database ?? openServerDatabase(config.databasePath, (p) => checkpointProblem(p));
  } catch (err) {
    run.earlyLock?.release();
    throw err;
  }
  if (database.migrated.length > 0) logger.info({ migrations: database.migrated }, 'database migrated');
  const knownSchema = readMigrations().at(-1)?.version ?? 0;
  const schema = schemaVersion(database.sqlite);
  if (schema > knownSchema) {
    logger.warn({ schema_version: schema, known: knownSchema }, 'the database was migrated by a newer version of the receiver, whose newer migrations declare this version compatible: running on it (a rollback)');
  }
  for (const w of config.warnings ?? []) logger.warn(`configuration: ${w}`);
  if (database.ingestWait.unavailable) {
    // Deliveries are still stored and processed; only the hand-over of the write lock to
    // waiting deliveries across processes is lost.
    logger.warn({ reason: database.ingestWait.unavailable }, 'ingest-wait file unavailable: processing will not let waiting deliveries go first');
  }
  const metrics = createMetrics(config.sources.map((s) => s.name));
  checkpointProblem = logCheckpointProblems(metrics, logger);

  const { fileWatch, watchFile, stopWatchingFile } = watchDatabaseFile(database, logger, () => {
    void worker.stop();
    void fanOut.halt();
  });

  const ingestState: IngestState = { draining: false, storageFailure: null };
  /** Since when deliveries have found the write lock held by another connection (for /readyz). */
  const lockHold = new WriteLockHold();
  const committer = createIngestCommitter({
    config,
    database,
    fileWatch,
    clock,
    logger,
    metrics,
    lockHold,
    state: ingestState,
    onCommitted: () => {
      pacer.noteIngest();
      // New events only make folds due; a fold that queues a read wakes the fetcher.
      folder.kick();
    },
    onLockBusy: () => pacer.noteLockWait(),
  });

  const { queue, pauses, ownHttp, fanOut, processingShutdown, processing } = createProcessingContext({ config, database, clock, logger, metrics, deps });
  const { fetchDeadLetter, pacer, folder, worker } = createProcessingWorkers({ config, queue, pauses, clock, logger, metrics, processing });

  const { app, metricsApp, onError } = createHttpApp({ config, database, clock, logger, metrics, committer, lockHold, fileWatch, state: ingestState });

  let server: Server | null = null;
  let metricsServer: Server | null = null;
  /** Aborted by a stop (or interruptStart): the start's sink housekeeping ends at its next batch. */
  const startStop = new AbortController();
  const sweeps = new WorkerSweeps({ config, db: database.db, clock, logger, strandedReads: createStrandedReadSweep(processing, fetchDeadLetter) });

  const startReceiverWorkers = () =>
    startWorkers({ config, logger, database, queue, pauses, fanOut, worker, pacer, sweeps, fileWatch, watchFile, stopWatchingFile, startStop, run });

  /** Where this process can be reached on its own host (a wildcard listen answers on 127.0.0.1). */
  const reachableHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;

  /** /metrics on METRICS_PORT, when it is set (a no-op otherwise), for start(). */
  async function startMetrics(): Promise<void> {
    if (metricsApp && config.metricsPort !== null && !metricsServer) await listenMetrics(metricsApp, config.metricsPort, 'METRICS_PORT');
  }

  /** A `work` process's own counters on WORK_METRICS_PORT (workMetricsApp). */
  async function startWorkMetrics(port: number): Promise<string> {
    return listenMetrics(workMetricsApp(metrics, onError), port, 'WORK_METRICS_PORT');
  }

  async function listenMetrics(metricsHono: Hono, port: number, portVar: string): Promise<string> {
    const m = await listen(metricsHono.fetch, port, portVar, { config, logger, metrics });
    m.requestTimeout = config.requestTimeoutMs;
    m.headersTimeout = Math.min(config.requestTimeoutMs, 20_000);
    metricsServer = m;
    return `http://${reachableHost}:${(m.address() as AddressInfo).port}/metrics`;
  }

  /**
   * Listens (and on METRICS_PORT), then starts the workers: a receiver that cannot listen never
   * touches the queue.
   */
  async function start(): Promise<{ port: number; url: string; metricsUrl: string }> {
    let s: Server;
    try {
      s = await listen(app.fetch, config.port, 'PORT', { config, logger, metrics });
    } catch (err) {
      run.earlyLock?.release();
      run.earlyLock = null;
      throw err;
    }
    // A client trickling bytes is cut off; keep-alive sockets from the service are reused.
    s.requestTimeout = config.requestTimeoutMs;
    s.headersTimeout = Math.min(config.requestTimeoutMs, 20_000);
    s.keepAliveTimeout = 65_000;
    server = s;
    watchFile();
    try {
      await startMetrics();
      if (config.workerConcurrency > 0) await startReceiverWorkers();
    } catch (err) {
      // Leave nothing running: the workers that did start, the servers with their connections,
      // a workers lock the workers never took over, and the file watch's timer (not unref'd).
      stopWatchingFile();
      run.earlyLock?.release();
      run.earlyLock = null;
      server = null;
      const m = metricsServer;
      metricsServer = null;
      await Promise.all([closeNow(s), m && closeNow(m)]);
      throw err;
    }
    const { port } = s.address() as AddressInfo;
    const metricsPort = metricsServer ? (metricsServer.address() as AddressInfo).port : port;
    logger.info(
      { port, host: config.host, ...(metricsServer ? { metricsPort } : {}), sources: config.sources.map((src) => src.name) },
      'receiver listening',
    );
    // Said at every start rather than refused: the documented default (the image and fly.toml set METRICS_PORT).
    if (!metricsServer && !isLoopbackHost(config.host)) {
      logger.warn(
        { port, host: config.host },
        'GET /metrics is served on the webhook port, which listens beyond this machine: anyone who reaches it reads the source and sink names, queue depths and the Node version, and each scrape queries the database; set METRICS_PORT to serve it on a port of its own',
      );
    }
    return { port, url: `http://${reachableHost}:${port}`, metricsUrl: `http://${reachableHost}:${metricsPort}/metrics` };
  }

  /** Stop accepting, let in-flight requests finish and commit, then close the database. Once. */
  let stopping: Promise<void> | null = null;
  function stop(): Promise<void> {
    startStop.abort();
    stopping ??= stopOnce();
    return stopping;
  }

  /**
   * A stop is coming, once the start in progress returns (runReceiver at a signal): the start's
   * sink housekeeping ends at its next batch, and the sink lanes are not started. Its batches
   * commit whole: the next start finishes it.
   */
  function interruptStart(): void {
    startStop.abort();
  }

  const abandonCommits = () => committer.abandon('the receiver was stopping (SHUTDOWN_GRACE_MS passed) before the write lock was free');

  async function stopOnce(): Promise<void> {
    // One grace for everything in progress: deliveries being received, messages being sent.
    const graceEnds = performance.now() + config.shutdownGraceMs;
    ingestState.draining = true;
    const s = server;
    server = null;
    // A scrape in progress is not worth waiting for.
    const m = metricsServer;
    metricsServer = null;
    const metricsClosed = m ? closeNow(m) : Promise.resolve();
    if (s) await closeWithinGrace(s, config.shutdownGraceMs, logger, abandonCommits);
    // Deliveries still waiting for the write lock (another process holds it) wait within the
    // grace, not each up to WRITE_TIMEOUT_MS: past it they fail uncommitted, and are redelivered.
    const cutCommits = setTimeout(abandonCommits, Math.max(0, graceEnds - performance.now()));
    await Promise.all([committer.drain(), metricsClosed]);
    clearTimeout(cutCommits);
    const left = Math.max(0, graceEnds - performance.now());
    const abortReads = setTimeout(() => processingShutdown.abort(), left);
    sweeps.clearTimer();
    stopWatchingFile();
    sweeps.abortPrune();
    try {
      await Promise.all([worker.stop(), fanOut.stop(left), sweeps.pruning, sweeps.sweeping]);
    } finally {
      clearTimeout(abortReads);
    }
    run.workersLock?.release();
    run.workersLock = null;
    run.earlyLock?.release();
    run.earlyLock = null;
    ownHttp?.close();
    await database.close();
    const aside = fileWatch.setAsideStaleWal(new Date(clock.now()));
    if (aside !== null) {
      logger.warn(
        { wal: aside, database_path: database.sqlite.name },
        'the -wal of the database file that was replaced was renamed, so that the next start does not apply it to the file now at DATABASE_PATH: delete it, unless you recover the old file (it is that file\'s -wal)',
      );
    }
    logger.info('receiver stopped');
  }

  return { app, start, startWorkers: startReceiverWorkers, startWorkMetrics, stop, interruptStart, database, metrics, logger, queue, worker, pauses, fanOut };
}
