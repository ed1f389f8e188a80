import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Hono } from 'hono';
import pino from 'pino';
import type { Config } from './config/loadConfig.js';
import type { CheckpointProblem, WalBlocked } from './db/checkpointer.js';
import { logCheckpointProblems } from './db/logCheckpointProblems.js';
import { logWalBlocked } from './db/logWalBlocked.js';
import { readMigrations, schemaVersion, type Migration } from './db/migrate.js';
import type { OpenDatabase } from './db/openDatabase.js';
import { openServerDatabase } from './db/openServerDatabase.js';
import { watchDatabaseFile } from './db/watchDatabaseFile.js';
import { acquireWorkersLock, type WorkersLock } from './db/workersLock.js';
import { createStrandedReadSweep } from './handlers/fetchResult.js';
import type { ProcessingContext } from './handlers/ProcessingContext.js';
import { closeNow } from './http/closeNow.js';
import { closeWithinGrace } from './http/closeWithinGrace.js';
import { createHttpApp } from './http/createHttpApp.js';
import type { HttpClient } from './http/httpClient.js';
import { listen } from './http/listen.js';
import { workMetricsApp } from './http/workMetricsApp.js';
import { createIngestCommitter } from './ingest/createIngestCommitter.js';
import type { IngestState } from './ingest/IngestState.js';
import { WriteLockHold } from './ingest/WriteLockHold.js';
import { createLogger, type Logger } from './observability/logger.js';
import { createMetrics } from './observability/metrics.js';
import { RefusalLog } from './observability/RefusalLog.js';
import { createProcessingContext } from './processing/createProcessingContext.js';
import { createProcessingWorkers } from './processing/createProcessingWorkers.js';
import { haltWorkers, startWorkers, type WorkersLocks } from './processing/startWorkers.js';
import { WorkerSweeps } from './processing/WorkerSweeps.js';
import { sinkJobKind } from './sinks/enqueueDeliveries.js';
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

/** What start and stop share, set and cleared as the receiver runs and stops. */
interface RunState extends WorkersLocks {
  /** The webhook server, from start() until stop() takes it. */
  server: Server | null;
  /** The server of METRICS_PORT (or WORK_METRICS_PORT), from its listen until stop() takes it. */
  metricsServer: Server | null;
  /** The one stop (stopOnce), once stop() is called. */
  stopping: Promise<void> | null;
  /** Says the counts of refused requests no later line carried (RefusalLog.sayUnsaid), from start() to stop(). */
  refusalsTimer: NodeJS.Timeout | null;
}

/** How often the counts of refused requests are looked at: said 60 to 65 s after the first line of their kind's minute. */
const REFUSAL_COUNTS_CHECK_MS = 5_000;

/** Builds the receiver. Nothing listens until start(); stop() drains and closes everything. */
export function createApp(deps: AppDeps) {
  const r = buildReceiver(deps);
  const { app, database, metrics, logger, queue, worker, pauses, fanOut, pacer } = r;
  return {
    app,
    start: () => start(r),
    startWorkers: () => startWorkers(r),
    startWorkMetrics: (port: number) => startWorkMetrics(r, port),
    stop: () => stop(r),
    interruptStart: () => interruptStart(r),
    database,
    metrics,
    logger,
    queue,
    worker,
    pauses,
    fanOut,
    /** The processing pacer: the deliveries' handlers tell it their time on the event loop. */
    pacer,
  };
}

/** The receiver's parts, built and wired, and the state its start and stop share (`run`). */
type Receiver = ReturnType<typeof buildReceiver>;

function buildReceiver(deps: AppDeps) {
  const { config } = deps;
  const clock = deps.clock ?? systemClock;
  // With a stdout sink, stdout is that sink's NDJSON stream: the logs go to stderr, so a reader
  // that stops reading the messages cannot block the process's logging (pino writes fd 1 in
  // place), and the stream holds messages only.
  const logger = deps.logger ?? receiverLogger(config);
  const run: RunState = {
    // The workers lock, when the caller took it before the database was opened and migrated
    // (runReceiver: an upgrade started beside the old version must not migrate under it).
    earlyLock: deps.workersLock ?? null,
    workersLock: null,
    server: null,
    metricsServer: null,
    stopping: null,
    refusalsTimer: null,
  };
  // Counted too once the metrics exist (below); a checkpoint runs first after 500 ms.
  let checkpointProblem = logCheckpointProblems(null, logger);
  let walBlocked = (_b: WalBlocked) => {};
  const database = openReceiverDatabase(deps, logger, run, (p) => checkpointProblem(p), (b) => walBlocked(b));
  const metrics = createMetrics(config.sources.map((s) => s.name));
  checkpointProblem = logCheckpointProblems(metrics, logger);
  walBlocked = logWalBlocked(metrics, logger);

  const { fileWatch, watchFile, stopWatchingFile } = watchDatabaseFile(database, logger, () => haltWorkers({ worker, fanOut, sweeps }));

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

  /** The sources the workers of this process hold now (a Retry-After, the outage breaker): in their memory, for /metrics and /readyz. */
  const heldSources = (now: number) => [...worker.heldSources(now), ...fanOut.heldSources(now)];
  // At 0 while not held only where the workers run: a `serve` with WORKER_CONCURRENCY=0 cannot
  // know (the `work` process beside it reports them on WORK_METRICS_PORT), nor its /readyz.
  const runsWorkers = config.workerConcurrency > 0;
  // Each for the reasons that can hold it: the outage breaker holds a source's reads only (the
  // sinks' failures are never marked an outage), so a sink's `outage` series would be 0 for ever.
  const holdSeries = runsWorkers
    ? [
        ...config.sources.flatMap((s) => [{ source: s.name, reason: 'retry_after' as const }, { source: s.name, reason: 'outage' as const }]),
        ...config.sinks.map((s) => ({ source: sinkJobKind(s.name), reason: 'retry_after' as const })),
      ]
    : [];
  metrics.sourceHolds.read = () => {
    const now = clock.now();
    return { now, holds: heldSources(now), series: holdSeries };
  };

  // The lines of refused requests, throttled (RefusalLog): the counts of a flood that stopped are
  // said by a timer while the receiver listens, and at its stop.
  const refusals = new RefusalLog(logger, clock);
  const { app, metricsApp, onError } = createHttpApp({ config, database, clock, logger, metrics, refusals, committer, lockHold, fileWatch, state: ingestState, onLoopWork: (ms) => pacer.noteDeliveryWork(ms), ...(runsWorkers ? { heldSources } : {}) });

  /** Aborted by a stop (or interruptStart): the start's sink housekeeping ends at its next batch. */
  const startStop = new AbortController();
  const sweeps = new WorkerSweeps({ config, db: database.db, clock, logger, strandedReads: createStrandedReadSweep(processing, fetchDeadLetter) });

  /** Where this process can be reached on its own host (a wildcard listen answers on 127.0.0.1). */
  const reachableHost = config.host === '0.0.0.0' || config.host === '::' ? '127.0.0.1' : config.host;

  return {
    config, clock, logger, database, metrics, fileWatch, watchFile, stopWatchingFile, ingestState, committer,
    queue, pauses, ownHttp, fanOut, processingShutdown, pacer, worker, app, metricsApp, onError, startStop, sweeps, reachableHost, run, refusals,
  };
}

/** The database (opened and migrated unless deps.database), and what is to be said about it and the configuration. */
function openReceiverDatabase(
  deps: AppDeps,
  logger: Logger,
  run: RunState,
  onCheckpointProblem: (p: CheckpointProblem) => void,
  onWalBlocked: (b: WalBlocked) => void,
): OpenDatabase {
  const { config } = deps;
  let database: OpenDatabase;
  const progress = migrationProgress(logger);
  try {
    database = deps.database ?? openServerDatabase(config.databasePath, onCheckpointProblem, onWalBlocked, progress.onApplying);
  } catch (err) {
    run.earlyLock?.release();
    throw err;
  }
  if (database.migrated.length > 0) logger.info({ migrations: database.migrated, duration_ms: progress.durationMs() }, 'database migrated');
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
  return database;
}

/**
 * The start serves nothing while it migrates an existing database (an index over a large table
 * takes seconds): each migration is said as it begins, and the whole time with `database
 * migrated`. A new database (every migration pending) takes milliseconds: said once, after.
 */
function migrationProgress(logger: Logger): { onApplying: (m: Migration, nth: number, pending: number) => void; durationMs: () => number | undefined } {
  let since: number | null = null;
  const known = readMigrations().length;
  return {
    onApplying(m, nth, pending) {
      since ??= performance.now();
      if (pending < known) logger.info({ migration: `${String(m.version).padStart(3, '0')}_${m.name}`, nth, pending }, 'applying migration: nothing is served until the migrations are done');
    },
    durationMs: () => (since === null ? undefined : Math.round(performance.now() - since)),
  };
}

/** /metrics on METRICS_PORT, when it is set (a no-op otherwise), for start(). */
async function startMetrics(r: Receiver): Promise<void> {
  const { config, metricsApp } = r;
  if (metricsApp && config.metricsPort !== null && !r.run.metricsServer) await listenMetrics(r, metricsApp, config.metricsPort, 'METRICS_PORT');
}

/**
 * The workers lock, where the receiver runs workers and the caller did not take it (a new
 * database), taken before a port is bound: refused after one, a start held its event loop through
 * the lock's wait (WORKERS_LOCK_WAIT_MS) while the port took connections, then closed them unanswered.
 */
function lockBeforeListening(r: Receiver): void {
  const { config, run } = r;
  if (config.workerConcurrency > 0 && run.earlyLock === null && run.workersLock === null) run.earlyLock = acquireWorkersLock(r.database.sqlite.name);
}

/** A `work` process's own counters on WORK_METRICS_PORT (workMetricsApp), bound after the workers lock. */
async function startWorkMetrics(r: Receiver, port: number): Promise<string> {
  lockBeforeListening(r);
  return listenMetrics(r, workMetricsApp(r.metrics, r.onError), port, 'WORK_METRICS_PORT');
}

async function listenMetrics(r: Receiver, metricsHono: Hono, port: number, portVar: string): Promise<string> {
  const { config, logger, metrics, run, reachableHost, refusals } = r;
  const m = await listen(metricsHono.fetch, port, portVar, { config, logger, metrics, refusals });
  // A `work` process listens here only (WORK_METRICS_PORT).
  watchRefusals(r);
  m.requestTimeout = config.requestTimeoutMs;
  m.headersTimeout = Math.min(config.requestTimeoutMs, 20_000);
  run.metricsServer = m;
  return `http://${reachableHost}:${(m.address() as AddressInfo).port}/metrics`;
}

/** From a first listen to the stop: the counts of refused requests no later line carried, said (RefusalLog). */
function watchRefusals(r: Receiver): void {
  r.run.refusalsTimer ??= setInterval(() => r.refusals.sayUnsaid(), REFUSAL_COUNTS_CHECK_MS).unref();
}

/**
 * Takes the workers lock (when it runs them), listens (and on METRICS_PORT), then starts the
 * workers: a receiver that cannot listen never touches the queue.
 */
async function start(r: Receiver): Promise<{ port: number; url: string; metricsUrl: string }> {
  const { app, config, logger, metrics, watchFile, stopWatchingFile, run, reachableHost, refusals } = r;
  lockBeforeListening(r);
  let s: Server;
  try {
    s = await listen(app.fetch, config.port, 'PORT', { config, logger, metrics, refusals });
  } catch (err) {
    run.earlyLock?.release();
    run.earlyLock = null;
    throw err;
  }
  // A client trickling bytes is cut off; keep-alive sockets from the service are reused.
  s.requestTimeout = config.requestTimeoutMs;
  s.headersTimeout = Math.min(config.requestTimeoutMs, 20_000);
  s.keepAliveTimeout = 65_000;
  run.server = s;
  watchRefusals(r);
  watchFile();
  try {
    await startMetrics(r);
    if (config.workerConcurrency > 0) await startWorkers(r);
  } catch (err) {
    // Leave nothing running: the workers that did start, the servers with their connections,
    // a workers lock the workers never took over, and the file watch's timer (not unref'd).
    stopWatchingFile();
    clearInterval(run.refusalsTimer ?? undefined);
    run.refusalsTimer = null;
    run.earlyLock?.release();
    run.earlyLock = null;
    run.server = null;
    const m = run.metricsServer;
    run.metricsServer = null;
    await Promise.all([closeNow(s), m && closeNow(m)]);
    throw err;
  }
  const { port } = s.address() as AddressInfo;
  const metricsPort = run.metricsServer ? (run.metricsServer.address() as AddressInfo).port : port;
  logger.info(
    { port, host: config.host, ...(run.metricsServer ? { metricsPort } : {}), sources: config.sources.map((src) => src.name) },
    'receiver listening',
  );
  // Said at every start rather than refused: the documented default (the image and fly.toml set METRICS_PORT).
  if (!run.metricsServer && !isLoopbackHost(config.host)) {
    logger.warn(
      { port, host: config.host },
      'GET /metrics is served on the webhook port, which listens beyond this machine: anyone who reaches it reads the source and sink names, queue depths and the Node version, and each scrape queries the database; set METRICS_PORT to serve it on a port of its own',
    );
  }
  return { port, url: `http://${reachableHost}:${port}`, metricsUrl: `http://${reachableHost}:${metricsPort}/metrics` };
}

/** Stop accepting, let in-flight requests finish and commit, then close the database. Once. */
function stop(r: Receiver): Promise<void> {
  r.startStop.abort();
  r.run.stopping ??= stopOnce(r);
  return r.run.stopping;
}

/**
 * A stop is coming, once the start in progress returns (runReceiver at a signal): the start's
 * sink housekeeping ends at its next batch, and the sink lanes are not started. Its batches
 * commit whole: the next start finishes it.
 */
function interruptStart(r: Receiver): void {
  r.startStop.abort();
}

async function stopOnce(r: Receiver): Promise<void> {
  const { config, clock, logger, database, fileWatch, stopWatchingFile, ingestState, committer, processingShutdown, worker, fanOut, sweeps, ownHttp, run } = r;
  const abandonCommits = () => committer.abandon('the receiver was stopping (SHUTDOWN_GRACE_MS passed) before the write lock was free');
  // One grace for everything in progress: deliveries being received, messages being sent.
  const graceEnds = performance.now() + config.shutdownGraceMs;
  ingestState.draining = true;
  const s = run.server;
  run.server = null;
  // A scrape in progress is not worth waiting for.
  const m = run.metricsServer;
  run.metricsServer = null;
  const metricsClosed = m ? closeNow(m) : Promise.resolve();
  if (s) await closeWithinGrace(s, config.shutdownGraceMs, logger, abandonCommits);
  // Deliveries still waiting for the write lock (another process holds it) wait within the
  // grace, not each up to WRITE_TIMEOUT_MS: past it they fail uncommitted, and are redelivered.
  const cutCommits = setTimeout(abandonCommits, Math.max(0, graceEnds - performance.now()));
  await Promise.all([committer.drain(), metricsClosed]);
  clearTimeout(cutCommits);
  // The servers are closed: the counts no line said yet, said now (and a refusal still to come,
  // a request whose connection the grace cut, at warn: RefusalLog.end).
  clearInterval(run.refusalsTimer ?? undefined);
  run.refusalsTimer = null;
  r.refusals.end();
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
  const wal = fileWatch.holdWalThroughClose();
  await database.close();
  const kept = wal.restore();
  if (kept !== null) {
    logger.warn(
      { wal: kept, database_path: database.sqlite.name },
      'the -shm was not this process\'s at its stop (deleted under it): the -wal its close deleted, which may hold what another process committed since, is put back for the next start to recover. Then run PRAGMA integrity_check (README, "Backups while it runs")',
    );
  }
  const aside = fileWatch.setAsideStaleWal(new Date(clock.now()));
  if (aside !== null) {
    logger.warn(
      { wal: aside, database_path: database.sqlite.name },
      'the -wal of the database file that was replaced was renamed, so that the next start does not apply it to the file now at DATABASE_PATH: delete it, unless you recover the old file (it is that file\'s -wal)',
    );
  }
  logger.info('receiver stopped');
}
