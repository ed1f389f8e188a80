/** Milliseconds since the epoch. Injected everywhere time matters so tests never sleep. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Milliseconds from an arbitrary origin that only moves forward (performance.now): for how long
 * something has waited, which a wall clock set back or forward (NTP, a VM resumed) would misstate.
 */
export const monotonicClock: Clock = { now: () => performance.now() };

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

let lastMs = Number.NaN;
let lastIso = '';
/**
 * Epoch milliseconds as the ISO 8601 UTC text every table stores (comparable as strings). The last
 * one is kept: the writes of one batch share one `now` (a replay's 500 events, a sink batch's 256
 * messages), each formatting it two or three times. A NaN (never equal to itself) always throws
 * toISOString's RangeError, as before.
 */
export const isoTime = (ms: number): string => {
  if (ms !== lastMs) {
    lastIso = new Date(ms).toISOString();
    lastMs = ms;
  }
  return lastIso;
};
