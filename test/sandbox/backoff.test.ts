import { describe, expect, it } from 'vitest';
import { isAcknowledged, MAX_ATTEMPTS, retryDelayMs } from '../../src/sandbox/delivery/backoff.js';

describe('retry schedule (spec 6.3, 8)', () => {
  it('waits 2m, 8m, 32m, 2h8m, then 8h (factor 4, capped at 8 h) and drops after the 6th attempt', () => {
    const minutes = [1, 2, 3, 4, 5].map((n) => (retryDelayMs(n) ?? NaN) / 60_000);
    expect(minutes).toEqual([2, 8, 32, 128, 480]);
    expect(MAX_ATTEMPTS).toBe(6);
    expect(retryDelayMs(6)).toBeNull();
    expect(retryDelayMs(0)).toBeNull();
  });

  it('acknowledges only 2xx; 3xx, 4xx and 5xx are failures', () => {
    expect([200, 201, 204, 299].every(isAcknowledged)).toBe(true);
    expect([199, 301, 302, 400, 404, 429, 500, 503].some(isAcknowledged)).toBe(false);
  });
});
