/** The sandbox's notion of "now", in epoch milliseconds. Injectable so tests never sleep. */
export interface Clock {
  now(): number;
}

/** A clock that only moves when told to; drive the sandbox with `control.advance(ms)`. */
export interface ManualClock extends Clock {
  set(ms: number): void;
  advance(ms: number): void;
}

/** The longest delay setTimeout honours: beyond 2^31-1 ms (about 24.8 days) Node fires it after 1 ms. */
export const MAX_TIMER_MS = 2 ** 31 - 1;

export const systemClock: Clock = { now: () => Date.now() };

export function createManualClock(startMs: number = Date.now()): ManualClock {
  let current = startMs;
  return {
    now: () => current,
    set: (ms) => {
      // Time never runs backwards: a retry scheduled "in the past" must not rewind the world.
      current = Math.max(current, ms);
    },
    advance: (ms) => {
      current += Math.max(0, ms);
    },
  };
}

export function isManualClock(clock: Clock): clock is ManualClock {
  const c = clock as Partial<ManualClock>;
  return typeof c.set === 'function' && typeof c.advance === 'function';
}

export function iso(ms: number): string {
  return new Date(ms).toISOString();
}
