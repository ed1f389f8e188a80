/**
 * Since when the database's write lock has been held by another connection, as ingest sees it,
 * for /readyz. SQLite has one write lock and no queue: a delivery waits for it WRITE_TIMEOUT_MS
 * and is then answered 503. Short holds (a `work` process's transactions, a small `replay`) are
 * waited out and must not take the instance out of routing; a long one (a big CLI operation, a
 * backup) makes ingest refuse every delivery, and a load balancer should route them elsewhere.
 *
 * Observations come from the ingest committer (each of its retries, every 1-4 ms while it waits)
 * and from /readyz's probe; either taking the lock ends the hold. In memory only: /readyz writes
 * nothing, and a commit's bookkeeping is one assignment.
 */
export class WriteLockHold {
  private since: number | null = null;

  /** The lock was found held by another connection at `nowMs` (Unix ms, the injected clock). */
  held(nowMs: number): void {
    if (this.since === null) this.since = nowMs;
  }

  /** The lock was taken (a commit, a probe): whatever held it let go. */
  obtained(): void {
    this.since = null;
  }

  /** How long, in ms, the lock has been found held at every attempt to take it; 0 when it was not. */
  heldForMs(nowMs: number): number {
    return this.since === null ? 0 : Math.max(0, nowMs - this.since);
  }
}
