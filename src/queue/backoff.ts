export interface BackoffOptions {
  baseMs: number;
  capMs: number;
  factor?: number;
  /** 0..1: the share of the delay that is randomized ("equal jitter" at 0.5). */
  jitter?: number;
  random?: () => number;
}

/**
 * Exponential backoff with jitter and a cap: attempt 1 waits about baseMs,
 * each next one `factor` times longer, never more than capMs. Jitter spreads
 * retries of jobs that failed together (an outage) so they do not return in a herd.
 */
export function backoffDelay(attempt: number, opts: BackoffOptions): number {
  const factor = opts.factor ?? 2;
  const jitter = opts.jitter ?? 0.5;
  const random = opts.random ?? Math.random;
  const raw = Math.min(opts.capMs, opts.baseMs * factor ** Math.max(0, attempt - 1));
  return Math.round(raw * (1 - jitter) + raw * jitter * random());
}

/** Default retry schedule of failed jobs: 5 s, 10 s, 20 s ... capped at 1 h. */
export const JOB_BACKOFF: BackoffOptions = { baseMs: 5_000, capMs: 60 * 60_000 };
