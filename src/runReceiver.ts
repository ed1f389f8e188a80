import { createApp, receiverLogger, type App } from './app.js';
import { onNpmParentGone } from './util/npmParent.js';
import { closeSync, openSync, readSync, statSync } from 'node:fs';
import { ConfigError, loadConfig } from './config/loadConfig.js';
import { wrappingProblem } from './config/valueChecks.js';
import { describeProxy } from './http/outboundProxy.js';
import { acquireWorkersLock, WorkersRunningError, type WorkersLock } from './db/workersLock.js';
import { unwritableFolderError } from './db/databaseFiles.js';
import { noteNewDatabase, removeNewDatabase } from './db/newDatabaseFiles.js';
import { endLogs, fatalBeforeExit, type Logger } from './observability/logger.js';
import type { FileIdentity } from './db/openDatabase.js';

/**
 * The workers lock for an existing database file (a new one cannot have workers elsewhere yet; the
 * lock is then taken when the workers start). Not for a path that is not an SQLite file: opening
 * it fails with its own message, and no lock file is left beside it.
 */
function takeWorkersLockEarly(path: string): WorkersLock | undefined {
  if (!isSqliteFile(path)) return undefined;
  try {
    return acquireWorkersLock(path);
  } catch (err) {
    if (err instanceof WorkersRunningError) throw err;
    const folder = unwritableFolderError(path, err);
    if (folder) throw folder;
    throw new Error(`cannot take the workers lock beside the database at ${path} (DATABASE_PATH): ${(err as Error).message}`, { cause: err });
  }
}

/** A regular file that is empty (SQLite makes it a database) or starts with SQLite's header. */
function isSqliteFile(path: string): boolean {
  let fd: number | undefined;
  try {
    if (!statSync(path).isFile()) return false;
    fd = openSync(path, 'r');
    const head = Buffer.alloc(16);
    const n = readSync(fd, head, 0, 16, 0);
    return n === 0 || head.toString('latin1') === 'SQLite format 3\0';
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}

/**
 * serve: the HTTP receiver, with the workers in the same process unless WORKER_CONCURRENCY=0.
 * work:  the workers only (processing and sinks), for running them beside a `serve` started
 *        with WORKER_CONCURRENCY=0, so ingest keeps its event loop to itself under load.
 * Reads the environment, builds, starts, and wires SIGTERM/SIGINT to a drained exit 0.
 */
export async function runReceiver(mode: 'serve' | 'work'): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
  } catch (err) {
    if (err instanceof ConfigError) {
      for (const p of err.problems) process.stderr.write(`config error: ${p}\n`);
      process.exit(1);
    }
    throw err;
  }
  const rawWorkPort = process.env['WORK_METRICS_PORT'];
  const workMetricsPort = mode === 'work' && rawWorkPort !== undefined && rawWorkPort !== '' ? Number(rawWorkPort) : null;
  if (workMetricsPort !== null && (!/^\d+$/.test(rawWorkPort!) || workMetricsPort > 65535)) {
    const wrapped = wrappingProblem(rawWorkPort!);
    process.stderr.write(`config error: WORK_METRICS_PORT: ${wrapped ?? `must be an integer 0-65535, got ${JSON.stringify(rawWorkPort)}`}\n`);
    process.exit(1);
  }
  if (mode === 'work' && config.workerConcurrency === 0) {
    process.stderr.write('config error: WORKER_CONCURRENCY: must be at least 1 for `work`\n');
    process.exit(1);
  }
  // Signals are taken from here on, before the database is opened and migrated: one that comes
  // during the start-up lets the start finish, then drains like any stop. (Handled only once
  // started, Node's default ended the process at once: mid-answer for a delivery accepted once
  // it listened, with an exit by signal and no line in the log.)
  let receiver: App | undefined;
  let started: Promise<void> = new Promise(() => {});
  let stopping = false;
  /**
   * The process exits with `code` once the logger's lines are written (endLogs): a receiver whose
   * stdout is read slowly lost its last lines, 'receiver stopped' or 'crashed' among them.
   */
  let exiting = false;
  const logsWrittenForExit = async (logger: Logger): Promise<void> => {
    exiting = true;
    await endLogs(logger);
  };
  const exitAfterLogs = async (logger: Logger, code: number): Promise<never> => {
    await logsWrittenForExit(logger);
    process.exit(code);
  };
  const shutdown = (signal: string) => {
    // Before createApp returned, no handler can run (it is synchronous). No receiver after that:
    // its start failed before it existed, and that failure is ending the process (exit 1).
    const r = receiver;
    if (!r) return;
    if (stopping) {
      // Not a faster stop: under `npm start` one Ctrl-C is two SIGINTs (the terminal's, and npm's
      // forward of it). Said, so an operator waiting on the stop knows it is under way.
      r.logger.info({ signal }, 'already stopping: work in progress gets up to SHUTDOWN_GRACE_MS; SIGKILL ends the process at once (nothing acknowledged is lost)');
      return;
    }
    stopping = true;
    r.logger.info({ signal }, 'shutting down');
    // A start still in its sink housekeeping (batches over every waiting delivery: tens of seconds
    // at a few million) ends it at its next batch; the next start finishes it.
    r.interruptStart();
    // A start that fails exits 1 with its own message (main), not through this stop.
    started
      .then(() => r.stop(), () => new Promise<never>(() => {}))
      .then(
        () => exitAfterLogs(r.logger, 0),
        (err) => {
          r.logger.error({ err: (err as Error).message }, 'shutdown failed');
          return exitAfterLogs(r.logger, 1);
        },
      );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  // A start that fails is one JSON line at fatal too ('start failed'), for a log pipeline that
  // alerts on level; main then says it as text on stderr and exits 1.
  const startFailed = (logger: Logger, cleanUp: () => Promise<void>) => async (err: unknown): Promise<never> => {
    fatalBeforeExit(logger, { err: err instanceof Error ? err.message : String(err), mode }, 'start failed');
    await cleanUp();
    // main exits 1 once it has said the error on stderr: the JSON lines go out first.
    await logsWrittenForExit(logger);
    throw err;
  };
  // A DATABASE_PATH that named nothing before this start (a new database, or a mistyped path): a
  // start that fails removes the file it created, so the next start (or `status`) on that path
  // does not find an empty, migrated database there. Nothing else changes for a path that exists.
  const created = noteNewDatabase(config.databasePath);
  const removeCreated = async (logger: Logger, close: () => Promise<void>, opened: FileIdentity | null) => {
    if (!created) return;
    try {
      await close();
      const outcome = removeNewDatabase(created, opened);
      if (outcome === 'removed') logger.info({ database_path: created.path }, 'the start failed: the database file it created is removed again');
      else if (outcome !== 'none') logger.warn({ database_path: created.path, kept: outcome.kept }, 'the start failed: the database file it created is kept');
    } catch (cleanupErr) {
      logger.warn({ database_path: created.path, err: (cleanupErr as Error).message }, 'the start failed: the database file it created could not be removed');
    }
  };
  // With workers, their lock is taken before the database is opened and migrated: a new version
  // started beside an older one still running its workers is refused before it migrates.
  let app: App;
  try {
    const workersLock = config.workerConcurrency > 0 ? takeWorkersLockEarly(config.databasePath) : undefined;
    app = createApp({ config, ...(workersLock ? { workersLock } : {}) });
  } catch (err) {
    const logger = receiverLogger(config);
    // Its connections are closed where the open failed (openServerDatabase); one left open by a
    // later step keeps the file (the check finds it in use).
    return startFailed(logger, () => removeCreated(logger, async () => {}, null))(err);
  }
  receiver = app;
  const proxy = config.outboundProxy;
  if (proxy) {
    // Where the result reads and http sinks go, by host only (a proxy URL's user and password are not logged).
    app.logger.info(
      { https_proxy: proxy.https && describeProxy(proxy.https), http_proxy: proxy.http && describeProxy(proxy.http), no_proxy: proxy.noProxy },
      'outbound requests go through a proxy (HTTPS_PROXY / HTTP_PROXY), except to the hosts in no_proxy',
    );
  }
  // A crash is one JSON line at fatal, like every other line (Node's default is a text stack
  // trace a log pipeline cannot parse), then exit 1 for the supervisor to restart it: nothing
  // acknowledged is lost (every 2xx followed its commit), and leased jobs run again.
  const crash = (kind: string) => (err: unknown) => {
    // A second crash while the first one's lines are written out: the exit is already under way.
    if (exiting) return;
    fatalBeforeExit(app.logger, { err: err instanceof Error ? err.message : String(err), stack: err instanceof Error ? err.stack : undefined, kind }, 'crashed');
    void exitAfterLogs(app.logger, 1);
  };
  process.on('uncaughtException', crash('uncaught exception'));
  process.on('unhandledRejection', crash('unhandled rejection'));
  started =
    mode === 'serve'
      ? app.start().then(() => undefined)
      : (async () => {
          // Its own counters (job runs, result reads, sink deliveries) are in this process only: on
          // WORK_METRICS_PORT (not METRICS_PORT, which `serve` in the same environment listens on),
          // bound before the workers start, so a port in use fails before any job is claimed.
          if (workMetricsPort !== null) {
            const metricsUrl = await app.startWorkMetrics(workMetricsPort);
            app.logger.info({ metricsUrl }, 'metrics served');
          }
          await app.startWorkers();
        })();
  // What the start began is stopped by now (start(), startWorkers()); stop() closes the database.
  await started.catch(startFailed(app.logger, () => removeCreated(app.logger, () => app.stop(), app.database.opened)));
  // `kill <npm's pid>` under `npm start` / `npm run cli -- serve`: drain and exit (npmParent.ts).
  onNpmParentGone(process.env, () => shutdown('npm, which started it, exited'));
  // No SIGHUP handler: one would override `nohup`'s ignore (a receiver started with nohup would
  // stop when its terminal closes). Node's default ends the process at once; nothing
  // acknowledged is lost. File sinks need no signal to follow a rotated file.
}
