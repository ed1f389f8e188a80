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
  /** The database's data_version at the last probe that saw the hold (undefined: none did). */
  private version: number | undefined;
  /** Deliveries were answered 503 for the lock since it was last taken (refused). */
  private refusing = false;

  /**
   * The lock was found held by another connection at `nowMs` (Unix ms, the injected clock).
   * `dataVersion` (PRAGMA data_version, from a probe): when it moved since the last probe that
   * saw the lock held, another connection committed in between, so this is a new hold and its
   * time starts now. The committer's retries (every few ms) give none: they see one hold. Nor
   * does a commit count once deliveries were refused for the lock: a connection that commits
   * and takes the lock again at once (a program writing back to back) left no moment the
   * committer could use, and each probe that saw a commit since the last one started the hold
   * afresh, /readyz ready while every delivery was answered 503.
   */
  held(nowMs: number, dataVersion?: number): void {
    const committedBetween = !this.refusing && dataVersion !== undefined && this.version !== undefined && dataVersion !== this.version;
    if (this.since === null || committedBetween) this.since = nowMs;
    if (dataVersion !== undefined) this.version = dataVersion;
  }

  /**
   * Deliveries were answered 503 at `nowMs` after waiting `waitedMs` (WRITE_TIMEOUT_MS) for the
   * lock: it was found held at every one of the committer's attempts over that time. The hold
   * lasts, whatever commits a probe sees, until the lock is taken.
   */
  refused(nowMs: number, waitedMs: number): void {
    this.since = Math.min(this.since ?? Infinity, nowMs - waitedMs);
    this.refusing = true;
  }

  /** The lock was taken (a commit, a probe): whatever held it let go. */
  obtained(): void {
    this.since = null;
    this.version = undefined;
    this.refusing = false;
  }

  /** How long, in ms, the lock has been found held at every attempt to take it; 0 when it was not. */
  heldForMs(nowMs: number): number {
    return this.since === null ? 0 : Math.max(0, nowMs - this.since);
  }
}
