import { isManualClock, MAX_TIMER_MS, type Clock, type ManualClock } from '../clock.js';

interface Task {
  seq: number;
  dueAt: number;
  /** Tasks of one lane run one after another within a batch (one lane per webhook endpoint). */
  lane: string;
  run: () => Promise<void>;
}

/** Guards every loop against a runaway schedule: far more steps than any test needs. */
const MAX_STEPS = 100_000;

/**
 * The last instant a Date can hold (8.64e15 ms after the epoch). A manual clock moved past it
 * made every later time it wrote (a webhook's created_at, a delivery record) throw: the
 * sandbox answered 500 to most requests until it was restarted.
 */
const LAST_DATE_MS = 8.64e15;

/**
 * Runs delivery tasks when they fall due on the sandbox clock.
 *
 * - Delays are divided by `timeFactor`, so a test can play the whole retry schedule in seconds.
 * - With a real clock, one unref'd timer is armed for the earliest task.
 * - With a manual clock nothing fires on its own: `advance(ms)` moves the clock task by task, so
 *   each attempt happens exactly at its due time on the sandbox clock and tests never sleep.
 * Due tasks of different lanes run concurrently; within a lane they run in order (oldest first,
 * or newest first when `order().reorder` says so), or all at once when `order().parallel` does.
 */
export class DeliveryScheduler {
  private readonly tasks: Task[] = [];
  private readonly inFlight = new Set<Promise<void>>();
  private readonly idleWaiters: (() => void)[] = [];
  private timer: NodeJS.Timeout | undefined;
  private seq = 0;
  private stopped = false;

  constructor(
    private readonly clock: Clock,
    private readonly timeFactor: number,
    private readonly order: () => { reorder: boolean; parallel: boolean },
    private readonly onError: (err: unknown) => void,
  ) {}

  get manual(): boolean {
    return isManualClock(this.clock);
  }

  /** `delayMs` is nominal (spec time); it is divided by the time factor. */
  schedule(lane: string, delayMs: number, run: () => Promise<void>): number {
    const dueAt = this.clock.now() + delayMs / this.timeFactor;
    this.tasks.push({ seq: this.seq++, dueAt, lane, run });
    this.arm();
    return dueAt;
  }

  pending(): number {
    return this.tasks.length + this.inFlight.size;
  }

  /** Starts every task due now; resolves when they (and anything they made due now) finished. */
  async runDue(): Promise<void> {
    for (let step = 0; step < MAX_STEPS && !this.stopped; step++) {
      const now = this.clock.now();
      const due = this.tasks.filter((t) => t.dueAt <= now);
      if (due.length === 0) {
        if (this.inFlight.size === 0) break;
        await Promise.all([...this.inFlight]);
        continue;
      }
      for (const t of due) this.tasks.splice(this.tasks.indexOf(t), 1);
      this.startBatch(due);
    }
    this.arm();
    this.notifyIdle();
  }

  /** Manual clock only: moves time forward by `ms`, running every task at its own due time. */
  async advance(ms: number): Promise<void> {
    const clock = this.requireManual();
    const target = clock.now() + ms;
    if (!(target <= LAST_DATE_MS)) throw new Error(`advancing ${ms} ms would move the clock past ${new Date(LAST_DATE_MS).toISOString()}, the last instant a date can hold`);
    for (let step = 0; step < MAX_STEPS && !this.stopped; step++) {
      await this.runDue();
      const next = this.nextDueAt();
      if (next === undefined || next > target) break;
      clock.set(next);
    }
    clock.set(target);
    await this.runDue();
  }

  /** Resolves once no task is pending at all (retries included). A manual clock is fast-forwarded. */
  async drain(timeoutMs: number): Promise<void> {
    if (this.manual) {
      const clock = this.requireManual();
      for (let step = 0; step < MAX_STEPS && !this.stopped; step++) {
        await this.runDue();
        const next = this.nextDueAt();
        // A task due past the last date (a chaos delay of 1e300 ms) can never fall due: it stays pending.
        if (next === undefined || next > LAST_DATE_MS) return;
        clock.set(next);
      }
      return;
    }
    await this.runDue();
    if (this.pending() === 0) return;
    await new Promise<void>((resolve, reject) => {
      const timeout = setTimeout(() => reject(new Error(`deliveries still pending after ${timeoutMs} ms: ${this.pending()}`)), timeoutMs);
      this.idleWaiters.push(() => {
        clearTimeout(timeout);
        resolve();
      });
    });
  }

  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.tasks.length = 0;
    this.notifyIdle();
  }

  private startBatch(due: Task[]): void {
    const { reorder: newestFirst, parallel } = this.order();
    const lanes = new Map<string, Task[]>();
    for (const t of due) lanes.set(t.lane, [...(lanes.get(t.lane) ?? []), t]);
    for (const laneTasks of lanes.values()) {
      laneTasks.sort((a, b) => (newestFirst ? b.seq - a.seq : a.seq - b.seq));
      // One after another, or (parallel) each task on its own, started in that order.
      for (const group of parallel ? laneTasks.map((t) => [t]) : [laneTasks]) {
        const p = (async () => {
          for (const t of group) {
            if (this.stopped) return;
            await t.run().catch(this.onError);
          }
        })();
        this.inFlight.add(p);
        void p.finally(() => {
          this.inFlight.delete(p);
          this.notifyIdle();
        });
      }
    }
  }

  private nextDueAt(): number | undefined {
    return this.tasks.reduce<number | undefined>((min, t) => (min === undefined || t.dueAt < min ? t.dueAt : min), undefined);
  }

  private arm(): void {
    if (this.manual || this.stopped) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    const next = this.nextDueAt();
    if (next === undefined) return;
    // A task due beyond MAX_TIMER_MS is woken for at that bound and re-armed: a longer setTimeout
    // fires after 1 ms, and the scheduler then woke every millisecond to find nothing due.
    this.timer = setTimeout(() => void this.runDue(), Math.min(MAX_TIMER_MS, Math.max(0, next - this.clock.now())));
    this.timer.unref();
  }

  private notifyIdle(): void {
    if (this.tasks.length > 0 && !this.stopped) return;
    if (this.inFlight.size > 0) return;
    for (const w of this.idleWaiters.splice(0)) w();
  }

  private requireManual(): ManualClock {
    if (!isManualClock(this.clock)) throw new Error('advance() needs a manual clock: createSandbox({ clock: createManualClock() })');
    return this.clock;
  }
}
