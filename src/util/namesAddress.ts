import { domainToASCII, domainToUnicode } from 'node:url';

/**
 * An email address as erase compares it: trimmed, in Unicode's composed form (NFC: `é` as one
 * character or as `e` and an accent is the same letter), lowercased over all of Unicode (SQLite's
 * `lower()` folds A-Z only: `JOSÉ@…` stayed `josÉ@…`, and missed `josé@…`), and its domain in
 * Unicode form (an internationalized domain's `xn--` labels decoded: `bücher.de` and
 * `xn--bcher-kva.de` are one domain). The name before the `@` is kept as it is otherwise.
 */
export function canonicalAddress(address: string): string {
  const a = address.trim().normalize('NFC').toLowerCase();
  const at = a.lastIndexOf('@');
  if (at === -1) return a;
  const domain = a.slice(at + 1);
  // '' for a domain the URL standard refuses: compared as written then.
  const unicode = domainToUnicode(domain);
  return `${a.slice(0, at + 1)}${unicode === '' ? domain : unicode.normalize('NFC').toLowerCase()}`;
}

/** Whether two addresses are the same one (canonicalAddress). */
export const sameAddress = (a: string, b: string): boolean => canonicalAddress(a) === canonicalAddress(b);

/**
 * Whether a text names the email `address`: as a whole address, not as the end of a longer one
 * (`an@example.org` is not named by `joan@example.org`, nor by `an@example.org.uk`), ignoring case
 * (over Unicode), with either form of an internationalized domain, and also where JSON or a URL
 * escaped it (`an\u0040example.org`, `an%40example.org`, `jos%C3%A9%40…`), as a stored envelope
 * or a quarantined body may have it.
 */
export function addressMatcher(address: string): (text: string) => boolean {
  const canonical = canonicalAddress(address);
  const at = canonical.lastIndexOf('@');
  if (canonical === '' || at === -1) return () => false;
  const ascii = domainToASCII(canonical.slice(at + 1));
  const forms = [...new Set([canonical, ...(ascii === '' ? [] : [`${canonical.slice(0, at + 1)}${ascii}`])])];
  return (text) => {
    const t = unescaped(text).normalize('NFC').toLowerCase();
    return forms.some((form) => namesForm(t, form));
  };
}

/** namesAddress for one text: addressMatcher(address)(text). */
export const namesAddress = (text: string, address: string): boolean => addressMatcher(address)(text);

/** Whether `t` (unescaped, NFC, lowercased) holds `form` as a whole address. */
function namesForm(t: string, form: string): boolean {
  for (let i = t.indexOf(form); i !== -1; i = t.indexOf(form, i + 1)) {
    const before = t[i - 1];
    const end = i + form.length;
    if (before !== undefined && LOCAL_PART.test(before)) continue;
    if (end < t.length && (DOMAIN.test(t[end]!) || (t[end] === '.' && end + 1 < t.length && DOMAIN.test(t[end + 1]!)))) continue;
    return true;
  }
  return false;
}

/** What an --email must look like: one `@` between a name and a domain, no spaces. A blank or a fragment (`.org`) would name every row. */
export const looksLikeAddress = (address: string): boolean => /^[^\s@]+@[^\s@]+$/u.test(address);

/**
 * Characters that go on an address's name to its left, or its domain to its right: a match beside
 * one is part of another address. Those RFC 5322 also allows in a name (`=`, `?`, `/`, `&`...) are
 * left out: nobody's address has them, and a URL puts them before one (`?q=an@…`, `mailto:`).
 * Combining marks (\p{M}) too: `é` written as `e` and an accent stays a letter of the address.
 */
const LOCAL_PART = /[\p{L}\p{M}\p{N}._%+\-]/u;
const DOMAIN = /[\p{L}\p{M}\p{N}_\-]/u;

/**
 * JSON escapes as the characters they stand for (`\uXXXX`; `\n` and the others as a space, so
 * that `Contact:\nan@…` is not read as the address `nan@…`), and percent-escapes: of ASCII, and
 * runs of them that are UTF-8 (`jos%C3%A9`).
 */
function unescaped(text: string): string {
  let t = text;
  if (t.includes('\\')) t = t.replace(/\\(u[0-9a-fA-F]{4}|.)/gs, (_, e: string) => (e.length === 5 ? String.fromCharCode(parseInt(e.slice(1), 16)) : ' '));
  if (t.includes('%')) t = t.replace(/(?:%[0-9a-fA-F]{2})+/g, percentRun);
  return t;
}

/** A run of percent-escapes: decoded as UTF-8 when it is; else its ASCII escapes alone. */
function percentRun(run: string): string {
  try {
    return decodeURIComponent(run);
  } catch {
    return run.replace(/%([0-7][0-9a-fA-F])/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  }
}
