import { isDecisionError, PauseSourceError } from '../hiring/errors.js';
import type { Logger } from '../observability/logger.js';
import { backoffDelay, JOB_BACKOFF, MAX_RETRY_AFTER_MS, retryDelay } from './backoff.js';
import type { DeadLetterLog } from './DeadLetterLog.js';
import { failureMessage } from './failureMessage.js';
import { JobFailureLog } from './JobFailureLog.js';
import { isDone, isUntested, type BatchItemResult, type BatchOutcome } from './JobHandler.js';
import type { ClaimedJob } from './JobQueue.js';
import { gatesKind } from './SourceGate.js';
import { SourceAnswers } from './SourceAnswers.js';
import type { SourceHolds } from './SourceHolds.js';
import type { WorkerOptions } from './Worker.js';

/** The dead letter of a job claimed again after its last attempt never finished. */
export const UNFINISHED_LAST_ATTEMPT = 'its last attempt never finished (its process ended, it hung past its lease, or its outcome could not be recorded): not run again';

/** Tells the worker's owner (WorkerOptions.onJobSettled) how a job's run ended. */
type Settle = (job: ClaimedJob, outcome: Parameters<NonNullable<WorkerOptions['onJobSettled']>>[1]) => void;
/** The same, for the one job a failure is about. */
type SettleFailed = (o: 'done' | 'retry' | 'dead' | 'paused' | 'lost') => void;

/**
 * The Worker's running of the jobs it claimed: each group (one job, or a batch) runs through its
 * handler, and each outcome is written back under the job's lease token: done, rescheduled,
 * backed off, its source paused, or past max_attempts dead-lettered with its last error. A job
 * that goes through ends its source's holds and pause.
 */
export class JobRunner {
  /** Jobs claimed as a paused source's probe (HeldSources.probes), until their run ends. */
  readonly probeJobs = new Set<number>();
  /**
   * Which runs of each source went through since this worker started: `failing` in fail, and
   * whether a redirect is the source's as a whole or one read's (SourceAnswers).
   */
  private readonly answers = new SourceAnswers();
  private readonly jobFailures: JobFailureLog;

  constructor(
    private readonly opts: WorkerOptions,
    private readonly holds: SourceHolds,
    private readonly deadLetters: DeadLetterLog,
  ) {
    this.jobFailures = new JobFailureLog(opts.clock);
  }

  private gated(kind: string): boolean {
    return gatesKind(this.opts.gatedKinds, kind);
  }

  private logFor(job: ClaimedJob): Logger {
    return this.opts.logger.child({ job_id: job.id, kind: job.kind, event_id: job.event_id, attempt: job.attempts });
  }

  /** Runs jobs of one kind (one job, or a batch) and writes each outcome back under its lease token. */
  async runGroup(claimed: ClaimedJob[]): Promise<void> {
    const settle: Settle = (job, outcome) => this.opts.onJobSettled?.(job, outcome);
    const probes = claimed.filter((job) => this.probeJobs.delete(job.id));
    const jobs = await this.dropUnfinished(claimed, settle);
    // A probe dead-lettered unrun sent no request: the next claim probes again.
    for (const job of probes) if (!jobs.includes(job)) await this.probeAgain(job.source!);
    if (jobs.length === 0) return;
    const run = this.answers.startRun();
    const out = await this.runHandler(jobs);
    await this.record(jobs, out, probes, run, settle);
  }

  /** The jobs of `claimed` to run: those claimed past their last attempt are dead-lettered instead. */
  private async dropUnfinished(claimed: ClaimedJob[], settle: Settle): Promise<ClaimedJob[]> {
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
    return jobs;
  }

  /** The handler's outcome; one that throws (or a batch's count of results that is wrong) fails every job. */
  private async runHandler(jobs: ClaimedJob[]): Promise<BatchOutcome> {
    const handler = this.opts.handlers[jobs[0]!.kind];
    try {
      if (!handler) throw Object.assign(new Error(`no handler for job kind ${jobs[0]!.kind}`), { permanent: true });
      if (typeof handler === 'function') return { results: [await handler(jobs[0]!)] };
      const out = await handler.run(jobs);
      if (out.results.length !== jobs.length) throw new Error(`batch handler returned ${out.results.length} results for ${jobs.length} jobs`);
      return out;
    } catch (err) {
      return { results: jobs.map(() => ({ error: err })) };
    }
  }

  /** Writes back the outcome of run `run`, then what it proves of its sources and its probes. */
  private async record(jobs: ClaimedJob[], out: BatchOutcome, probes: ClaimedJob[], run: number, settle: Settle): Promise<void> {
    const resultOf = new Map(jobs.map((job, i) => [job, out.results[i]]));
    // A job's streak of source-wide-only failures (redirects) ends with any other outcome.
    for (const [job, r] of resultOf) if (!(r !== undefined && 'error' in r && r.error instanceof PauseSourceError && r.error.sourceWideOnly)) this.answers.forget(job.id);
    const done = jobs.filter((job) => isDone(resultOf.get(job)));
    /** Jobs that went through after a request to their source: they prove it works. */
    const worked: ClaimedJob[] = [];
    if (done.length > 0) await this.complete(done, out, resultOf, worked, settle);
    await this.recordOthers(jobs, out, worked, settle);
    const sources = await this.wentThrough(worked, run);
    // A probe that sent no request (it waited for the poll spacing, reused a stored result, or
    // failed before its request) said nothing of the key: the next claim probes again, instead of the source's reads
    // waiting a whole period more.
    for (const job of probes) {
      if (!resultOf.has(job) || !isUntested(resultOf.get(job)) || sources.has(job.source!)) continue;
      await this.probeAgain(job.source!);
    }
  }

  /** The done jobs, completed in one transaction with `out.onComplete`; those that prove their source works join `worked`. */
  private async complete(done: ClaimedJob[], out: BatchOutcome, resultOf: Map<ClaimedJob, BatchItemResult>, worked: ClaimedJob[], settle: Settle): Promise<void> {
    try {
      const completed = new Set((await this.opts.queue.completeMany(done, out.onComplete)).map((j) => j.id));
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

  /** Each job not done, one by one: failed, or rescheduled (a reschedule that sent a request joins `worked`). */
  private async recordOthers(jobs: ClaimedJob[], out: BatchOutcome, worked: ClaimedJob[], settle: Settle): Promise<void> {
    for (const [i, job] of jobs.entries()) {
      const r = out.results[i];
      if (r === undefined || isDone(r)) continue;
      try {
        if ('error' in r) {
          await this.fail(job, r.error, this.logFor(job), (o) => settle(job, o));
          continue;
        }
        if (!('rescheduleAt' in r)) continue;
        const ok = await this.opts.queue.reschedule(job, r.rescheduleAt, { refund: true, error: r.note ?? null });
        settle(job, ok ? 'rescheduled' : 'lost');
        if (!isUntested(r)) worked.push(job);
      } catch (recordErr) {
        this.logFor(job).error({ err: (recordErr as Error).message }, 'could not record the job outcome; it runs again after its lease');
        settle(job, 'lost');
      }
    }
  }

  /** What the jobs that went through prove; returns the sources they prove work again. */
  private async wentThrough(worked: ClaimedJob[], run: number): Promise<Set<string>> {
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
    return sources;
  }

  /** The source's probe sent no request (untested, dead-lettered unrun, or not claimed for want of room): due again at once. */
  async probeAgain(source: string): Promise<void> {
    try {
      await this.opts.gate.probeAgain?.(source);
    } catch (err) {
      this.opts.logger.warn({ source, err: (err as Error).message }, 'could not record that the probe sent no request; the source is probed at its next period');
    }
  }

  private async fail(job: ClaimedJob, err: unknown, log: Logger, settle: SettleFailed) {
    const { queue, clock } = this.opts;
    const message = failureMessage(err);
    // A handler may throw null or a primitive: its flags are read from an object.
    const flags = (typeof err === 'object' && err !== null ? err : {}) as { throttlesSource?: boolean; superseded?: boolean; permanent?: boolean; outage?: boolean };
    const now = clock.now();
    const pausing = isDecisionError(err) && err.decision === 'pause_source' && Boolean(job.source) && this.gated(job.kind);
    // A redirect pauses the source only while it is the source's as a whole (SourceAnswers).
    const verdict = pausing && err instanceof PauseSourceError && err.sourceWideOnly ? this.answers.judge(job.source!, job.id) : 'source';
    const alone = verdict === 'alone';
    if (pausing && verdict !== 'alone') return this.failPausing(job, err, message, now, verdict, log, settle);
    const backoff = this.opts.backoff ?? JOB_BACKOFF;
    const told = isDecisionError(err) && err.decision === 'retry_after' ? Math.min((err as unknown as { retryAfterMs: number }).retryAfterMs, MAX_RETRY_AFTER_MS) : null;
    // The source holds even when this job ends here (its last attempt): its other reads wait too.
    if (told !== null && told > 0 && flags.throttlesSource === true && job.source && this.gated(job.kind)) {
      this.holds.throttle(job.source, now, told, log);
    }
    // A job a newer one of the same work supersedes (a replay's read of the same event): the wait
    // it was told still holds its source (above), but it ends here instead of being retried
    // beside the newer one.
    if (flags.superseded === true) {
      const ok = await queue.complete(job);
      return settle(ok ? 'done' : 'lost');
    }
    const permanent = alone || (isDecisionError(err) && err.decision === 'permanent') || flags.permanent === true;
    // The remote is down or overloaded (5xx, no connection, a timeout, a 429), not this job wrong.
    const outage = !permanent && flags.outage === true;
    const streak = outage && job.source && this.gated(job.kind) ? this.holds.holdForOutage(job.source, now, log) : 0;
    // Nothing of the source answered since this process started: after a restart mid-outage,
    // its first failure continues the outage (the streak before the restart is not remembered).
    const failing = streak >= 2 || (streak === 1 && !this.answers.hasAnswered(job.source!));
    if (failing && job.attempts >= job.max_attempts - 1) return this.retryThroughOutage(job, message, now, told, log, settle);
    if (permanent || job.attempts >= job.max_attempts) {
      return this.deadLetter(job, alone ? `${message}; only this read: the source's other reads are answered` : message, log, settle);
    }
    const delay = retryDelay(job.attempts, backoff, told);
    const ok = await queue.reschedule(job, now + delay, { error: message });
    this.jobFailures.logFailure(job, message, log, { err: message, retry_in_ms: delay }, 'job failed; will retry');
    settle(ok ? 'retry' : 'lost');
  }

  /** A failure that would pause the job's source (a refused key, a redirect), unless it is this read's alone. */
  private async failPausing(job: ClaimedJob, err: unknown, message: string, now: number, verdict: 'source' | 'wait', log: Logger, settle: SettleFailed) {
    const { queue } = this.opts;
    if (verdict === 'wait') {
      const delay = this.opts.pauseRetryMs ?? 5 * 60_000;
      const ok = await queue.reschedule(job, now + delay, { refund: true, error: message });
      this.jobFailures.logFailure(job, message, log, { source: job.source, err: message, retry_in_ms: delay }, "this read failed as if its source were misconfigured: tried again once after the probe period, the source runs on meanwhile (paused then only if none of its other reads was answered)");
      return settle(ok ? 'retry' : 'lost');
    }
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

  /**
   * An outage outlasts max_attempts: such a job is retried at its longest backoff for as long
   * as it lasts (a night-long outage gave up every result unread after its 25th failure). Only
   * while its source is failing as a whole (this failure and the one before it, with nothing
   * through in between): one read the service fails while others succeed still ends, seen.
   * From the attempt before its last, it goes back to the one before that: each of its runs is
   * then the attempt before its last, never its last, and a job claimed again after its last
   * attempt never finished is dead-lettered unrun: a crash during an outage must not make that
   * of the reads in flight.
   */
  private async retryThroughOutage(job: ClaimedJob, message: string, now: number, told: number | null, log: Logger, settle: SettleFailed) {
    const delay = Math.max(backoffDelay(job.attempts, this.opts.backoff ?? JOB_BACKOFF), told ?? 0);
    const ok = await this.opts.queue.reschedule(job, now + delay, { attempts: Math.max(0, job.max_attempts - 2), error: message });
    this.jobFailures.logFailure(job, message, log, { err: message, retry_in_ms: delay }, 'job failed on an outage of the remote; it is retried for as long as the outage lasts');
    return settle(ok ? 'retry' : 'lost');
  }

  /** Gives the job up (`said`: its dead letter), then what follows a dead letter (WorkerOptions.onDeadLetter). */
  private async deadLetter(job: ClaimedJob, said: string, log: Logger, settle: SettleFailed) {
    const ok = await this.opts.queue.deadLetter(job, said);
    this.deadLetters.logDeadLetter(job, said, log);
    if (ok && this.opts.onDeadLetter) {
      try {
        await this.opts.onDeadLetter(job, said);
      } catch (followErr) {
        // The job is dead and stays so: not "runs again after its lease".
        log.error({ err: failureMessage(followErr) }, "job dead-lettered, but what follows its dead letter failed: done again by the next sweep (result reads) or the workers' next start (sink delivery records)");
      }
    }
    return settle(ok ? 'dead' : 'lost');
  }
}
