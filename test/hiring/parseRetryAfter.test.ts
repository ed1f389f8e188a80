import { describe, expect, it } from 'vitest';
import { parseHttpDate, parseRetryAfter } from '../../src/hiring/parseRetryAfter.js';

const NOW = Date.UTC(2025, 10, 21, 12, 0, 0); // Fri, 21 Nov 2025 12:00:00 GMT

describe('parseRetryAfter', () => {
  it.each([
    ['0', 0],
    ['7', 7000],
    ['120', 120_000],
    [' 30 ', 30_000],
    ['007', 7000],
  ])('reads delta-seconds %j', (value, expected) => {
    expect(parseRetryAfter(value, NOW)).toBe(expected);
  });

  it('reads an IMF-fixdate relative to now', () => {
    expect(parseRetryAfter('Fri, 21 Nov 2025 12:01:30 GMT', NOW)).toBe(90_000);
    expect(parseRetryAfter(new Date(NOW + 3_600_000).toUTCString(), NOW)).toBe(3_600_000);
  });

  it('reads the obsolete RFC 850 and asctime forms', () => {
    expect(parseRetryAfter('Friday, 21-Nov-25 12:00:10 GMT', NOW)).toBe(10_000);
    expect(parseRetryAfter('Fri Nov 21 12:00:20 2025', NOW)).toBe(20_000);
    expect(parseRetryAfter('Sat Nov  1 12:00:00 2025', Date.UTC(2025, 10, 1, 11, 59, 0))).toBe(60_000);
  });

  it('gives 0 for a date in the past', () => {
    expect(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', NOW)).toBe(0);
  });

  it('depends on the injected now, not the real clock', () => {
    const date = 'Fri, 21 Nov 2025 12:00:05 GMT';
    expect(parseRetryAfter(date, NOW)).toBe(5000);
    expect(parseRetryAfter(date, NOW - 10_000)).toBe(15_000);
  });

  it.each([
    null,
    undefined,
    '',
    '   ',
    'soon',
    '-5',
    '1.5',
    '1e3',
    '0x10',
    '5 seconds',
    'Nov 21 2025', // Date.parse accepts it; it is not an HTTP-date
    '2025-11-21T12:01:00Z', // ISO 8601 is not an HTTP-date
    'Fri, 31 Feb 2025 12:00:00 GMT', // no such day
    'Fri, 21 Nov 2025 25:00:00 GMT',
    'Fri, 21 Nov 2025 12:00:00 PST',
    'Fri, 21 Foo 2025 12:00:00 GMT',
    '9'.repeat(400),
  ])('gives null for %j', (value) => {
    expect(parseRetryAfter(value, NOW)).toBeNull();
  });
});

describe('parseHttpDate', () => {
  it('maps a two-digit RFC 850 year to the most recent matching year', () => {
    expect(parseHttpDate('Sunday, 06-Nov-94 08:49:37 GMT', NOW)).toBe(Date.UTC(1994, 10, 6, 8, 49, 37));
    expect(parseHttpDate('Monday, 06-Nov-30 08:49:37 GMT', NOW)).toBe(Date.UTC(2030, 10, 6, 8, 49, 37));
  });

  it('accepts any letter case', () => {
    expect(parseHttpDate('fri, 21 nov 2025 12:00:00 gmt', NOW)).toBe(NOW);
  });
});
