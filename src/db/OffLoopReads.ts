import type { Worker } from 'node:worker_threads';

/**
 * Reads run on the checkpointer thread's connection (checkpointer.ts), off the event loop that
 * answers deliveries: for a statement that walks a large range, such as the job counts of each
 * /metrics scrape (metricsRoute.ts). Not a thread of its own: each costs about 16 MB RSS.
 *
 * `all(sql)` resolves to the rows, read after the call (the thread answers in order, so a read
 * asked after a write committed on the loop sees it), or to null when the thread cannot answer:
 * never started (`:memory:`, a tool's open), gone (it ended and the next has not started yet, or
 * the database is closing), the statement failed there, or no answer within `answerWithinMs` (the
 * thread is in a long checkpoint, or still in an earlier read). The caller then reads on its own
 * connection. While a read that was not answered in time is still pending, the next ones are not
 * sent (null at once): they would queue behind it on a thread that is evidently held.
 */
export class OffLoopReads {
  private nextId = 1;
  private readonly pending = new Map<number, (rows: unknown[] | null) => void>();
  /** The id of a read not answered in time that the thread still has: until it answers, none are sent. */
  private overdue: number | null = null;
  /** The thread that answers now: null before the first, and from a thread's end until the next (CheckpointerThread starts one again). */
  private worker: Worker | null = null;

  constructor(private readonly answerWithinMs: number) {}

  /** The thread that answers from now on: the checkpointer's first, or the one started after it ended. */
  attach(worker: Worker): void {
    this.worker = worker;
    this.overdue = null;
    worker.on('message', (m: { read?: { id: number; rows?: unknown[]; error?: string } }) => {
      if (!m || typeof m !== 'object' || !m.read || worker !== this.worker) return;
      const { id, rows } = m.read;
      if (id === this.overdue) this.overdue = null;
      this.settle(id, rows ?? null);
    });
    worker.on('exit', () => {
      if (worker !== this.worker) return;
      this.worker = null;
      this.overdue = null;
      for (const id of [...this.pending.keys()]) this.settle(id, null);
    });
  }

  all(sql: string): Promise<unknown[] | null> {
    const worker = this.worker;
    if (!worker || this.overdue !== null || worker.threadId === -1) return Promise.resolve(null);
    const id = this.nextId++;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.overdue ??= id;
        this.settle(id, null);
      }, this.answerWithinMs);
      timer.unref();
      this.pending.set(id, (rows) => {
        clearTimeout(timer);
        resolve(rows);
      });
      try {
        worker.postMessage({ read: { id, sql } });
      } catch {
        this.settle(id, null);
      }
    });
  }

  private settle(id: number, rows: unknown[] | null): void {
    const done = this.pending.get(id);
    if (!done) return;
    this.pending.delete(id);
    done(rows);
  }
}
