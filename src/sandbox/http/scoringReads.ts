import { MAX_TIMER_MS } from '../clock.js';

/**
 * The scoring reads' latency and counts: every scoring read (the three v2 reads and the v1
 * interview read, HEAD included, which Hono answers with the GET handler) waits `delayMs()` real
 * milliseconds before it is answered, as a slow service would, and is counted while it waits and
 * once its handler has finished. The answer is decided when the wait ends (a fault injected or a
 * result made ready meanwhile applies). The wait is on the real clock, not the sandbox clock: it
 * stands for time on the wire and in the service, which a receiver measures with its own timers.
 */
export interface ScoringReadCounts {
  /** Reads received (past authentication) and not yet answered. */
  inFlight: number;
  /**
   * Reads whose handler has finished, with any status (a fault's, a 404, a result); a read whose
   * client went away, or that stop() released, counts too.
   */
  answered: number;
}

/**
 * Spec 8: a scoring sub-resource is polled no faster than every 30 seconds. The service's way of
 * enforcing it is not shown, so the sandbox answers every read; it records when each
 * (application, resource) was read, on the sandbox clock, so a test can check a receiver's spacing.
 */
export interface ScoringReadGap {
  /** The organization whose key read it. */
  organizationId: string;
  applicationId: string;
  /** `interview`, `cv-evaluation`, `insights`, or `v1-interview`. */
  resource: string;
  /** GET reads of an application of the reader's organization (others are 404s and not polls of a result). */
  reads: number;
  /** Shortest time between two consecutive reads, in sandbox-clock ms; null after one read. */
  shortestGapMs: number | null;
}

export class ScoringReads {
  private inFlight = 0;
  private answered = 0;
  private readonly waiting = new Set<() => void>();
  private stopped = false;
  private readonly gaps = new Map<string, { organizationId: string; applicationId: string; resource: string; reads: number; lastAt: number; shortestGapMs: number | null }>();

  constructor(private readonly delayMs: () => number) {}

  /** Per (application, resource) read, the count and the shortest gap between two of them, in the order first read. */
  readGaps(): ScoringReadGap[] {
    return [...this.gaps.values()].map(({ organizationId, applicationId, resource, reads, shortestGapMs }) => ({ organizationId, applicationId, resource, reads, shortestGapMs }));
  }

  counts(): ScoringReadCounts {
    return { inFlight: this.inFlight, answered: this.answered };
  }

  /** Runs `answer` after the delay, counting the read from now until it is answered. */
  async serve<T>(answer: () => T | Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      const ms = this.delayMs();
      if (ms > 0 && !this.stopped) await this.wait(ms);
      return await answer();
    } finally {
      this.inFlight--;
      this.answered++;
    }
  }

  /**
   * The sandbox is stopping: every wait ends now, and later reads (through `app.request()`) do not
   * wait, so nothing is left holding a timer.
   */
  stop(): void {
    this.stopped = true;
    for (const release of [...this.waiting]) release();
  }

  /**
   * A GET of an application that exists for the reader's organization, which arrived at `at` (the
   * sandbox clock's time, before the read delay): one poll of that result, for readGaps().
   */
  noteRead(of: { organizationId: string; applicationId: string; resource: string }, at: number): void {
    const { organizationId, applicationId, resource } = of;
    const key = `${organizationId} ${resource} ${applicationId}`;
    const seen = this.gaps.get(key);
    if (!seen) {
      this.gaps.set(key, { organizationId, applicationId, resource, reads: 1, lastAt: at, shortestGapMs: null });
      return;
    }
    const gap = at - seen.lastAt;
    seen.reads++;
    seen.lastAt = at;
    seen.shortestGapMs = seen.shortestGapMs === null ? gap : Math.min(seen.shortestGapMs, gap);
  }

  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const release = (): void => {
        clearTimeout(timer);
        this.waiting.delete(release);
        resolve();
      };
      // setTimeout fires at once beyond 2^31-1 ms (about 24.8 days); hold that long instead.
      const timer = setTimeout(release, Math.min(ms, MAX_TIMER_MS));
      this.waiting.add(release);
    });
  }
}
