/**
 * Email addresses and phone numbers taken out of free text that came from
 * outside (the hiring service's error details and reasons, an answer body)
 * before it reaches a log line or a `last_error` column. Candidate personal
 * data never goes to logs; a service that echoes the candidate back in a 400
 * must not change that.
 *
 * A phone number here is 7 to 15 digits, led by `+` or with spaces, dots,
 * dashes or parentheses between them (an extension `x89` / `ext. 89` after),
 * standing on its own: not part of a word or an id. Kept as they are: plain
 * digit runs (sizes, timestamps, ids), decimals, dates and times, IPv4
 * addresses. Runs are bounded (no quadratic backtracking on hostile text), and
 * at most MAX_INPUT characters are looked at: the rest is cut off.
 */
const EMAIL = /[\p{L}\p{N}._%+-]+@[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)+/gu;
const PHONE = /(?<![\w+\-/.:])(?:\+\s?)?\(?\d[\d\s().-]{5,24}\d(?:\s?(?:x|ext\.?)\s?\d{1,6})?(?![\w\-/])/g;
const KEEP = [/^\d+$/, /^\d+\.\d+$/, /^\d{4}-\d{2}-\d{2}/, /^\d{1,3}(?:\.\d{1,3}){3}$/];

export const REDACTED_EMAIL = '[email]';
export const REDACTED_PHONE = '[phone]';
export const MAX_INPUT = 2000;

export function redactPersonalData(text: string): string {
  const input = text.length > MAX_INPUT ? `${text.slice(0, MAX_INPUT)}…` : text;
  if (!/[@\d]/.test(input)) return input;
  return input.replace(EMAIL, REDACTED_EMAIL).replace(PHONE, (m) => {
    if (KEEP.some((k) => k.test(m))) return m;
    const digits = m.replace(/(?:x|ext\.?)\s?\d+$/, '').replace(/\D/g, '').length;
    return digits >= 7 && digits <= 15 ? REDACTED_PHONE : m;
  });
}
