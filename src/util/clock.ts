/** Milliseconds since the epoch. Injected everywhere time matters so tests never sleep. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/** A clock a test moves by hand. */
export class ManualClock implements Clock {
  constructor(private ms: number) {}
  now(): number {
    return this.ms;
  }
  set(ms: number): void {
    this.ms = ms;
  }
  advance(ms: number): void {
    this.ms += ms;
  }
}

/** Epoch milliseconds as the ISO 8601 UTC text every table stores (comparable as strings). */
export const isoTime = (ms: number): string => new Date(ms).toISOString();
