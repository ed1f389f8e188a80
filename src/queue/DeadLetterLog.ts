import type { Logger } from '../observability/logger.js';
import { failureKey, LogThrottle, throttleCounts } from '../observability/repeatedFailure.js';
import type { Clock } from '../util/clock.js';
import type { ClaimedJob } from './JobQueue.js';
import { jobSourceField } from './jobSourceField.js';

/** Dead letters are counted together per job kind and source (see DeadLetterLog). */
export const deadLetterGroup = (job: ClaimedJob): string => `${job.kind}\n${job.source ?? ''}`;

/**
 * Dead letters of one kind (and source) failing alike: a sink's consumer down past its retries
 * dead-letters its deliveries one after another, one error line each (hundreds at once after a
 * burst). The first and one whose error differs at error, then one a minute with a count, the
 * rest at debug; the count of those is said a minute after the last line, when a job of the
 * kind goes through, or when the worker stops (sayDeadLetters). Each one stays in
 * `dead-letters list` (and `deliveries`).
 */
export class DeadLetterLog {
  private readonly deadLetters: LogThrottle;

  constructor(
    private readonly logger: Logger,
    clock: Clock,
  ) {
    this.deadLetters = new LogThrottle(clock);
  }

  /** A dead letter, at error unless its kind's jobs are dying alike (see DeadLetterLog). */
  logDeadLetter(job: ClaimedJob, said: string, log: Logger): void {
    const fields = { ...jobSourceField(job), err: said, attempts: job.attempts };
    const noted = this.deadLetters.note(deadLetterGroup(job), failureKey(said));
    if (!noted.loud) return void log.debug(fields, 'job dead-lettered');
    log.error({ ...fields, ...throttleCounts(noted) }, 'job dead-lettered');
  }

  /**
   * The dead letters logged at debug only since their run's last line, one error line per run
   * (kind, source and error): of runs whose last line is `minAgeMs` old or more (0: every run;
   * `group`: that run only). Without it, the last minute of a burst was never counted at error.
   */
  sayDeadLetters(minAgeMs: number, group?: string): void {
    for (const run of this.deadLetters.unsaid(minAgeMs, group)) {
      const [kind, source] = run.group.split('\n');
      this.logger.error(
        { kind, ...(source ? { source } : {}), err: run.key, dead_lettered_since_last_line: run.since, dead_lettered_in_run: run.total },
        'more jobs dead-lettered alike (each is in dead-letters list)',
      );
    }
  }

  /** A job of the group went through: its run's count is said now, and the next dead letter at once. */
  wentThrough(job: ClaimedJob): void {
    this.sayDeadLetters(0, deadLetterGroup(job));
    this.deadLetters.clear(deadLetterGroup(job));
  }
}
