/**
 * The scoring reads' latency and counts: every scoring read (the three v2 reads and the v1
 * interview read) waits `delayMs()` real milliseconds before it is answered, as a slow service
 * would, and is counted while it waits and once it is answered. The wait is on the real clock,
 * not the sandbox clock: it stands for time on the wire and in the service, which a receiver
 * measures with its own timers.
 */
export interface ScoringReadCounts {
  /** Reads received (past authentication) and not yet answered. */
  inFlight: number;
  /** Reads answered, with any status (a fault's, a 404, a result). */
  answered: number;
}

export class ScoringReads {
  private inFlight = 0;
  private answered = 0;
  private readonly waiting = new Set<() => void>();

  constructor(private readonly delayMs: () => number) {}

  counts(): ScoringReadCounts {
    return { inFlight: this.inFlight, answered: this.answered };
  }

  /** Runs `answer` after the delay, counting the read from now until it is answered. */
  async serve<T>(answer: () => T | Promise<T>): Promise<T> {
    this.inFlight++;
    try {
      const ms = this.delayMs();
      if (ms > 0) await this.wait(ms);
      return await answer();
    } finally {
      this.inFlight--;
      this.answered++;
    }
  }

  /** Ends every wait now (the sandbox is stopping): nothing is left holding a timer. */
  releaseAll(): void {
    for (const release of [...this.waiting]) release();
  }

  private wait(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const release = (): void => {
        clearTimeout(timer);
        this.waiting.delete(release);
        resolve();
      };
      const timer = setTimeout(release, ms);
      this.waiting.add(release);
    });
  }
}
