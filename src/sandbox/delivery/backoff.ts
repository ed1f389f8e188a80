/** Spec 6.3 and 8: up to 6 attempts (initial plus 5 retries), backoff 2 min × 4 per attempt, capped at 8 h. */
export const MAX_ATTEMPTS = 6;
export const FIRST_RETRY_DELAY_MS = 2 * 60_000;
export const BACKOFF_FACTOR = 4;
export const MAX_RETRY_DELAY_MS = 8 * 3_600_000;
export const ATTEMPT_TIMEOUT_MS = 10_000;

/**
 * Delay before the attempt that follows failed attempt number `failedAttempt` (1-based), or null
 * when that was the last one and the event is dropped: 2m, 8m, 32m, 2h8m, 8h.
 */
export function retryDelayMs(failedAttempt: number): number | null {
  if (!Number.isInteger(failedAttempt) || failedAttempt < 1 || failedAttempt >= MAX_ATTEMPTS) return null;
  return Math.min(MAX_RETRY_DELAY_MS, FIRST_RETRY_DELAY_MS * BACKOFF_FACTOR ** (failedAttempt - 1));
}

/** Spec 6.3: only a 2xx acknowledges; 3xx (redirects are not followed), 4xx and 5xx fail. */
export function isAcknowledged(status: number): boolean {
  return status >= 200 && status < 300;
}
