import { afterEach, describe, expect, it } from 'vitest';
import { parseTime } from '../../src/cli/parseArgs.js';

const tz = process.env.TZ;
afterEach(() => {
  if (tz === undefined) delete process.env.TZ;
  else process.env.TZ = tz;
});

describe('parseTime (--since / --until)', () => {
  it('reads a time without a zone as UTC, as the receiver prints every time, whatever the host\'s TZ', () => {
    process.env.TZ = 'America/New_York';
    expect(new Date(2026, 10, 26, 7, 26).toISOString()).toBe('2026-11-26T12:26:00.000Z'); // the zone is in effect
    expect(parseTime('2026-11-26T07:26')).toBe('2026-11-26T07:26:00.000Z');
    expect(parseTime('2026-11-26 07:26:30')).toBe('2026-11-26T07:26:30.000Z');
    expect(parseTime('2026-11-26T07:26:30.250')).toBe('2026-11-26T07:26:30.250Z');
    expect(parseTime('2026-11-26t07:26')).toBe('2026-11-26T07:26:00.000Z');
    expect(parseTime('2026-11-26')).toBe('2026-11-26T00:00:00.000Z');
    // A zone given is kept.
    expect(parseTime('2026-11-26T07:26:00+02:00')).toBe('2026-11-26T05:26:00.000Z');
    expect(parseTime('2026-11-26T07:26:00Z')).toBe('2026-11-26T07:26:00.000Z');
    expect(parseTime('2h', Date.parse('2026-11-26T10:00:00Z'))).toBe('2026-11-26T08:00:00.000Z');
  });
});
