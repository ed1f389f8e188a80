/**
 * Email addresses and phone numbers taken out of free text that came from
 * outside (the hiring service's error details and reasons, an answer body)
 * before it reaches a log line or a `last_error` column. Candidate personal
 * data never goes to logs; a service that echoes the candidate back in a 400
 * must not change that.
 *
 * A phone number here is 7 to 15 digits, optionally led by `+`, with spaces,
 * dots, dashes or parentheses between them, standing on its own: not part of
 * a word, an id (`..._0123456789`, a UUID's segment) or a dash-joined run.
 */
const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+/g;
const PHONE = /(?<![\w+\-/])(?:\+\s?)?\(?\d[\d\s().-]{5,}\d(?![\w\-/])/g;

export const REDACTED_EMAIL = '[email]';
export const REDACTED_PHONE = '[phone]';

export function redactPersonalData(text: string): string {
  if (!/[@\d]/.test(text)) return text;
  return text.replace(EMAIL, REDACTED_EMAIL).replace(PHONE, (m) => {
    if (/^\d+\.\d+$/.test(m)) return m; // a decimal number
    const digits = m.replace(/\D/g, '').length;
    return digits >= 7 && digits <= 15 ? REDACTED_PHONE : m;
  });
}
