import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, resolve } from 'node:path';
import { Worker } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect } from 'kysely';
import { migrate } from './migrate.js';
import { withStatementCache } from './statementCache.js';
import type { Database } from './schema.js';

export interface OpenDatabase {
  /** For everything but the ingest hot path: queue, handlers, readers. */
  readonly db: Kysely<Database>;
  /** The connection kysely uses (for pragmas and health checks). */
  readonly sqlite: BetterSqlite3.Database;
  /**
   * A second connection only the ingest group-commit writes on. Its write
   * transactions are synchronous (one tick), so they never interleave with
   * kysely's async transactions on the other connection; lock contention
   * between the two shows up as SQLITE_BUSY, which both sides retry.
   */
  readonly ingestSqlite: BetterSqlite3.Database;
  close(): Promise<void>;
}

export class DurabilityError extends Error {}

const SYNC = { FULL: 2, NORMAL: 1 } as const;

/**
 * WAL mode, with `synchronous` set per connection and read back.
 *
 * The ingest connection uses FULL: its commit is on disk (fsync of the WAL)
 * before the transaction returns, and only then is a delivery answered 2xx.
 * better-sqlite3's build defaults WAL to NORMAL, which can lose acknowledged
 * commits on power loss, so we set FULL and check it.
 *
 * The processing connection (queue, handlers, sinks) uses NORMAL: its commits
 * are made durable by the next WAL sync (the next ingest commit or
 * checkpoint). A power cut can only lose a suffix of them, and everything it
 * writes is recomputed from the durable events: a lost "done" re-runs an
 * idempotent job, a lost "delivered" re-sends a message with the same
 * webhook-id (at-least-once). Measured: each job costs three commits (claim,
 * work, complete), and with FULL their fsyncs blocked the event loop the
 * ingest path needs (bench/README.md).
 */
function configure(sqlite: BetterSqlite3.Database, busyTimeoutMs: number, sync: keyof typeof SYNC, autoCheckpoint: boolean): void {
  sqlite.pragma('journal_mode = WAL');
  sqlite.pragma(`synchronous = ${sync}`);
  sqlite.pragma(`busy_timeout = ${Math.trunc(busyTimeoutMs)}`);
  sqlite.pragma('foreign_keys = ON');
  if (!autoCheckpoint) sqlite.pragma('wal_autocheckpoint = 0');
  const mode = sqlite.pragma('journal_mode', { simple: true });
  const actual = sqlite.pragma('synchronous', { simple: true });
  if (mode !== 'wal') throw new DurabilityError(`SQLite journal_mode is ${String(mode)}, expected wal`);
  if (actual !== SYNC[sync]) throw new DurabilityError(`SQLite synchronous is ${String(actual)}, expected ${SYNC[sync]} (${sync})`);
}

/**
 * WAL checkpoints copy committed pages back into the database file and fsync
 * it. SQLite's automatic checkpoint runs inside whichever commit crosses 1,000
 * pages, on the event loop: the benchmark traced ingest p99 spikes (~20 ms) to
 * it. Here a worker thread with its own connection runs a PASSIVE checkpoint
 * (never blocks writers or readers) twice a second instead.
 */
const CHECKPOINTER = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.path);
db.pragma('busy_timeout = 1000');
const timer = setInterval(() => {
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch (err) { parentPort.postMessage(String(err && err.message)); }
}, workerData.intervalMs);
parentPort.on('message', (m) => {
  if (m !== 'stop') return;
  clearInterval(timer);
  try { db.pragma('wal_checkpoint(PASSIVE)'); } catch {}
  db.close();
  process.exit(0);
});
`;

function startCheckpointer(path: string, intervalMs: number): Worker {
  const driver = createRequire(import.meta.url).resolve('better-sqlite3');
  const worker = new Worker(CHECKPOINTER, { eval: true, workerData: { path: resolve(path), driver, intervalMs } });
  // A failing checkpointer must not take the receiver down: SQLite's WAL keeps every commit
  // regardless; only the file grows until the next checkpoint. Reported on stderr.
  worker.on('error', (err) => process.stderr.write(`wal checkpointer stopped: ${err.message}\n`));
  worker.on('message', (m) => process.stderr.write(`wal checkpoint failed: ${String(m)}\n`));
  worker.unref();
  return worker;
}

export interface OpenOptions {
  /** Apply pending migrations (the server does; read-only tools may not). */
  migrate?: boolean;
  /**
   * Busy timeout of the kysely connection. Kept short: better-sqlite3 waits
   * synchronously, blocking the event loop, so callers retry instead.
   */
  busyTimeoutMs?: number;
  /** Run WAL checkpoints on a worker thread (the server does); tools keep SQLite's automatic ones. */
  checkpointer?: boolean;
}

export function openDatabase(path: string, opts: OpenOptions = {}): OpenDatabase {
  if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
  const sqlite = new BetterSqlite3(path);
  const background = opts.checkpointer === true && path !== ':memory:';
  let ingestSqlite: BetterSqlite3.Database | undefined;
  try {
    configure(sqlite, opts.busyTimeoutMs ?? 200, 'NORMAL', !background);
    if (opts.migrate !== false) migrate(sqlite);
    ingestSqlite = new BetterSqlite3(path);
    // The ingest committer never waits inside SQLite: it retries on its own timer.
    configure(ingestSqlite, 0, 'FULL', !background);
  } catch (err) {
    ingestSqlite?.close();
    sqlite.close();
    throw err;
  }
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(sqlite) }) });
  const ingest = ingestSqlite;
  const checkpointer = background ? startCheckpointer(path, 500) : null;
  return {
    db,
    sqlite,
    ingestSqlite: ingest,
    async close() {
      if (checkpointer && checkpointer.threadId !== -1) {
        const exited = new Promise((r) => checkpointer.once('exit', r));
        // unref'd while running so it never holds the process open; held while it finishes.
        checkpointer.ref();
        checkpointer.postMessage('stop');
        await exited;
      }
      ingest.close();
      await db.destroy(); // closes `sqlite`
    },
  };
}
