import type { Logger } from '../observability/logger.js';
import { failureKey, LogThrottle, throttleCounts } from '../observability/repeatedFailure.js';
import type { Clock } from '../util/clock.js';
import type { ClaimedJob } from './JobQueue.js';
import { jobSourceField } from './jobSourceField.js';

/**
 * The jobs of a source (a sink, a hiring API source) failing alike: a consumer down with 500
 * messages due wrote 500 identical 'job failed' lines in under 3 s, and as many at each
 * retry. The first, one whose error differs, then one a minute, with a count; the rest at debug
 * (each job's error stays in jobs.last_error and `deliveries`).
 */
export class JobFailureLog {
  private readonly jobFailures: LogThrottle;

  constructor(clock: Clock) {
    this.jobFailures = new LogThrottle(clock);
  }

  /**
   * A retried failure, at warn unless the source's jobs keep failing alike (see JobFailureLog):
   * alike on the error without its per-request details (failureKey).
   */
  logFailure(job: ClaimedJob, message: string, log: Logger, fields: Record<string, unknown>, msg: string): void {
    const noted = this.jobFailures.note(job.source ?? job.kind, `${msg}\n${failureKey(message)}`);
    const named = { ...jobSourceField(job), ...fields };
    if (!noted.loud) return void log.debug(named, msg);
    log.warn({ ...named, ...throttleCounts(noted) }, msg);
  }

  /** A job of the source (or kind) went through: the next failure is said at once. */
  wentThrough(job: ClaimedJob): void {
    this.jobFailures.clear(job.source ?? job.kind);
  }
}
