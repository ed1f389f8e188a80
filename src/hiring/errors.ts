/**
 * Errors that carry their decision (house style): whoever runs the work (the
 * queue) reads `decision` instead of guessing from a message or status.
 * Generic on purpose: nothing here is specific to the hiring API.
 *
 * - `permanent`: retrying cannot help; fail (dead-letter) now.
 * - `retry`: transient; retry with the runner's own backoff.
 * - `retry_after`: transient, and the remote said when: not before `retryAfterMs`.
 * - `pause_source`: the source's configuration no longer works (its key is
 *   refused, 401/403; its API URL is redirected, 3xx): stop fetching for the
 *   whole source without burning attempts, keep the work, resume once it is fixed.
 *   A redirect pauses only while every read of the source meets it (`sourceWideOnly`).
 */
export type ErrorDecision = 'permanent' | 'retry' | 'retry_after' | 'pause_source';

export interface DecisionErrorOptions {
  /** Underlying error or value (e.g. the classified outcome). Must not hold secrets. */
  readonly cause?: unknown;
}

export abstract class DecisionError extends Error {
  abstract readonly decision: ErrorDecision;

  constructor(message: string, options?: DecisionErrorOptions) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
  }
}

export class PermanentError extends DecisionError {
  override readonly name = 'PermanentError';
  readonly decision = 'permanent' as const;
}

export class RetryableError extends DecisionError {
  override readonly name = 'RetryableError';
  readonly decision = 'retry' as const;
}

export class RetryAfterError extends DecisionError {
  override readonly name = 'RetryAfterError';
  readonly decision = 'retry_after' as const;
  /** Minimum wait before the next attempt, in milliseconds. */
  readonly retryAfterMs: number;
  /**
   * The remote asked the whole source to slow down (a 429, a 503 with Retry-After), not only
   * this request: its other work waits too, instead of each job finding out for itself.
   */
  readonly throttlesSource: boolean;

  constructor(message: string, retryAfterMs: number, options?: DecisionErrorOptions & { throttlesSource?: boolean }) {
    super(message, options);
    if (!Number.isFinite(retryAfterMs) || retryAfterMs < 0) {
      throw new RangeError(`retryAfterMs must be a finite number >= 0, got ${retryAfterMs}`);
    }
    this.retryAfterMs = retryAfterMs;
    this.throttlesSource = options?.throttlesSource === true;
  }
}

export interface PauseSourceErrorOptions extends DecisionErrorOptions {
  /** The remote's HTTP status behind the pause (0: no request could be made); the pause records it. */
  readonly status?: number;
  /** The pause's log line, saying what the operator must fix (the worker's default: a refused key). */
  readonly summary?: string;
  /**
   * Pause only while the source fails so as a whole (a redirect: a wrong API URL). A read that
   * fails so while the source's other reads are answered ends instead (a dead letter): see
   * SourceAnswers. Without it (a refused key), the source is always paused.
   */
  readonly sourceWideOnly?: boolean;
  /**
   * With `sourceWideOnly`: the pause's log line when the source had answered other reads in this
   * process before. Its reads redirected with none answered meanwhile may be one moved path of
   * a quiet source, not its URL wrong: the line must not send the operator to fix a URL that
   * may be right.
   */
  readonly answeredSummary?: string;
}

export class PauseSourceError extends DecisionError {
  override readonly name = 'PauseSourceError';
  readonly decision = 'pause_source' as const;
  readonly status: number | undefined;
  readonly summary: string | undefined;
  readonly sourceWideOnly: boolean;
  readonly answeredSummary: string | undefined;

  constructor(message: string, options?: PauseSourceErrorOptions) {
    super(message, options);
    this.status = options?.status;
    this.summary = options?.summary;
    this.answeredSummary = options?.answeredSummary;
    this.sourceWideOnly = options?.sourceWideOnly === true;
  }
}

export function isDecisionError(error: unknown): error is DecisionError {
  return error instanceof DecisionError;
}
