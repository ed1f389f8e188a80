import { randomUUID } from 'node:crypto';
import { isDecisionError } from '../hiring/errors.js';
import type { Logger } from '../observability/logger.js';
import type { Clock } from '../util/clock.js';
import { backoffDelay, JOB_BACKOFF, type BackoffOptions } from './backoff.js';
import type { ClaimedJob, JobQueue } from './JobQueue.js';

/** What a handler may ask for instead of "done": run again later (polling), without it counting as a failure. */
export type HandlerResult = void | { rescheduleAt: number; note?: string };
export type JobHandler = (job: ClaimedJob) => Promise<HandlerResult>;

export interface SourceGate {
  /** Sources whose jobs must not be claimed now (paused after a 401/403). */
  blockedSources(now: number): Promise<string[]>;
  /** Record a refused key; the job is put back without burning an attempt. */
  pause(source: string, status: number, detail: string): Promise<void>;
  /** A job of the source succeeded against the API: the key works. */
  resume(source: string): Promise<void>;
}

export interface WorkerOptions {
  queue: JobQueue;
  /** Handlers by job kind; this worker claims only these kinds. */
  handlers: Record<string, JobHandler>;
  clock: Clock;
  logger: Logger;
  gate: SourceGate;
  concurrency?: number;
  pollIntervalMs?: number;
  backoff?: BackoffOptions;
  /**
   * Job kinds the gate applies to (default: all of this worker's kinds). Pausing a source
   * stops fetching from the service, not the folding of its events into applications.
   */
  gatedKinds?: readonly string[];
  /** Called after a job was dead-lettered, e.g. to put what it was waiting for into a final state. */
  onDeadLetter?: (job: ClaimedJob, error: string) => Promise<void>;
  /** Paused-source jobs come back after this, to try the key again. */
  pauseRetryMs?: number;
  onJobSettled?: (job: ClaimedJob, outcome: 'done' | 'rescheduled' | 'retry' | 'dead' | 'paused' | 'lost') => void;
}

/**
 * Runs queued jobs inside the receiver process with bounded concurrency.
 * Every outcome is written back under the job's lease token; a failure backs
 * off, and past max_attempts the job is dead-lettered with its last error.
 */
export class Worker {
  readonly owner = `worker-${process.pid}-${randomUUID().slice(0, 8)}`;
  private readonly inflight = new Set<Promise<void>>();
  private running = false;
  private timer: NodeJS.Timeout | null = null;
  private immediate: NodeJS.Immediate | null = null;
  private ticking = false;
  private again = false;

  private readonly kinds: string[];

  constructor(private readonly opts: WorkerOptions) {
    this.kinds = Object.keys(opts.handlers);
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
    while (this.inflight.size > 0) await Promise.allSettled([...this.inflight]);
  }

  /** Something was enqueued: look now rather than at the next poll. */
  kick(): void {
    if (!this.running) return;
    if (this.ticking) {
      this.again = true;
      return;
    }
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

  private async tick(): Promise<void> {
    this.timer = null;
    if (!this.running) return;
    this.ticking = true;
    let claimed = 0;
    try {
      claimed = await this.claimAndStart(this.concurrency - this.inflight.size);
    } catch (err) {
      this.opts.logger.warn({ err: (err as Error).message }, 'job claim failed; will retry');
    } finally {
      this.ticking = false;
    }
    if (!this.running) return;
    const delay = this.again || claimed > 0 ? 0 : (this.opts.pollIntervalMs ?? 250);
    this.again = false;
    if (this.inflight.size < this.concurrency || delay > 0) this.timer = setTimeout(() => void this.tick(), delay);
  }

  private async claimAndStart(free: number): Promise<number> {
    if (free <= 0) return 0;
    const now = this.opts.clock.now();
    const jobs = await this.opts.queue.claim(this.owner, free, await this.opts.gate.blockedSources(now), this.kinds, this.opts.gatedKinds);
    for (const job of jobs) {
      const p: Promise<void> = this.run(job).finally(() => {
        this.inflight.delete(p);
        this.kick();
      });
      this.inflight.add(p);
    }
    return jobs.length;
  }

  /** For tests and the CLI: run every job that is due now, until none is left. Returns how many ran. */
  async runUntilIdle(maxJobs = 10_000): Promise<number> {
    let ran = 0;
    while (ran < maxJobs) {
      const now = this.opts.clock.now();
      const jobs = await this.opts.queue.claim(this.owner, this.concurrency, await this.opts.gate.blockedSources(now), this.kinds, this.opts.gatedKinds);
      if (jobs.length === 0) break;
      await Promise.all(jobs.map((j) => this.run(j)));
      ran += jobs.length;
    }
    return ran;
  }

  private async run(job: ClaimedJob): Promise<void> {
    const { queue, logger, clock } = this.opts;
    const handler = this.opts.handlers[job.kind];
    const log = logger.child({ job_id: job.id, kind: job.kind, event_id: job.event_id, attempt: job.attempts });
    const settle = (outcome: Parameters<NonNullable<WorkerOptions['onJobSettled']>>[1]) => this.opts.onJobSettled?.(job, outcome);
    try {
      if (!handler) throw Object.assign(new Error(`no handler for job kind ${job.kind}`), { permanent: true });
      const result = await handler(job);
      if (result && 'rescheduleAt' in result) {
        const ok = await queue.reschedule(job, result.rescheduleAt, { refund: true, error: result.note ?? null });
        settle(ok ? 'rescheduled' : 'lost');
      } else {
        const ok = await queue.complete(job);
        if (!ok) log.warn('job finished after its lease was taken over; result of the newer attempt kept');
        settle(ok ? 'done' : 'lost');
      }
      // Only a job of a gated kind that went through proves the source works again.
      if (job.source && this.gated(job.kind)) await this.opts.gate.resume(job.source);
    } catch (err) {
      try {
        await this.fail(job, err, log, settle);
      } catch (recordErr) {
        // The database refused even the failure record (lock held elsewhere, disk full). Nothing is
        // lost: the job is still 'running' and runs again when its lease expires or at the next start.
        log.error({ err: (recordErr as Error).message }, 'could not record the job outcome; it runs again after its lease');
        settle('lost');
      }
    }
  }

  private async fail(job: ClaimedJob, err: unknown, log: Logger, settle: (o: 'retry' | 'dead' | 'paused' | 'lost') => void) {
    const { queue, clock } = this.opts;
    const message = (err as Error).message ?? String(err);
    const now = clock.now();
    if (isDecisionError(err) && err.decision === 'pause_source' && job.source && this.gated(job.kind)) {
      const status = (err as { status?: number }).status ?? 401;
      await this.opts.gate.pause(job.source, status, message);
      log.error({ source: job.source, err: message }, 'API key refused: fetching for this source is paused until a working key is configured');
      const ok = await queue.reschedule(job, now + (this.opts.pauseRetryMs ?? 5 * 60_000), { refund: true, error: message });
      return settle(ok ? 'paused' : 'lost');
    }
    const permanent = (isDecisionError(err) && err.decision === 'permanent') || (err as { permanent?: boolean }).permanent === true;
    if (permanent || job.attempts >= job.max_attempts) {
      const ok = await queue.deadLetter(job, message);
      log.error({ err: message, attempts: job.attempts }, 'job dead-lettered');
      if (ok) await this.opts.onDeadLetter?.(job, message);
      return settle(ok ? 'dead' : 'lost');
    }
    let delay = backoffDelay(job.attempts, this.opts.backoff ?? JOB_BACKOFF);
    if (isDecisionError(err) && err.decision === 'retry_after') {
      delay = Math.max(delay, (err as unknown as { retryAfterMs: number }).retryAfterMs);
    }
    const ok = await queue.reschedule(job, now + delay, { error: message });
    log.warn({ err: message, retry_in_ms: delay }, 'job failed; will retry');
    settle(ok ? 'retry' : 'lost');
  }
}
