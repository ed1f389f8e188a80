import { randomUUID } from 'node:crypto';
import { isDecisionError, PauseSourceError } from '../hiring/errors.js';
import type { Logger } from '../observability/logger.js';
import { REPEATED_FAILURE_LOG_MS, RepeatedFailureLog } from '../observability/repeatedFailure.js';
import type { Clock } from '../util/clock.js';
import { backoffDelay, JOB_BACKOFF, MAX_RETRY_AFTER_MS, retryDelay, type BackoffOptions } from './backoff.js';
import { DeadLetterLog } from './DeadLetterLog.js';
import { JobFailureLog } from './JobFailureLog.js';
import { isDone, isUntested, type BatchJobHandler, type BatchOutcome, type JobHandler } from './JobHandler.js';
import type { ClaimedJob, JobQueue } from './JobQueue.js';
import type { Pacer } from './Pacer.js';
import type { HeldSources, SourceGate } from './SourceGate.js';
import { SourceAnswers } from './SourceAnswers.js';
import { SourceHolds } from './SourceHolds.js';
import type { WorkSource } from './WorkSource.js';

export { failedBeforeRequest, type BatchItemResult, type BatchJobHandler, type BatchOutcome, type HandlerResult, type JobHandler } from './JobHandler.js';
export type { Pacer } from './Pacer.js';
export type { HeldSources, SourceGate } from './SourceGate.js';
export { OUTAGE_HOLD_AFTER, OUTAGE_HOLD_FIRST_MS, OUTAGE_HOLD_MAX_MS } from './SourceHolds.js';
export type { WorkSource } from './WorkSource.js';

/** How long a worker leaves its source alone after the source's run failed. */
const SOURCE_RETRY_MS = 1000;

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
   * The source of every job this worker runs (a sink's lane: `sink:<name>`). While it is blocked
   * (the sink disabled, or throttled by a Retry-After) no claim is tried: a claim that leaves it
   * out walks the kind's whole due backlog, every poll.
   */
  soleSource?: string;
}

/** The dead letter of a job claimed again after its last attempt never finished. */
export const UNFINISHED_LAST_ATTEMPT = 'its last attempt never finished (its process ended, it hung past its lease, or its outcome could not be recorded): not run again';

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
  private running = false;
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  private ticking = false;
  private again = false;
  /** While held back, ticks alternate between the source and the queue: this says whose turn is first. */
  private queueFirst = false;
  /** After a failed source run, the source is not tried again before this time (the worker's clock). */
  private sourceRetryAt = 0;
  /**
   * Which runs of each source went through since this worker started: `failing` in fail, and
   * whether a redirect is the source's as a whole or one read's (SourceAnswers).
   */
  private readonly answers = new SourceAnswers();
  /** Sources held by a Retry-After or the outage breaker. */
  private readonly holds: SourceHolds;
  /** Jobs claimed as a paused source's probe (HeldSources.probes), until their run ends. */
  private readonly probeJobs = new Set<number>();
  /** The blocked sources of the last claim that found nothing else due: kicks skip the claim until a poll. */
  private emptyWhileBlocked: string | null = null;

  private readonly kinds: string[];

  /** Jobs per claim in the loop: the largest batch of a batch handler (> 1), else no limit but the free slots. */
  private readonly batchLimit: number;

  /** A claim or a source run that fails at every poll (the write lock held elsewhere for minutes, a full disk): logged once a minute, not four times a second. */
  private readonly claimFailures: RepeatedFailureLog;
  private readonly sourceFailures: RepeatedFailureLog;
  private readonly jobFailures: JobFailureLog;
  private readonly deadLetters: DeadLetterLog;

  constructor(private readonly opts: WorkerOptions) {
    this.kinds = Object.keys(opts.handlers);
    const { logger, clock } = opts;
    this.claimFailures = new RepeatedFailureLog({ logger, clock, level: 'warn', msg: 'job claim failed; will retry', recovered: 'job claims work again' });
    this.jobFailures = new JobFailureLog(clock);
    this.deadLetters = new DeadLetterLog(logger, clock);
    this.holds = new SourceHolds(logger);
    this.sourceFailures = new RepeatedFailureLog({ logger, clock, level: 'error', msg: 'processing new events failed; will retry', recovered: 'processing new events works again' });
    const batches = Object.values(opts.handlers).flatMap((h) => (typeof h === 'function' || h.maxJobs <= 1 ? [] : [h.maxJobs]));
    this.batchLimit = batches.length > 0 ? Math.max(...batches) : Infinity;
  }

  private gated(kind: string): boolean {
    return this.opts.gatedKinds ? this.opts.gatedKinds.includes(kind) : true;
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
        const free = this.concurrency - this.inflightJobs;
        const started = performance.now();
        const claimLimit = held ? Math.min(free, this.groupSize) : free;
        if (!this.opts.source) claimed = await this.claimAndStart(claimLimit, polled);
        else if (held) {
          // One group per turn, the source's and the queue's in turn, so neither waits for the other's backlog.
          const first = this.queueFirst;
          this.queueFirst = !first;
          claimed = first ? await this.claimAndStart(claimLimit, true) : await this.runSource();
          if (claimed === 0) claimed = first ? await this.runSource() : await this.claimAndStart(claimLimit, true);
        } else {
          const fromSource = await this.runSource();
          // Jobs (retries, replays) are rare beside new events: looked for with a read first.
          claimed = fromSource + (await this.claimAndStart(this.concurrency - this.inflightJobs, true));
        }
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
      const p: Promise<void> = this.runGroup(group).finally(() => {
        this.opts.pacer?.charge(performance.now() - started);
        this.inflight.delete(p);
        this.inflightJobs -= group.length;
        this.kick();
      });
      this.inflight.add(p);
      this.inflightJobs += group.length;
    }
    return jobs.length;
  }

  /**
   * `polled`: an idle poll looks with a read first (see JobQueue.claim), so polling takes
   * no write lock while nothing is due; a kick (something was enqueued) claims at once.
   */
  private async claim(limit: number, polled = false): Promise<ClaimedJob[]> {
    const now = this.opts.clock.now();
    this.deadLetters.sayDeadLetters(REPEATED_FAILURE_LOG_MS);
    // With no gated kind, the gate is not asked: asking takes a paused source's probe slot,
    // which belongs to a worker whose jobs can prove the key works again.
    // Throttled sources first: a paused source that is also throttled must not spend its probe
    // on a claim that cannot take its jobs.
    let throttled = this.holds.throttled(now);
    const held: HeldSources = this.opts.gatedKinds?.length === 0 ? { blocked: [], probes: [] } : await this.opts.gate.blockedSources(now, throttled);
    if (held.released && held.released.length > 0) throttled = this.holds.release(held.released, now);
    const blocked = [...held.blocked, ...throttled];
    if (this.opts.soleSource !== undefined && blocked.includes(this.opts.soleSource)) return [];
    // A claim that leaves sources out walks their due jobs (7 ms at 45,000 held reads), and a
    // kick's claim takes the write lock: while the last one found nothing but held work, kicks
    // (one per fold) wait for the next poll, which looks with a read first. A claim with a
    // probe is never skipped: the probe's period has begun.
    const key = blocked.length > 0 ? blocked.join('\n') : null;
    if (!polled && key !== null && held.probes.length === 0 && this.emptyWhileBlocked === key) return [];
    const jobs = await this.opts.queue.claim(this.owner, limit, blocked, this.kinds, this.opts.gatedKinds, { checkFirst: polled, probes: held.probes });
    this.emptyWhileBlocked = jobs.length === 0 ? key : null;
    const probed = new Set<string>();
    for (const job of jobs) {
      if (job.source && held.probes.includes(job.source) && this.gated(job.kind)) {
        this.probeJobs.add(job.id);
        probed.add(job.source);
      }
    }
    // The probe arms come first: when their jobs alone filled the claim, a probed source without
    // one may have been cut by the limit, not found with nothing due. Its probe was spent by the
    // gate: the next claim probes it again (else the same sources, first in the gate's order,
    // would take every period's probe and the others none).
    if (probed.size >= limit) {
      for (const source of held.probes) if (!probed.has(source)) await this.probeAgain(source);
    }
    return jobs;
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
      await Promise.all(this.groups(jobs).map((g) => this.runGroup(g)));
      ran += fromSource + jobs.length;
    }
    return ran;
  }

  private logFor(job: ClaimedJob): Logger {
    return this.opts.logger.child({ job_id: job.id, kind: job.kind, event_id: job.event_id, attempt: job.attempts });
  }

  /** Runs jobs of one kind (one job, or a batch) and writes each outcome back under its lease token. */
  private async runGroup(claimed: ClaimedJob[]): Promise<void> {
    const { queue } = this.opts;
    const settle = (job: ClaimedJob, outcome: Parameters<NonNullable<WorkerOptions['onJobSettled']>>[1]) => this.opts.onJobSettled?.(job, outcome);
    const probes = claimed.filter((job) => this.probeJobs.delete(job.id));
    // Claimed past its last attempt: that attempt never finished (its process ended, it hung past
    // its lease, or its outcome could not be recorded). Not run again: a job that kills or hangs
    // its worker every time would otherwise do so for ever.
    const jobs: ClaimedJob[] = [];
    for (const job of claimed) {
      if (job.attempts <= job.max_attempts) {
        jobs.push(job);
        continue;
      }
      this.answers.forget(job.id);
      try {
        await this.fail(job, Object.assign(new Error(UNFINISHED_LAST_ATTEMPT), { permanent: true }), this.logFor(job), (o) => settle(job, o));
      } catch (recordErr) {
        this.logFor(job).error({ err: (recordErr as Error).message }, 'could not dead-letter a job claimed past its last attempt; tried again at its next claim');
        settle(job, 'lost');
      }
    }
    // A probe dead-lettered unrun sent no request: the next claim probes again.
    for (const job of probes) if (!jobs.includes(job)) await this.probeAgain(job.source!);
    if (jobs.length === 0) return;
    const run = this.answers.startRun();
    const handler = this.opts.handlers[jobs[0]!.kind];
    let out: BatchOutcome;
    try {
      if (!handler) throw Object.assign(new Error(`no handler for job kind ${jobs[0]!.kind}`), { permanent: true });
      if (typeof handler === 'function') out = { results: [await handler(jobs[0]!)] };
      else {
        out = await handler.run(jobs);
        if (out.results.length !== jobs.length) throw new Error(`batch handler returned ${out.results.length} results for ${jobs.length} jobs`);
      }
    } catch (err) {
      out = { results: jobs.map(() => ({ error: err })) };
    }

    const resultOf = new Map(jobs.map((job, i) => [job, out.results[i]]));
    // A job's streak of source-wide-only failures (redirects) ends with any other outcome.
    for (const [job, r] of resultOf) if (!(r !== undefined && 'error' in r && r.error instanceof PauseSourceError && r.error.sourceWideOnly)) this.answers.forget(job.id);
    const done = jobs.filter((job) => isDone(resultOf.get(job)));
    /** Jobs that went through after a request to their source: they prove it works. */
    const worked: ClaimedJob[] = [];
    if (done.length > 0) {
      try {
        const completed = new Set((await queue.completeMany(done, out.onComplete)).map((j) => j.id));
        for (const job of done) {
          if (!completed.has(job.id)) this.logFor(job).warn('job finished after its lease was taken over; result of the newer attempt kept');
          else if (!isUntested(resultOf.get(job))) worked.push(job);
          settle(job, completed.has(job.id) ? 'done' : 'lost');
        }
      } catch (recordErr) {
        // The database refused the completion (lock held elsewhere, disk full). Nothing is lost:
        // the jobs are still 'running' and run again when their lease expires or at the next start.
        this.opts.logger.error({ err: (recordErr as Error).message, jobs: done.length }, 'could not record the job outcome; it runs again after its lease');
        done.forEach((job) => settle(job, 'lost'));
      }
    }
    for (const [i, job] of jobs.entries()) {
      const r = out.results[i];
      if (r === undefined || isDone(r)) continue;
      try {
        if ('error' in r) {
          await this.fail(job, r.error, this.logFor(job), (o) => settle(job, o));
          continue;
        }
        if (!('rescheduleAt' in r)) continue;
        const ok = await queue.reschedule(job, r.rescheduleAt, { refund: true, error: r.note ?? null });
        settle(job, ok ? 'rescheduled' : 'lost');
        if (!isUntested(r)) worked.push(job);
      } catch (recordErr) {
        this.logFor(job).error({ err: (recordErr as Error).message }, 'could not record the job outcome; it runs again after its lease');
        settle(job, 'lost');
      }
    }
    // Any job that went through ends its group's run of failures in the log (a fold as well as a
    // read): the next failure is said at once.
    for (const job of worked) {
      this.jobFailures.wentThrough(job);
      this.deadLetters.wentThrough(job);
    }
    // Only a job of a gated kind that went through proves the source works again.
    const sources = new Set(worked.filter((j) => j.source && this.gated(j.kind)).map((j) => j.source!));
    for (const source of sources) {
      this.holds.wentThrough(source);
      this.answers.answer(source, run);
      try {
        await this.opts.gate.resume(source);
      } catch (err) {
        this.opts.logger.warn({ source, err: (err as Error).message }, 'could not record that the source works again');
      }
    }
    // A probe that sent no request (it waited for the poll spacing, reused a stored result, or
    // failed before its request) said nothing of the key: the next claim probes again, instead of the source's reads
    // waiting a whole period more.
    for (const job of probes) {
      if (!resultOf.has(job) || !isUntested(resultOf.get(job)) || sources.has(job.source!)) continue;
      await this.probeAgain(job.source!);
    }
  }

  /** The source's probe sent no request (untested, dead-lettered unrun, or not claimed for want of room): due again at once. */
  private async probeAgain(source: string): Promise<void> {
    try {
      await this.opts.gate.probeAgain?.(source);
    } catch (err) {
      this.opts.logger.warn({ source, err: (err as Error).message }, 'could not record that the probe sent no request; the source is probed at its next period');
    }
  }

  private async fail(job: ClaimedJob, err: unknown, log: Logger, settle: (o: 'done' | 'retry' | 'dead' | 'paused' | 'lost') => void) {
    const { queue, clock } = this.opts;
    const message = (err as Error).message ?? String(err);
    const now = clock.now();
    const pausing = isDecisionError(err) && err.decision === 'pause_source' && Boolean(job.source) && this.gated(job.kind);
    // A redirect pauses the source only while it is the source's as a whole (SourceAnswers).
    const verdict = pausing && err instanceof PauseSourceError && err.sourceWideOnly ? this.answers.judge(job.source!, job.id) : 'source';
    const alone = verdict === 'alone';
    if (pausing && verdict === 'wait') {
      const delay = this.opts.pauseRetryMs ?? 5 * 60_000;
      const ok = await queue.reschedule(job, now + delay, { refund: true, error: message });
      this.jobFailures.logFailure(job, message, log, { source: job.source, err: message, retry_in_ms: delay }, "this read failed as if its source were misconfigured: tried again once after the probe period, the source runs on meanwhile (paused then only if none of its other reads was answered)");
      return settle(ok ? 'retry' : 'lost');
    }
    if (pausing && !alone) {
      const status = (err as { status?: number }).status ?? 401;
      // At error from the failure that paused it only: the reads in flight beside it, and the
      // probes of a paused source, at debug (its pause stays in /readyz, status and the metrics).
      const paused = await this.opts.gate.pause(job.source!, status, message);
      // A redirect pausing a source that answered before may be one moved path: said so, not "fix the URL".
      const answeredBefore = err instanceof PauseSourceError && err.sourceWideOnly && this.answers.hasAnswered(job.source!);
      const summary = err instanceof PauseSourceError ? ((answeredBefore ? err.answeredSummary : undefined) ?? err.summary) : undefined;
      log[paused ? 'error' : 'debug']({ source: job.source, err: message }, summary ?? 'API key refused: fetching for this source is paused until a working key is configured');
      const ok = await queue.reschedule(job, now + (this.opts.pauseRetryMs ?? 5 * 60_000), { refund: true, error: message });
      return settle(ok ? 'paused' : 'lost');
    }
    const backoff = this.opts.backoff ?? JOB_BACKOFF;
    const told = isDecisionError(err) && err.decision === 'retry_after' ? Math.min((err as unknown as { retryAfterMs: number }).retryAfterMs, MAX_RETRY_AFTER_MS) : null;
    // The source holds even when this job ends here (its last attempt): its other reads wait too.
    if (told !== null && told > 0 && (err as { throttlesSource?: boolean }).throttlesSource === true && job.source && this.gated(job.kind)) {
      this.holds.throttle(job.source, now, told, log);
    }
    // A job a newer one of the same work supersedes (a replay's read of the same event): the wait
    // it was told still holds its source (above), but it ends here instead of being retried
    // beside the newer one.
    if ((err as { superseded?: boolean }).superseded === true) {
      const ok = await queue.complete(job);
      return settle(ok ? 'done' : 'lost');
    }
    const permanent = alone || (isDecisionError(err) && err.decision === 'permanent') || (err as { permanent?: boolean }).permanent === true;
    // The remote is down or overloaded (5xx, no connection, a timeout, a 429), not this job wrong.
    const outage = !permanent && (err as { outage?: boolean }).outage === true;
    const streak = outage && job.source && this.gated(job.kind) ? this.holds.holdForOutage(job.source, now, log) : 0;
    // Nothing of the source answered since this process started: after a restart mid-outage,
    // its first failure continues the outage (the streak before the restart is not remembered).
    const failing = streak >= 2 || (streak === 1 && !this.answers.hasAnswered(job.source!));
    // An outage outlasts max_attempts: such a job is retried at its longest backoff for as long
    // as it lasts (a night-long outage gave up every result unread after its 25th failure). Only
    // while its source is failing as a whole (this failure and the one before it, with nothing
    // through in between): one read the service fails while others succeed still ends, seen.
    // From the attempt before its last, it goes back to the one before that: each of its runs is
    // then the attempt before its last, never its last, and a job claimed again after its last
    // attempt never finished is dead-lettered unrun: a crash during an outage must not make that
    // of the reads in flight.
    if (failing && job.attempts >= job.max_attempts - 1) {
      const delay = Math.max(backoffDelay(job.attempts, this.opts.backoff ?? JOB_BACKOFF), told ?? 0);
      const ok = await queue.reschedule(job, now + delay, { attempts: Math.max(0, job.max_attempts - 2), error: message });
      this.jobFailures.logFailure(job, message, log, { err: message, retry_in_ms: delay }, 'job failed on an outage of the remote; it is retried for as long as the outage lasts');
      return settle(ok ? 'retry' : 'lost');
    }
    if (permanent || job.attempts >= job.max_attempts) {
      const said = alone ? `${message}; only this read: the source's other reads are answered` : message;
      const ok = await queue.deadLetter(job, said);
      this.deadLetters.logDeadLetter(job, said, log);
      if (ok && this.opts.onDeadLetter) {
        try {
          await this.opts.onDeadLetter(job, said);
        } catch (followErr) {
          // The job is dead and stays so: not "runs again after its lease".
          log.error({ err: (followErr as Error).message }, 'job dead-lettered, but what follows its dead letter failed: retried at the next sweep');
        }
      }
      return settle(ok ? 'dead' : 'lost');
    }
    const delay = retryDelay(job.attempts, backoff, told);
    const ok = await queue.reschedule(job, now + delay, { error: message });
    this.jobFailures.logFailure(job, message, log, { err: message, retry_in_ms: delay }, 'job failed; will retry');
    settle(ok ? 'retry' : 'lost');
  }
}
