/**
 * Email addresses and phone numbers taken out of free text that came from
 * outside (the hiring service's error details and reasons, an answer body)
 * before it reaches a log line or a `last_error` column. Candidate personal
 * data never goes to logs; a service that echoes the candidate back in a 400
 * must not change that.
 *
 * A phone number here is 7 to 15 digits, led by `+` or with spaces, dots,
 * dashes or parentheses between them (an extension `x89` / `ext. 89` after),
 * standing on its own: not part of a word or an id. A plain run of digits is
 * one when it starts with 0 (07700900123) or a word such as "phone" or "tel"
 * comes right before or within a few words after it; otherwise it is kept (sizes, timestamps, ids), and so are decimals
 * and IPv4 addresses (unless such a word comes before them: "phone 555.1234"),
 * dates and times. Runs are bounded (no quadratic
 * backtracking on hostile text), and at most MAX_INPUT characters are looked
 * at, cut at a space: the rest is dropped.
 */
/** An address, also with its `@` encoded as a URL (`%40`), a JSON escape (`\u0040`) or an HTML entity (`&#64;`, `&#x40;`). */
const EMAIL = /[\p{L}\p{N}._%+-]+(?:@|%40|\\u0040|&#0*64;|&#x0*40;)[\p{L}\p{N}-]+(?:\.[\p{L}\p{N}-]+)+/giu;
const PHONE = /(?<![\w+\-/.]|\d:)(?:\+\s?)?\(?\d[\d\s().-]{5,24}\d(?:\s?(?:x|ext\.?)\s?\d{1,6})?(?![\w\-/])/g;
/** Dates and times, set aside while phones are looked for, so a run cannot take a date in. */
const DATE_TIME = /\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?/g;
const KEEP = [/^\d+\.\d+$/, /^\d{1,3}(?:\.\d{1,3}){3}$/];
/**
 * Words saying the number after them is a phone number. They are looked for as the parts of the
 * word or identifier right before the number (split at `_`, `-`, spaces and camelCase humps), so
 * candidate_phone, mobilePhone and "phone number:" count, and hotel, Intel or telnet do not.
 */
const PHONE_WORDS = new Set(['phone', 'phones', 'telephone', 'tel', 'mobile', 'cell', 'cellular', 'cellphone', 'fax', 'sms', 'whatsapp']);
const NUMBER_WORDS = new Set(['number', 'no', 'nr', 'num']);

const words = (text: string): string[] => text.split(/[^A-Za-z]+|(?<=[a-z])(?=[A-Z])/).filter(Boolean).map((p) => p.toLowerCase());

/**
 * Whether `before` (the text right before a number) ends with a phone word, up to 6 separators
 * after it (`"phone_number": ["`).
 */
function afterPhoneWord(before: string): boolean {
  if (!/[A-Za-z]\W{0,6}$/.test(before)) return false;
  const parts = words(before).slice(-2);
  const last = parts.at(-1)!;
  return PHONE_WORDS.has(last) || (NUMBER_WORDS.has(last) && parts.length === 2 && PHONE_WORDS.has(parts[0]!));
}

/** Whether one of the 6 words right after a number is a phone word (`5551234567 is not a valid phone number`). */
function beforePhoneWord(after: string): boolean {
  const next = /^\W{0,6}((?:[A-Za-z]+\W{1,3}){0,5}[A-Za-z]+)/.exec(after);
  return next !== null && words(next[1]!).some((w) => PHONE_WORDS.has(w));
}
const SET_ASIDE = 0xe000; // private-use characters stand for the dates meanwhile

export const REDACTED_EMAIL = '[email]';
export const REDACTED_PHONE = '[phone]';
export const MAX_INPUT = 2000;

export function redactPersonalData(text: string): string {
  // Cut before the last word and any digits ahead of it, so that an address or a number across
  // the cut is not left half.
  const input = text.length > MAX_INPUT ? `${text.slice(0, MAX_INPUT).replace(/[\d\s().+-]*\S*$/, '')}…` : text;
  if (!/[@\d]/.test(input)) return input;
  const dates: string[] = [];
  const masked = input.replace(EMAIL, REDACTED_EMAIL).replace(DATE_TIME, (d) => String.fromCharCode(SET_ASIDE + dates.push(d) - 1));
  const redacted = masked.replace(PHONE, (m: string, offset: number, whole: string) => {
    // Looked at only for the runs it decides: most matches (with spaces, dashes, a +) need no word.
    const labelled = () =>
      afterPhoneWord(whole.slice(Math.max(0, offset - 24), offset)) || beforePhoneWord(whole.slice(offset + m.length, offset + m.length + 60));
    // A decimal or an IPv4 address is kept, unless a word like "phone" says it is one (555.1234).
    if (KEEP.some((k) => k.test(m)) && !labelled()) return m;
    if (/^\d+$/.test(m) && !m.startsWith('0') && !labelled()) return m;
    const digits = m.replace(/(?:x|ext\.?)\s?\d+$/, '').replace(/\D/g, '').length;
    return digits >= 7 && digits <= 15 ? REDACTED_PHONE : m;
  });
  return dates.length === 0 ? redacted : redacted.replace(/[\ue000-\uf8ff]/g, (c) => dates[c.charCodeAt(0) - SET_ASIDE] ?? c);
}
