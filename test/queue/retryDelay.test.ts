import { describe, expect, it } from 'vitest';
import { retryDelay } from '../../src/queue/backoff.js';

// No jitter in the backoff, the most in a Retry-After's spread: each delay is exact.
const backoff = { baseMs: 1_000, capMs: 1_000, jitter: 0, random: () => 1 };

describe("retryDelay: a failed job's wait", () => {
  it('is its backoff when the remote set no wait, or a shorter one', () => {
    expect(retryDelay(3, backoff, null)).toBe(1_000);
    expect(retryDelay(3, backoff, 0)).toBe(1_000);
    expect(retryDelay(3, backoff, 999)).toBe(1_000);
  });

  it("is the remote's wait, spread by up to a quarter (a minute at most), when that is as long as the backoff or longer", () => {
    expect(retryDelay(3, backoff, 1_000)).toBe(1_250);
    expect(retryDelay(3, backoff, 4_000)).toBe(5_000);
    expect(retryDelay(3, backoff, 10 * 60_000)).toBe(11 * 60_000);
    expect(retryDelay(3, { ...backoff, random: () => 0 }, 4_000)).toBe(4_000);
  });
});
