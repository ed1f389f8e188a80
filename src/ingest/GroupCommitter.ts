import type { Clock } from '../util/clock.js';

/** The write could not be committed; the delivery must be answered 503 so the service retries. */
export class StorageUnavailableError extends Error {
  /** `abandoned`: cut by abandon() (a stop's grace ran out), not refused by the storage. */
  constructor(
    readonly reason: string,
    readonly abandoned = false,
  ) {
    super(`storage unavailable: ${reason}`);
    this.name = 'StorageUnavailableError';
  }
}

interface Pending<T, R> {
  item: T;
  deadline: number;
  resolve: (r: R) => void;
  reject: (e: Error) => void;
}

export interface GroupCommitterOptions<T, R> {
  /** Writes the whole batch in ONE transaction and returns one result per item, in order. Synchronous. */
  write: (items: T[]) => R[];
  /** True for errors meaning "someone else holds the write lock": those are retried until the deadline. */
  isBusy: (err: unknown) => boolean;
  /** Measures each item's wait against `timeoutMs`: a monotonic clock (monotonicClock), or a test's. */
  clock: Clock;
  /** How long an item may wait for the lock before it fails. */
  timeoutMs: number;
  maxBatch?: number;
  onBatch?: (size: number, durationMs: number) => void;
  onError?: (err: unknown, batchSize: number) => void;
  /** onBatch threw (after the commit, with the batch already answered). */
  onBatchError?: (err: unknown) => void;
  /** A batch committed after finding the lock held by another connection: how long, in ms, since it first did. */
  onLockWaited?: (waitedMs: number) => void;
  /** Items waited `timeoutMs` for a lock held at every attempt, and were failed (answered 503). */
  onLockTimedOut?: (items: number) => void;
}

/**
 * Group commit: every item submitted while the event loop is busy joins the
 * next transaction, so one fsync (synchronous=FULL) covers many deliveries.
 * The flush runs on setImmediate, after the poll phase that delivered the
 * request bodies, so a batch holds everything that arrived together. Each
 * submit() resolves only after the COMMIT that holds its item returned.
 *
 * Measured on the 2-core CI machine (see bench/): one commit per request
 * reaches about 2,800 deliveries/s with FULL; batching about 2-3x that.
 */
export class GroupCommitter<T, R> {
  private queue: Pending<T, R>[] = [];
  private scheduled = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private busyStreak = 0;
  /** performance.now() when the current batch first found the lock busy. */
  private busySince = 0;
  private idleWaiters: (() => void)[] = [];
  private readonly maxBatch: number;

  constructor(private readonly opts: GroupCommitterOptions<T, R>) {
    this.maxBatch = opts.maxBatch ?? 1000;
  }

  get pending(): number {
    return this.queue.length;
  }

  submit(item: T): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, deadline: this.opts.clock.now() + this.opts.timeoutMs, resolve, reject });
      this.schedule();
    });
  }

  /**
   * Fails every item still waiting (for the write lock) with StorageUnavailableError: at
   * shutdown, once the grace has passed, rather than waiting out each item's deadline. None of
   * them was committed; their senders retry.
   */
  abandon(reason: string): void {
    if (this.retryTimer) {
      clearTimeout(this.retryTimer);
      this.retryTimer = null;
    }
    this.busyStreak = 0;
    const waiting = this.queue;
    this.queue = [];
    for (const p of waiting) p.reject(new StorageUnavailableError(reason, true));
    this.notifyIdle();
  }

  /** Resolves once every submitted item has been committed or failed. */
  drain(): Promise<void> {
    if (this.queue.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  private schedule(): void {
    if (this.scheduled || this.retryTimer) return;
    this.scheduled = true;
    setImmediate(() => this.flush());
  }

  private flush(): void {
    this.scheduled = false;
    if (this.queue.length === 0) return this.notifyIdle();
    const batch = this.queue.splice(0, this.maxBatch);
    const started = performance.now();
    let results: R[];
    try {
      results = this.opts.write(batch.map((p) => p.item));
    } catch (err) {
      return this.onWriteError(batch, err);
    }
    if (this.busyStreak > 0) {
      this.busyStreak = 0;
      try {
        this.opts.onLockWaited?.(performance.now() - this.busySince);
      } catch (err) {
        this.opts.onBatchError?.(err);
      }
    }
    // Committed: answered whatever the bookkeeping after it does (metrics, signals, wake-ups).
    batch.forEach((p, i) => p.resolve(results[i]!));
    try {
      this.opts.onBatch?.(batch.length, performance.now() - started);
    } catch (err) {
      this.opts.onBatchError?.(err);
    }
    if (this.queue.length > 0) this.schedule();
    else this.notifyIdle();
  }

  private onWriteError(batch: Pending<T, R>[], err: unknown): void {
    this.opts.onError?.(err, batch.length);
    if (!this.opts.isBusy(err)) {
      // Disk full, I/O error, ...: nothing was committed (the transaction rolled back). Fail fast.
      // Whatever lock wait came before ended with this batch: the next one starts afresh.
      this.busyStreak = 0;
      const reason = (err as { code?: string }).code ?? (err as Error).message;
      batch.forEach((p) => p.reject(new StorageUnavailableError(reason)));
      if (this.queue.length > 0) this.schedule();
      else this.notifyIdle();
      return;
    }
    // Locked by another connection: keep the items that still have time, retry soon.
    const now = this.opts.clock.now();
    const waiting = [...batch, ...this.queue];
    this.queue = waiting.filter((p) => p.deadline > now);
    const expired = waiting.length - this.queue.length;
    for (const p of waiting) {
      if (p.deadline <= now) p.reject(new StorageUnavailableError(`database write lock not obtained within ${this.opts.timeoutMs} ms`));
    }
    if (expired > 0) this.opts.onLockTimedOut?.(expired);
    if (this.queue.length === 0) {
      this.busyStreak = 0;
      return this.notifyIdle();
    }
    // Short retries: the lock holders (another process's workers, the CLI) commit within a few ms.
    // Measured with `hiring-receiver work` beside an ingest-only serve at 1,000/s: capping the
    // retry delay at 50 ms gave p99 263 ms, at 4 ms p99 24 ms. Retrying on the loop's next turns
    // for the first 2 ms instead halved the mean wait at 2,500/s (1.84 -> 1.0 ms) but moved
    // neither p99 nor throughput, for 7% more CPU on the loop (bench/README.md, "Eighteenth round").
    if (this.busyStreak === 0) this.busySince = performance.now();
    const delay = Math.min(2 ** this.busyStreak, 4);
    this.busyStreak++;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = null;
      this.flush();
    }, delay);
  }

  private notifyIdle(): void {
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    waiters.forEach((w) => w());
  }
}
