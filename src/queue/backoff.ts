/** A Retry-After longer than this is cut down to it: a value sent in the wrong unit must not park work for a year (or past the dates a job's run_at can hold). */
export const MAX_RETRY_AFTER_MS = 24 * 60 * 60_000;

/**
 * Added to a wait the remote set (a Retry-After, or the 30 s poll spacing's floor), which the
 * backoff's own jitter would not spread: jobs told the same time do not all come back in the
 * same instant. Up to a quarter of the wait, at most a minute; never shorter than it was told.
 */
export function retryAfterJitter(waitMs: number, random: () => number = Math.random): number {
  return Math.round(random() * Math.min(waitMs * 0.25, 60_000));
}

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

/** A failed job's wait before its next attempt: its backoff, or the wait the remote set (`told`: a Retry-After) if that is not shorter. */
export function retryDelay(attempt: number, backoff: BackoffOptions, told: number | null): number {
  const delay = backoffDelay(attempt, backoff);
  // The wait the remote set, spread a little (jobs told the same time must not return
  // together), unless the backoff is longer anyway.
  if (told !== null && told >= delay) return told + retryAfterJitter(told, backoff.random);
  return delay;
}

/** Default retry schedule of failed jobs: 5 s, 10 s, 20 s ... capped at 1 h. */
export const JOB_BACKOFF: BackoffOptions = { baseMs: 5_000, capMs: 60 * 60_000 };
