import {
  CompiledQuery,
  SqliteDialect,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
  type SqliteDialectConfig,
  type TransactionSettings,
} from 'kysely';
import { isLockHeldElsewhere } from './sqliteHelpers.js';
import { letWaitersGoFirst } from './ingestWaitSignal.js';

export interface BusyRetryOptions {
  /** Whether the connection is inside a transaction now (better-sqlite3's `inTransaction`). */
  inTransaction: () => boolean;
  /** How long one statement may wait for the lock, in all. */
  waitMs: number;
  /**
   * Whether an ingest commit is waiting for the write lock now (IngestWaitSignal): a write
   * outside a transaction then waits on timers first, up to `yieldMs`, so the waiting deliveries
   * get the lock first.
   */
  ingestWaiting?: () => boolean;
  /** Longest a write lets ingest go first. Default 50 ms. */
  yieldMs?: number;
  /**
   * A write outside a transaction found the lock held by another connection, and is about to
   * wait for it (IngestWaitSignal.workersWaiting: a CLI's bulk change lets it in between two of
   * its transactions, cli/batchPause.ts).
   */
  writeWaiting?: () => void;
  /** That write went through, or gave up (after writeWaiting only). */
  writeThrough?: () => void;
}

type QueryCompile = Parameters<NonNullable<Driver['savepoint']>>[2];

/** Delays between tries, in ms: short first (most lock holders commit within a few ms), then 25 ms. */
const DELAYS = [1, 2, 4, 8, 16];
const LAST_DELAY = 25;

/**
 * kysely's SqliteDialect with the lock wait moved off the event loop.
 *
 * better-sqlite3 is synchronous, so SQLite's own busy_timeout waits by
 * sleeping on the event loop: while another process (the `work` process, the
 * `replay` CLI, a checkpoint that rewinds the WAL) holds the write lock, a
 * waiting statement of the processing connection stopped every HTTP request
 * of the server for up to the whole timeout. With busy_timeout 0 and this
 * dialect, a statement that finds the lock busy fails at once and is run
 * again on a timer until `waitMs` has passed; meanwhile the loop serves.
 *
 * Only a statement outside a transaction is run again: it did nothing (an
 * autocommit statement that failed rolled back, and a BEGIN that failed did
 * not begin). Inside a transaction a busy error belongs to the caller, which
 * must roll back; so `db.transaction()` begins IMMEDIATE and waits for the lock
 * there (in WAL mode a BEGIN IMMEDIATE transaction never meets one later).
 *
 * With `ingestWaiting`, a write outside a transaction (a BEGIN IMMEDIATE, an autocommit write)
 * first lets a waiting ingest commit, of this process or of a `serve` beside it, take the lock.
 * A statement inside a transaction never waits: the transaction holds the lock, and waiting
 * would hold ingest up. Reads do not wait, but like any query they queue behind a waiting write
 * on kysely's connection (one per database, behind a mutex), as they do behind a busy retry.
 */
export class BusyRetrySqliteDialect extends SqliteDialect {
  constructor(
    config: SqliteDialectConfig,
    private readonly retry: BusyRetryOptions,
  ) {
    super(config);
  }

  override createDriver(): Driver {
    return new BusyRetryDriver(super.createDriver(), this.retry);
  }
}

class BusyRetryDriver implements Driver {
  private readonly wrapped = new WeakMap<DatabaseConnection, DatabaseConnection>();

  constructor(
    private readonly inner: Driver,
    private readonly retry: BusyRetryOptions,
  ) {}

  init(): Promise<void> {
    return this.inner.init();
  }

  async acquireConnection(): Promise<DatabaseConnection> {
    const conn = await this.inner.acquireConnection();
    let w = this.wrapped.get(conn);
    if (!w) {
      w = retryingConnection(conn, this.retry);
      this.wrapped.set(conn, w);
    }
    return w;
  }

  /**
   * `db.transaction()` begins IMMEDIATE, not kysely's deferred BEGIN: every such transaction
   * here writes, and with busy_timeout 0 a deferred one would meet the lock at its first write,
   * inside the transaction, where nothing can wait (and after a read, SQLITE_BUSY_SNAPSHOT
   * fails it whatever the timeout). Taking the lock at BEGIN waits on timers like any statement.
   */
  async beginTransaction(conn: DatabaseConnection, _settings: TransactionSettings): Promise<void> {
    await conn.executeQuery(CompiledQuery.raw('BEGIN IMMEDIATE'));
  }

  // COMMIT and ROLLBACK run inside the transaction: passed through (never retried).

  commitTransaction(conn: DatabaseConnection): Promise<void> {
    return this.inner.commitTransaction(conn);
  }

  rollbackTransaction(conn: DatabaseConnection): Promise<void> {
    return this.inner.rollbackTransaction(conn);
  }

  releaseConnection(conn: DatabaseConnection): Promise<void> {
    return this.inner.releaseConnection(this.unwrap(conn));
  }

  destroy(): Promise<void> {
    return this.inner.destroy();
  }

  // Savepoints are statements inside a transaction: the retrying connection runs them once.
  savepoint(conn: DatabaseConnection, name: string, compile: QueryCompile): Promise<void> {
    return this.inner.savepoint!(conn, name, compile);
  }

  rollbackToSavepoint(conn: DatabaseConnection, name: string, compile: QueryCompile): Promise<void> {
    return this.inner.rollbackToSavepoint!(conn, name, compile);
  }

  releaseSavepoint(conn: DatabaseConnection, name: string, compile: QueryCompile): Promise<void> {
    return this.inner.releaseSavepoint!(conn, name, compile);
  }

  private unwrap(conn: DatabaseConnection): DatabaseConnection {
    return (conn as { inner?: DatabaseConnection }).inner ?? conn;
  }
}

/** A statement that only reads: in WAL mode it never holds up a writer, so it need not wait here. */
const READ_ONLY = /^\s*select\b/i;

/** While an ingest commit waits for the write lock (IngestWaitSignal), waits on 1 ms timers, `yieldMs` at most. */
async function letIngestGoFirst(retry: BusyRetryOptions): Promise<void> {
  if (retry.ingestWaiting) await letWaitersGoFirst(retry.ingestWaiting, retry.yieldMs ?? 50);
}

function retryingConnection(inner: DatabaseConnection, retry: BusyRetryOptions): DatabaseConnection & { inner: DatabaseConnection } {
  return {
    inner,
    async executeQuery<R>(query: CompiledQuery): Promise<QueryResult<R>> {
      // Decided before the first try: a statement of a transaction is never run again, even if
      // its failure ended the transaction.
      if (retry.inTransaction()) return inner.executeQuery<R>(query);
      // Right before the write, holding the connection. Waiting before taking it instead, reads
      // included, measured about 1 ms worse at p99 at 2,500/s (bench/README.md, "Eighth round").
      const write = !READ_ONLY.test(query.sql);
      if (write) await letIngestGoFirst(retry);
      const deadline = performance.now() + retry.waitMs;
      let waited = false;
      try {
        for (let attempt = 0; ; attempt++) {
          try {
            return await inner.executeQuery<R>(query);
          } catch (err) {
            const left = deadline - performance.now();
            // Only another connection's lock goes away by waiting; SQLITE_LOCKED is this connection's own.
            if (!isLockHeldElsewhere(err) || retry.inTransaction() || left <= 0) throw err;
            if (write) {
              // Said at each try, so it stays fresh (IngestWaitSignal's staleMs) through the longer delays.
              retry.writeWaiting?.();
              waited = true;
            }
            const delay = Math.min(DELAYS[attempt] ?? LAST_DELAY, left);
            await new Promise((r) => setTimeout(r, delay));
          }
        }
      } finally {
        if (waited) retry.writeThrough?.();
      }
    },
    streamQuery<R>(query: CompiledQuery, chunkSize?: number): AsyncIterableIterator<QueryResult<R>> {
      return inner.streamQuery<R>(query, chunkSize);
    },
  };
}
