import { randomUUID } from 'node:crypto';
import type { Logger } from '../observability/logger.js';
import { REPEATED_FAILURE_LOG_MS, RepeatedFailureLog } from '../observability/repeatedFailure.js';
import type { Clock } from '../util/clock.js';
import type { BackoffOptions } from './backoff.js';
import { DeadLetterLog } from './DeadLetterLog.js';
import type { BatchJobHandler, JobHandler } from './JobHandler.js';
import type { ClaimedJob, JobQueue } from './JobQueue.js';
import { JobRunner } from './JobRunner.js';
import type { Pacer } from './Pacer.js';
import { gatesKind, type HeldSources, type SourceGate } from './SourceGate.js';
import { SourceHolds, type SourceHold } from './SourceHolds.js';
import type { WorkSource } from './WorkSource.js';

export { failedBeforeRequest, type BatchItemResult, type BatchJobHandler, type BatchOutcome, type HandlerResult, type JobHandler } from './JobHandler.js';
export { UNFINISHED_LAST_ATTEMPT } from './JobRunner.js';
export type { Pacer } from './Pacer.js';
export type { HeldSources, SourceGate } from './SourceGate.js';
export { OUTAGE_HOLD_AFTER, OUTAGE_HOLD_FIRST_MS, OUTAGE_HOLD_MAX_MS, type HoldReason, type SourceHold } from './SourceHolds.js';
export type { WorkSource } from './WorkSource.js';

/** How long a worker leaves its source alone after the source's run failed. */
const SOURCE_RETRY_MS = 1000;
/** A clock reading this much below the latest one is the wall clock stepping back (NTP slews small offsets, and steps larger ones: ntpd from 128 ms). */
export const CLOCK_STEP_BACK_MS = 1000;

export interface WorkerOptions {
  queue: JobQueue;
  /** Handlers by job kind; this worker claims only these kinds. */
  handlers: Record<string, JobHandler | BatchJobHandler>;
  clock: Clock;
  logger: Logger;
  gate: SourceGate;
  /** Jobs in flight at once (a batch counts each of its jobs). */
  concurrency?: number;
  /** Shares the event loop (IngestFirst): each claim waits its turn, and claims and runs are charged. Not used by runUntilIdle. */
  pacer?: Pacer;
  pollIntervalMs?: number;
  backoff?: BackoffOptions;
  /**
   * Job kinds the gate applies to (default: all of this worker's kinds). Pausing a source
   * stops fetching from the service, not the folding of its events into applications.
   */
  gatedKinds?: readonly string[];
  /**
   * Called after a job was dead-lettered, e.g. to put what it was waiting for into a final state.
   * A separate transaction: its failure is logged, and the owner must sweep for what it left.
   */
  onDeadLetter?: (job: ClaimedJob, error: string) => Promise<void>;
  /** Paused-source jobs come back after this, to try the key again. */
  pauseRetryMs?: number;
  onJobSettled?: (job: ClaimedJob, outcome: 'done' | 'rescheduled' | 'retry' | 'dead' | 'paused' | 'lost') => void;
  /** Run in each tick besides the claim, in units of this worker's batch size. */
  source?: WorkSource;
  /**
   * The wall clock stepped back by `stepMs` (seen at a claim): after this worker's pending jobs and
   * holds, what else its work scheduled on the old clock moves back too (the result reads' poll times).
   */
  onClockStepBack?: (nowMs: number, stepMs: number) => Promise<void>;
  /**
   * The source of every job this worker runs (a sink's lane: `sink:<name>`). While it is blocked
   * (the sink disabled, or throttled by a Retry-After) no claim is tried: a claim that leaves it
   * out walks the kind's whole due backlog, every poll.
   */
  soleSource?: string;
}

/**
 * Runs queued jobs inside the receiver process with bounded concurrency.
 * Every outcome is written back under the job's lease token; a failure backs
 * off, and past max_attempts the job is dead-lettered with its last error.
 */
export class Worker {
  readonly owner = `worker-${process.pid}-${randomUUID().slice(0, 8)}`;
  private readonly inflight = new Set<Promise<void>>();
  /** Jobs held by the runs in `inflight`. */
  private inflightJobs = 0;
  /** The jobs in `inflight` of a gated kind, by source: a failing source's (SourceHolds.failing) are one at a time. */
  private readonly inflightBySource = new Map<string, number>();
  private running = false;
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  private ticking = false;
  private again = false;
  /** While held back, ticks alternate between the source and the queue: this says whose turn is first. */
  private queueFirst = false;
  /** After a failed source run, the source is not tried again before this time (the worker's clock). */
  private sourceRetryAt = 0;
  /** Sources held by a Retry-After or the outage breaker. */
  private readonly holds: SourceHolds;
  /** The latest reading of the clock at a claim, to see it step back. */
  private lastClaimAt = -Infinity;
  /** A step back whose moves failed (the write lock held elsewhere past its wait): moved at the next claim. */
  private unmovedStepMs = 0;
  /** The blocked sources of the last claim that found nothing else due: kicks skip the claim until a poll. */
  private emptyWhileBlocked: string | null = null;

  private readonly kinds: string[];

  /** Jobs per claim in the loop: the largest batch of a batch handler (> 1), else no limit but the free slots. */
  private readonly batchLimit: number;

  /** A claim or a source run that fails at every poll (the write lock held elsewhere for minutes, a full disk): logged once a minute, not four times a second. */
  private readonly claimFailures: RepeatedFailureLog;
  private readonly sourceFailures: RepeatedFailureLog;
  private readonly deadLetters: DeadLetterLog;
  /** Runs the claimed jobs and writes their outcomes back. */
  private readonly runner: JobRunner;

  constructor(private readonly opts: WorkerOptions) {
    this.kinds = Object.keys(opts.handlers);
    const { logger, clock } = opts;
    this.claimFailures = new RepeatedFailureLog({ logger, clock, level: 'warn', msg: 'job claim failed; will retry', recovered: 'job claims work again' });
    this.deadLetters = new DeadLetterLog(logger, clock);
    this.holds = new SourceHolds(logger);
    this.runner = new JobRunner(opts, this.holds, this.deadLetters);
    this.sourceFailures = new RepeatedFailureLog({ logger, clock, level: 'error', msg: 'processing new events failed; will retry', recovered: 'processing new events works again' });
    const batches = Object.values(opts.handlers).flatMap((h) => (typeof h === 'function' || h.maxJobs <= 1 ? [] : [h.maxJobs]));
    this.batchLimit = batches.length > 0 ? Math.max(...batches) : Infinity;
  }

  private gated(kind: string): boolean {
    return gatesKind(this.opts.gatedKinds, kind);
  }

  /** The sources this worker holds at `now` (a Retry-After, the outage breaker): in its memory only, for the metrics and /readyz. */
  heldSources(now: number): SourceHold[] {
    return this.holds.held(now);
  }

  private get concurrency() {
    return this.opts.concurrency ?? 4;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.kick();
  }

  /** Stop claiming and wait for the jobs in hand (their results are written). */
  async stop(): Promise<void> {
    this.running = false;
    if (this.timer) clearTimeout(this.timer);
    if (this.immediate) clearImmediate(this.immediate);
    this.timer = null;
    this.immediate = null;
    // A tick may be waiting for its pacer turn or for its claim: let it end first, so no job
    // is claimed or started after stop() resolved.
    if (this.currentTick) await this.currentTick;
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
    this.deadLetters.sayDeadLetters(0);
  }

  /** Something was enqueued: look now rather than at the next poll. */
  kick(): void {
    if (!this.running) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
    // While the last claim found nothing but held work, kicks do not claim (see claim): nor do
    // they put off the armed poll, which a steady stream of them (a fold each) would for ever.
    if (this.emptyWhileBlocked !== null && this.timer) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    if (this.immediate) return;
    // setImmediate, not setTimeout(0): a timer waits at least 1 ms, which capped a
    // one-at-a-time sink near 300 messages/s (bench/).
    this.immediate = setImmediate(() => {
      this.immediate = null;
      void this.tick();
    });
  }

  /** `polled`: the idle poll's timer, not a kick (nothing is known to be due). */
  private currentTick: Promise<void> | null = null;

  private tick(polled = false): Promise<void> {
    const p = this.tickOnce(polled);
    this.currentTick = p;
    return p.finally(() => {
      if (this.currentTick === p) this.currentTick = null;
    });
  }

  private async tickOnce(polled: boolean): Promise<void> {
    this.timer = null;
    if (!this.running) return;
    this.ticking = true;
    let claimed = 0;
    let heldWithWork = false;
    try {
      const pacer = this.opts.pacer;
      const held = pacer ? await pacer.turn() : false;
      if (!this.running) return;
      // Held back: one group in flight at most (its completion kicks the next claim; the pacer
      // is also asked again meanwhile, below).
      heldWithWork = held && this.inflightJobs > 0;
      if (!heldWithWork) {
        const started = performance.now();
        claimed = await this.takeTurn(held, polled);
        pacer?.charge(performance.now() - started);
        this.claimFailures.succeeded();
      }
    } catch (err) {
      this.claimFailures.failed(err);
    } finally {
      this.ticking = false;
    }
    if (!this.running) return;
    if (heldWithWork) {
      // Asked again meanwhile, not only when that group ends: a group may be a read the service
      // answers after seconds, and once the loop is no longer busy (a burst of deliveries has
      // ended) the free slots fill at once instead of after it. Without this, a read that began
      // during a burst held the other reads back for as long as the service took to answer it
      // (in one run of the reliability suite's slow-upstream test, the three other reads started
      // only when the first was answered, 8 s after the interviews were acknowledged).
      this.timer = setTimeout(() => void this.tick(true), this.opts.pollIntervalMs ?? 250);
      return;
    }
    const delay = this.again || claimed > 0 ? 0 : (this.opts.pollIntervalMs ?? 250);
    this.again = false;
    if (this.inflightJobs < this.concurrency || delay > 0) this.timer = setTimeout(() => void this.tick(delay > 0), delay);
  }

  /** One tick's work: the source's and the queue's (`held`: the pacer holds processing back). Returns the units taken. */
  private async takeTurn(held: boolean, polled: boolean): Promise<number> {
    const free = this.concurrency - this.inflightJobs;
    const claimLimit = held ? Math.min(free, this.groupSize) : free;
    if (!this.opts.source) return this.claimAndStart(claimLimit, polled);
    if (held) {
      // One group per turn, the source's and the queue's in turn, so neither waits for the other's backlog.
      const first = this.queueFirst;
      this.queueFirst = !first;
      const claimed = first ? await this.claimAndStart(claimLimit, true) : await this.runSource();
      if (claimed === 0) return first ? await this.runSource() : await this.claimAndStart(claimLimit, true);
      return claimed;
    }
    const fromSource = await this.runSource();
    // Jobs (retries, replays) are rare beside new events: looked for with a read first.
    return fromSource + (await this.claimAndStart(this.concurrency - this.inflightJobs, true));
  }

  /**
   * The source's work for one tick. A failure (its transaction rolled back, nothing done) is
   * logged and the source is left alone for a second, so the jobs of this worker still run
   * and a source that keeps failing does not take the write lock on every kick.
   */
  private async runSource(): Promise<number> {
    const now = this.opts.clock.now();
    if (!this.opts.source || now < this.sourceRetryAt) return 0;
    try {
      const ran = await this.opts.source.run(this.groupSize);
      this.sourceFailures.succeeded();
      return ran;
    } catch (err) {
      this.sourceRetryAt = now + SOURCE_RETRY_MS;
      this.sourceFailures.failed(err);
      return 0;
    }
  }

  /** One group of this worker's work: its batch handler's size, else one job. Also the source's units per run. */
  private get groupSize(): number {
    return Number.isFinite(this.batchLimit) ? this.batchLimit : 1;
  }

  private async claimAndStart(free: number, polled: boolean): Promise<number> {
    if (free <= 0) return 0;
    // One batch per claim: the next claim (right after, while there is room) builds the next
    // batch while this one is being delivered, instead of all of them waiting for one write.
    const jobs = await this.claim(Math.min(free, this.batchLimit), polled);
    for (const group of this.groups(jobs)) {
      const started = performance.now();
      const sources = group.flatMap((job) => (job.source && this.gated(job.kind) ? [job.source] : []));
      const p: Promise<void> = this.runner.runGroup(group).finally(() => {
        this.opts.pacer?.charge(performance.now() - started);
        this.inflight.delete(p);
        this.inflightJobs -= group.length;
        for (const source of sources) {
          const left = (this.inflightBySource.get(source) ?? 1) - 1;
          if (left > 0) this.inflightBySource.set(source, left);
          else this.inflightBySource.delete(source);
        }
        this.kick();
      });
      this.inflight.add(p);
      this.inflightJobs += group.length;
      for (const source of sources) this.inflightBySource.set(source, (this.inflightBySource.get(source) ?? 0) + 1);
    }
    return jobs.length;
  }

  /**
   * `polled`: an idle poll looks with a read first (see JobQueue.claim), so polling takes
   * no write lock while nothing is due; a kick (something was enqueued) claims at once.
   */
  private async claim(limit: number, polled = false): Promise<ClaimedJob[]> {
    const now = this.opts.clock.now();
    // The first claim compares with the database: the clock may have stepped back while stopped.
    if (this.lastClaimAt === -Infinity) this.lastClaimAt = (await this.opts.queue.latestRecordedTime(this.kinds)) ?? now;
    const stepMs = this.lastClaimAt - now;
    this.lastClaimAt = now;
    // The holds in memory move once, when the step is seen: moved by a later claim, they took
    // with them the holds set since on the clock as it is (a Retry-After told meanwhile ended a
    // step early). The database's moves of a step that met SQLITE_BUSY are done by a later claim,
    // with any step since (time that passed meanwhile is no step): forgotten, the jobs scheduled
    // before it waited the step on top (an hour more after a one-hour step).
    if (stepMs > CLOCK_STEP_BACK_MS) {
      this.holds.moveBack(stepMs);
      this.sourceRetryAt -= stepMs;
      this.unmovedStepMs += stepMs;
    }
    if (this.unmovedStepMs > 0) {
      await this.clockSteppedBack(now, this.unmovedStepMs);
      this.unmovedStepMs = 0;
    }
    this.deadLetters.sayDeadLetters(REPEATED_FAILURE_LOG_MS);
    // With no gated kind, the gate is not asked: asking takes a paused source's probe slot,
    // which belongs to a worker whose jobs can prove the key works again.
    // Throttled sources first: a paused source that is also throttled must not spend its probe
    // on a claim that cannot take its jobs.
    let throttled = this.holds.throttled(now);
    const held: HeldSources = this.opts.gatedKinds?.length === 0 ? { blocked: [], probes: [] } : await this.opts.gate.blockedSources(now, throttled);
    if (held.released && held.released.length > 0) throttled = this.holds.release(held.released, now);
    if (this.opts.soleSource !== undefined && [...held.blocked, ...throttled].includes(this.opts.soleSource)) return [];
    // A source whose service is failing (an outage, not held yet or probed after a hold) runs one
    // job at a time: held when one is in flight, else one job of it, in its turn by run_at (as a
    // probe, first, it went before every other source's due read whenever one slot was free).
    // All at once, a service that hangs took every slot for its timeout (10 s) at each try, and
    // the other sources' reads waited: 30 reads of a source took 2.7 s instead of 0.7 s beside one
    // whose API failed after 1 s (8 failures to the breaker, 4 at a time).
    const failing = this.holds.failing().filter((s) => !held.blocked.includes(s) && !throttled.includes(s) && !held.probes.includes(s));
    const busy = failing.filter((s) => (this.inflightBySource.get(s) ?? 0) > 0);
    const blocked = [...held.blocked, ...throttled, ...busy];
    const oneEach = failing.filter((s) => !busy.includes(s));
    const probes = held.probes;
    // A claim that leaves sources out walks their due jobs (7 ms at 45,000 held reads), and a
    // kick's claim takes the write lock: while the last one found nothing but held work, kicks
    // (one per fold) wait for the next poll, which looks with a read first. A claim with a
    // probe is never skipped: the probe's period has begun.
    const key = blocked.length > 0 ? blocked.join('\n') : null;
    if (!polled && key !== null && probes.length + oneEach.length === 0 && this.emptyWhileBlocked === key) return [];
    const jobs = await this.opts.queue.claim(this.owner, limit, blocked, this.kinds, this.opts.gatedKinds, { checkFirst: polled, probes, oneEach });
    this.emptyWhileBlocked = jobs.length === 0 ? key : null;
    const probed = new Set<string>();
    for (const job of jobs) {
      if (job.source && held.probes.includes(job.source) && this.gated(job.kind)) {
        this.runner.probeJobs.add(job.id);
        probed.add(job.source);
      }
    }
    // The probe arms come first: when their jobs alone filled the claim, a probed source without
    // one may have been cut by the limit, not found with nothing due. Its probe was spent by the
    // gate: the next claim probes it again (else the same sources, first in the gate's order,
    // would take every period's probe and the others none).
    if (probed.size >= limit) {
      for (const source of held.probes) if (!probed.has(source)) await this.runner.probeAgain(source);
    }
    return jobs;
  }

  /**
   * Everything this worker scheduled on the wall clock before it stepped back moves back with it:
   * its pending jobs (their run_at) and its owner's (onClockStepBack) here, its holds in memory by
   * the claim that saw the step (claim), once. The step is
   * measured between two claims, so it is at most the real one: a wait is never cut short by it.
   * At the first claim it is measured against the database, whose rows written before a step
   * already handled stay dated ahead: only jobs scheduled after now move (movePendingBack).
   * A step forward cannot be told from time passing (a suspended host): waits then end early.
   */
  private async clockSteppedBack(now: number, stepMs: number): Promise<void> {
    // Each moves only what was scheduled after `now`, so one done again after a failure moves
    // nothing twice. The holds in memory, which would, were moved by the claim that saw the step.
    const moved = await this.opts.queue.movePendingBack(this.kinds, now, stepMs);
    await this.opts.onClockStepBack?.(now, stepMs);
    this.opts.logger.warn({ step_ms: stepMs, jobs_moved: moved, kinds: this.kinds }, "the wall clock went back: the jobs and waits scheduled on it before keep the wait they had left");
  }

  /** Claimed jobs as they run: batches of one kind up to its handler's maxJobs, other jobs one by one. */
  private groups(jobs: ClaimedJob[]): ClaimedJob[][] {
    const groups: ClaimedJob[][] = [];
    const open = new Map<string, ClaimedJob[]>();
    for (const job of jobs) {
      const handler = this.opts.handlers[job.kind];
      const max = handler && typeof handler !== 'function' ? handler.maxJobs : 1;
      let group = open.get(job.kind);
      if (!group || group.length >= max) {
        group = [];
        groups.push(group);
        open.set(job.kind, group);
      }
      group.push(job);
    }
    return groups;
  }

  /** For tests and the CLI: run every job that is due now (and the source's work), until none is left. Returns how many ran. */
  async runUntilIdle(maxJobs = 10_000): Promise<number> {
    let ran = 0;
    while (ran < maxJobs) {
      const fromSource = this.opts.source ? await this.opts.source.run(Math.min(this.groupSize, maxJobs - ran)) : 0;
      // As a poll: a kick's skip (emptyWhileBlocked) is for the running loop, not for this drain.
      const jobs = ran + fromSource < maxJobs ? await this.claim(this.concurrency, true) : [];
      if (jobs.length === 0 && fromSource === 0) break;
      await Promise.all(this.groups(jobs).map((g) => this.runner.runGroup(g)));
      ran += fromSource + jobs.length;
    }
    return ran;
  }
}
