import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/observability/logger.js';
import { OUTAGE_HOLD_AFTER, OUTAGE_HOLD_FIRST_MS, OUTAGE_HOLD_MAX_MS, outageHoldMs, SourceHolds } from '../../src/queue/SourceHolds.js';

const logger = createLogger('silent');

describe('outageHoldMs: the breaker\'s schedule', () => {
  it('holds OUTAGE_HOLD_FIRST_MS from OUTAGE_HOLD_AFTER failures, doubles each 4 more, and stops at OUTAGE_HOLD_MAX_MS', () => {
    const holds = Array.from({ length: 30 }, (_, i) => outageHoldMs(OUTAGE_HOLD_AFTER + i));
    expect(holds.slice(0, 4)).toEqual([OUTAGE_HOLD_FIRST_MS, OUTAGE_HOLD_FIRST_MS, OUTAGE_HOLD_FIRST_MS, OUTAGE_HOLD_FIRST_MS]);
    expect(holds.slice(4, 8)).toEqual(Array(4).fill(2 * OUTAGE_HOLD_FIRST_MS));
    expect(holds[8]).toBe(4 * OUTAGE_HOLD_FIRST_MS);
    expect(holds[16]).toBe(16 * OUTAGE_HOLD_FIRST_MS);
    // 15 s * 32 = 8 min: past the cap.
    expect(holds[20]).toBe(OUTAGE_HOLD_MAX_MS);
    expect(Math.max(...holds)).toBe(OUTAGE_HOLD_MAX_MS);
  });
});

describe('SourceHolds', () => {
  it('the breaker holds a source from its OUTAGE_HOLD_AFTER-th failure in a row, and a job that goes through ends it', () => {
    const h = new SourceHolds(logger);
    for (let i = 1; i < OUTAGE_HOLD_AFTER; i++) expect(h.holdForOutage('s', 0, logger)).toBe(i);
    expect(h.throttled(0)).toEqual([]);
    expect(h.holdForOutage('s', 0, logger)).toBe(OUTAGE_HOLD_AFTER);
    expect(h.throttled(OUTAGE_HOLD_FIRST_MS - 1)).toEqual(['s']);
    expect(h.throttled(OUTAGE_HOLD_FIRST_MS)).toEqual([]);
    h.holdForOutage('s', 0, logger);
    h.wentThrough('s');
    expect(h.throttled(1)).toEqual([]);
    // Its streak ended too: the next failure starts a new one.
    expect(h.holdForOutage('s', 1, logger)).toBe(1);
  });

  it('a Retry-After holds until the latest wait told, and a release ends every hold of the source', () => {
    const h = new SourceHolds(logger);
    h.throttle('a', 0, 5_000, logger);
    h.throttle('a', 1_000, 1_000, logger);
    h.throttle('b', 0, 5_000, logger);
    expect(h.throttled(4_999).sort()).toEqual(['a', 'b']);
    expect(h.release(['a'], 4_999)).toEqual(['b']);
    expect(h.throttled(5_000)).toEqual([]);
  });

  it('held: each reason of a source apart (a Retry-After and the breaker can hold one source at once), until when, and not once passed', () => {
    const h = new SourceHolds(logger);
    h.throttle('a', 0, 60_000, logger);
    for (let i = 0; i < OUTAGE_HOLD_AFTER; i++) h.holdForOutage('a', 0, logger);
    h.throttle('b', 0, 5_000, logger);
    expect(h.held(1_000)).toEqual([
      { source: 'a', reason: 'retry_after', untilMs: 60_000 },
      { source: 'b', reason: 'retry_after', untilMs: 5_000 },
      { source: 'a', reason: 'outage', untilMs: OUTAGE_HOLD_FIRST_MS },
    ]);
    expect(h.held(OUTAGE_HOLD_FIRST_MS)).toEqual([{ source: 'a', reason: 'retry_after', untilMs: 60_000 }]);
    h.wentThrough('a');
    expect(h.held(0).map((x) => `${x.source}:${x.reason}`)).toEqual(['a:retry_after', 'b:retry_after']);
    h.release(['a', 'b'], 0);
    expect(h.held(0)).toEqual([]);
  });
});
