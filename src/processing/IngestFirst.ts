import type { Pacer } from '../queue/Worker.js';

/**
 * Ingest first: processing shares the event loop with the webhook endpoint.
 * While deliveries are arriving AND the loop is busy (utilization at least
 * `busyAbove` over the last `sampleMs`) AND the deliveries take a good part of
 * it (at least `deliveriesRoomBelow`, below), processing may use about `share`
 * of the loop's time: after a processing stretch that took `t` ms, the next
 * one starts no earlier than `t * (1 - share) / share` ms later, and the loop
 * serves requests meanwhile. The workers charge their claims and job runs
 * (wall time: a fetch's network wait counts too, and the app's two workers
 * share one pacer, so under load finished reads also hold back folds). A wait is at
 * most 50 ms, so the share is a target, not a hard bound, for stretches
 * longer than 50 ms * share / (1 - share). While it holds processing back, `turn()` says so
 * and each worker keeps one job group in flight: with four reads in flight, their
 * completions ran back to back (measured at 2,500/s: p99 18-20 ms with the share alone,
 * 13.7-14.7 ms with one group per worker). With a loop under `busyAbove`, or no delivery for
 * `activeWindowMs`, processing runs flat out.
 *
 * Why: acknowledging a delivery is what the service times out on (10 s) and
 * retries; processing can catch up later and loses nothing by waiting (its
 * jobs are durable). Measured at 2,500 deliveries/s on 2 cores: unpaced, a
 * backlog of folds kept the loop 100% busy and acknowledgement p50 went from
 * 3 ms (ingest only) to 10 ms (bench/README.md). Pacing only under a busy
 * loop (90% over a quarter second) cut the fan-out p50 at 200/s from 97 ms
 * (always paced) to 26 ms (5 ms unpaced). The app holds folds back from
 * 60% (`from(0.6)`), reads from 90%: at 1,000/s the loop sits between the
 * two, and folds running flat out there gave acknowledgement p50/p99 of
 * 8.2-8.5 / 26-27 ms, against 1.9-2.4 / 11.8-12.5 ms held (fan-out p50 at
 * 200/s 12-18 ms against 6-7 ms). Reads keep the 90%: held reads keep one
 * request in flight, and with a slow service a 60% threshold made the
 * reads crawl (the reliability suite's slow-upstream test caught it).
 * Processing lag under load shows in `receiver_jobs{state="pending"}`.
 *
 * A worker paced from a lower threshold (`from`: the folds) has its own account beside the
 * shared one, and waits on its own charges only while the loop has room (utilization over
 * about the last second and over the last sample under `roomBelow`, 80% by default, and no
 * delivery waiting for another process's write lock); otherwise it waits on the shared
 * account, the reads' charges included. Why: a read is charged its wall time, so with reads in flight the shared account
 * stays at the 50 ms cap, and a held fold took one batch (8 events) per 50 ms, about
 * 160 events/s on any host. On a host where a steady 200/s kept the loop 60-80% busy, the
 * folds fell further behind every second the deliveries kept coming (fold lag 0.1 s to 3.6 s
 * in seven seconds; fan-out p50 64-2,403 ms in eleven runs). Waiting on their own charges
 * there, the folds keep up while the loop has room (bench/README.md, "Thirty-sixth round");
 * from 80% busy the acknowledgements come first as before, and the folds can still fall
 * behind there (the reads' wall-time charge is the cause left). The room is gained slowly and
 * lost at once: with the last sample needed too, a burst after a quiet spell (smoothed
 * utilization near 0) finds the folds on the shared account from its first busy
 * quarter-second, where the smoothing alone left them on their own charges for about 1.25 s.
 *
 * Nothing is held back, however busy the loop, while the deliveries' handlers take under
 * `deliveriesRoomBelow` (8% by default) of it: the time the route's handlers spend on the loop
 * (each adds up its stretches between awaits), over the last sample and smoothed the same way
 * (gained slowly, lost at once; a lock wait ends it too). It grows with the rate of deliveries
 * and with the host's slowness. Why: busy is not the same as busy with deliveries. On a slow host
 * a steady 200-400 deliveries/s kept the loop over 80% busy with the reads, the folds and the sink
 * deliveries, while the handlers took 4-5% of it (0.11-0.21 ms each); held, the folds fell behind
 * (fan-out p50 0.9-2.3 s at 400/s), and with the folds alone freed, the events waiting on a result
 * read took 3.5-4.2 s (the folds' charges held the reads). With so few deliveries, processing flat
 * out costs their acknowledgements little (p99 at 200/s 12.5-18.8 ms against 22.1-26.9 ms held).
 * At 1,000/s the handlers took 5-15% (free in 0-22 of about 70 samples a run, with acknowledgement
 * p99 19.8-24.6 ms against 19.6-25.8 ms for the tree before), at 2,500/s 15-17% (never free). The ingest
 * transactions' time is left out on purpose: it falls as the batches grow, and they grow when
 * the loop is busier. Counted with it (deliveries under 25% of the loop), a 1,000/s load freed
 * once stayed free (transactions 11% of the loop against 23% held) and its acknowledgement p99
 * went from about 20 to 36-44 ms in three runs of five (bench/README.md, "Thirty-eighth round").
 *
 * Real time (performance.now) by default, not the app's business clock: this paces CPU time.
 */
const MAX_WAIT_MS = 50;
/** Each sample's weight in the smoothed utilization (`roomBelow`) and the smoothed deliveries' share (`deliveriesRoomBelow`): about a second's memory at 250 ms samples. */
const ROOM_ALPHA = 0.25;

export interface IngestFirstOptions {
  /** Fraction of the loop processing may use under load, in (0, 1]. */
  share?: number;
  activeWindowMs?: number;
  /** Loop utilization (0-1) from which pacing applies. */
  busyAbove?: number;
  /** Loop utilization (0-1) below which a worker paced `from` a lower threshold waits on its own charges only. */
  roomBelow?: number;
  /**
   * The deliveries' handlers' share of the loop (0-1, as booked with `noteDeliveryWork`) below
   * which processing is not held back, however busy the loop; 0: never.
   */
  deliveriesRoomBelow?: number;
  sampleMs?: number;
  now?: () => number;
  sleep?: (ms: number) => Promise<void>;
  /** The event loop's utilization since the previous call (0-1); Node's eventLoopUtilization by default. */
  utilization?: () => number;
}

export class IngestFirst implements Pacer {
  private lastIngestAt = Number.NEGATIVE_INFINITY;
  private readyAt = 0;
  private sampledAt = Number.NEGATIVE_INFINITY;
  private load = 0;
  /** The utilization smoothed over about a second (ROOM_ALPHA per sample; a lock-wait sample counts as 1): what `roomBelow` is compared with. */
  private steadyLoad = Number.NaN;
  /** The last sample found room (it and the smoothed utilization under `roomBelow`, no lock wait): a worker from `from` waits on its own charges only. */
  private room = false;
  private lockWaited = false;
  /** The deliveries' handlers' time on the loop booked since the last sample, in ms. */
  private deliveriesMs = 0;
  /** When that booking began (the last sample, or the pacer's making): sampledAt starts at -Infinity. */
  private deliveriesSince: number;
  /** The handlers' share of the loop smoothed like steadyLoad. */
  private steadyDeliveries = Number.NaN;
  /** The last sample found the handlers' share under `deliveriesRoomBelow` (it and the smoothed one, no lock wait): nothing is held back. */
  private deliveriesRoom = false;
  /** Off until the app starts its workers; tests driving runUntilIdle() are not paced. */
  enabled = false;

  private readonly share: number;
  private readonly activeWindowMs: number;
  private readonly busyAbove: number;
  private readonly roomBelow: number;
  private readonly deliveriesRoomBelow: number;
  private readonly sampleMs: number;
  private readonly now: () => number;
  private readonly sleep: (ms: number) => Promise<void>;
  private readonly utilization: () => number;

  constructor(o: IngestFirstOptions = {}) {
    this.share = o.share ?? 0.25;
    this.activeWindowMs = o.activeWindowMs ?? 250;
    this.busyAbove = o.busyAbove ?? 0.9;
    this.roomBelow = o.roomBelow ?? 0.8;
    this.deliveriesRoomBelow = o.deliveriesRoomBelow ?? 0.08;
    this.sampleMs = o.sampleMs ?? 250;
    this.now = o.now ?? (() => performance.now());
    this.sleep = o.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
    this.utilization = o.utilization ?? loopUtilization();
    this.deliveriesSince = this.now();
    if (!(this.share > 0 && this.share <= 1)) throw new RangeError(`share must be in (0, 1], got ${this.share}`);
  }

  /** A delivery was committed. */
  noteIngest(): void {
    this.lastIngestAt = this.now();
  }

  /** A delivery request's handler held the loop for `loopMs` (its awaits left out). */
  noteDeliveryWork(loopMs: number): void {
    this.deliveriesMs += loopMs;
  }

  /**
   * The ingest commit found the write lock held by another process (a `replay`, a `work`
   * process) and will try again. Deliveries are waiting, so the next sample counts as a busy
   * loop, whatever its utilization: the processing connection waits for that lock on timers,
   * which leaves the loop idle-looking, and processing that then ran flat out competed with
   * the waiting deliveries (measured: bench/README.md, "Seventh round").
   */
  noteLockWait(): void {
    this.lastIngestAt = this.now();
    this.lockWaited = true;
    // At once, not at the next sample: nothing held back only while no delivery waits for the lock.
    this.deliveriesRoom = false;
  }

  /**
   * Resolves when processing may go on: at once, or after the loop had its share. True while
   * processing is held back (the worker then keeps one job group in flight at most).
   */
  async turn(busyAbove = this.busyAbove, own?: Account): Promise<boolean> {
    if (!this.enabled) return false;
    const now = this.now();
    if (now - this.sampledAt >= this.sampleMs) {
      // Taken either way: each call measures from the previous one.
      const utilization = this.utilization();
      this.load = this.lockWaited ? 1 : utilization;
      // The first sample as it is; then each one weighs ROOM_ALPHA.
      this.steadyLoad = smoothed(this.steadyLoad, this.load);
      // Never while a delivery waits for another process's write lock: each fold is a write.
      // Gained slowly (the smoothed utilization), lost at once (this sample's): a burst after a
      // quiet spell finds the folds on the shared account from its first busy quarter-second.
      this.room = !this.lockWaited && this.steadyLoad < this.roomBelow && this.load < this.roomBelow;
      // The handlers' share, the same way: how much the deliveries themselves take of the loop,
      // whoever keeps the rest of it busy.
      if (now > this.deliveriesSince) {
        const share = Math.min(1, this.deliveriesMs / (now - this.deliveriesSince));
        this.steadyDeliveries = smoothed(this.steadyDeliveries, share);
        this.deliveriesRoom = !this.lockWaited && this.steadyDeliveries < this.deliveriesRoomBelow && share < this.deliveriesRoomBelow;
        this.deliveriesMs = 0;
        this.deliveriesSince = now;
      } else this.deliveriesRoom = false;
      this.lockWaited = false;
      this.sampledAt = now;
    }
    if (this.load < busyAbove || this.deliveriesRoom || now - this.lastIngestAt >= this.activeWindowMs) return false;
    const readyAt = own && this.room ? own.readyAt : this.readyAt;
    if (readyAt > now) await this.sleep(readyAt - now);
    return true;
  }

  /**
   * The same budget, for a worker that is held back from a lower loop utilization (0-1). Its
   * charges go to the shared account and to its own, which it waits on while the loop has room.
   */
  from(busyAbove: number): Pacer {
    const own: Account = { readyAt: 0 };
    return { turn: () => this.turn(busyAbove, own), charge: (ms) => this.charge(ms, own) };
  }

  /** Books `ms` of processing that just ended (to `own` too: a worker's account from `from`). */
  charge(ms: number, own?: Account): void {
    const ended = this.now();
    const owed = (ms * (1 - this.share)) / this.share;
    // Stretches running side by side (the fetcher's) add up their debts; bounded, so a long
    // stretch or a quiet spell of flat-out processing never parks the next one for long.
    const after = (readyAt: number) => Math.min(Math.max(readyAt, ended) + owed, ended + MAX_WAIT_MS);
    this.readyAt = after(this.readyAt);
    if (own) own.readyAt = after(own.readyAt);
  }
}

/** When the next stretch may start: the shared account's, or one worker's own (`from`). */
interface Account {
  readyAt: number;
}

/** `steady` moved ROOM_ALPHA of the way to `sample`; the first sample (`steady` NaN) as it is. */
function smoothed(steady: number, sample: number): number {
  return Number.isNaN(steady) ? sample : steady + ROOM_ALPHA * (sample - steady);
}

function loopUtilization(): () => number {
  let last = performance.eventLoopUtilization();
  return () => {
    const current = performance.eventLoopUtilization();
    const { utilization } = performance.eventLoopUtilization(current, last);
    last = current;
    return utilization;
  };
}
