/**
 * Parse a `Retry-After` header value into milliseconds from `now`
 * (RFC 9110 10.2.3): either delta-seconds or an HTTP-date in any of the three
 * forms recipients must accept. A date in the past gives 0. Absent, empty or
 * malformed values give null: the caller then uses its own backoff.
 *
 * `Date.parse` is deliberately not used: it accepts almost anything
 * (`Date.parse("Nov 21 2025")` is a date), which would turn garbage into a wait.
 */
export function parseRetryAfter(value: string | null | undefined, now: number): number | null {
  if (value === null || value === undefined) return null;
  const text = value.trim();
  if (text === '') return null;

  if (/^\d+$/.test(text)) {
    const ms = Number(text) * 1000;
    return Number.isSafeInteger(ms) ? ms : null;
  }

  const at = parseHttpDate(text, now);
  if (at === null) return null;
  return Math.max(0, at - now);
}

const MONTHS = ['jan', 'feb', 'mar', 'apr', 'may', 'jun', 'jul', 'aug', 'sep', 'oct', 'nov', 'dec'];
const DAY = '(?:mon|tue|wed|thu|fri|sat|sun)';
const LONG_DAY = '(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)';
const MONTH = '(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)';
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';

// Sun, 06 Nov 1994 08:49:37 GMT
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`, 'i');
// Sunday, 06-Nov-94 08:49:37 GMT
const RFC850_DATE = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`, 'i');
// Sun Nov  6 08:49:37 1994
const ASCTIME_DATE = new RegExp(`^${DAY} ${MONTH} ( \\d|\\d{2}) ${TIME} (\\d{4})$`, 'i');

/** Epoch milliseconds of an HTTP-date, or null. Exported for tests. */
export function parseHttpDate(text: string, now: number): number | null {
  let m = IMF_FIXDATE.exec(text);
  if (m) return utc(m[3], m[2], m[1], m[4], m[5], m[6]);

  m = RFC850_DATE.exec(text);
  if (m) {
    const yy = Number(m[3]);
    // RFC 9110 5.6.7: a two-digit year more than 50 years in the future
    // means the most recent past year with those digits.
    const currentYear = new Date(now).getUTCFullYear();
    let year = Math.floor(currentYear / 100) * 100 + yy;
    if (year > currentYear + 50) year -= 100;
    return utc(String(year), m[2], m[1], m[4], m[5], m[6]);
  }

  m = ASCTIME_DATE.exec(text);
  if (m) return utc(m[6], m[1], m[2], m[3], m[4], m[5]);

  return null;
}

function utc(
  yearText: string | undefined,
  monthText: string | undefined,
  dayText: string | undefined,
  hourText: string | undefined,
  minuteText: string | undefined,
  secondText: string | undefined,
): number | null {
  const month = MONTHS.indexOf((monthText ?? '').toLowerCase());
  const year = Number(yearText);
  const day = Number((dayText ?? '').trim());
  const hour = Number(hourText);
  const minute = Number(minuteText);
  const second = Number(secondText);
  if (month < 0 || hour > 23 || minute > 59 || second > 60) return null;
  const ms = Date.UTC(year, month, day, hour, minute, Math.min(second, 59));
  // Reject days the month does not have (Feb 30 would silently roll over).
  const check = new Date(ms);
  if (check.getUTCMonth() !== month || check.getUTCDate() !== day) return null;
  return ms;
}
