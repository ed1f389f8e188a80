import { domainToUnicode } from 'node:url';

/**
 * An email address as erase compares it: trimmed, in Unicode's composed form (NFC: `é` as one
 * character or as `e` and an accent is the same letter), lowercased over all of Unicode (SQLite's
 * `lower()` folds A-Z only: `JOSÉ@…` stayed `josÉ@…`, and missed `josé@…`), and its domain as
 * canonicalDomain has it. The name before the `@` is kept as it is otherwise.
 */
export function canonicalAddress(address: string): string {
  const a = folded(address.trim());
  const at = a.lastIndexOf('@');
  if (at === -1) return a;
  return `${a.slice(0, at + 1)}${canonicalDomain(a.slice(at + 1))}`;
}

/**
 * Whether a text names the email `address`: as a whole address, not as the end of a longer one
 * (`an@example.org` is not named by `joan@example.org`, nor by `an@example.org.uk`), ignoring case
 * (over Unicode), with its domain in any form that is the same domain (canonicalDomain), and also
 * where JSON or a URL escaped it (`an\u0040example.org`, `an%40example.org`, `jos%C3%A9%40…`), as a
 * stored envelope or a quarantined body may have it.
 *
 * The domain written after the name is compared as a domain, not as text: compared as text in its
 * Unicode and `xn--` forms only, a domain stored as typed with a Japanese keyboard
 * (`tarō@ｅｘａｍｐｌｅ.jp`, fullwidth letters; `例え。jp`, an ideographic full stop) was
 * canonicalDomain's `example.jp` for the application's row, but no text spelled it so: its
 * quarantined bodies and sink lines stayed, even with the address typed exactly as stored.
 */
export function addressMatcher(address: string): (text: string) => boolean {
  const canonical = canonicalAddress(address);
  const at = canonical.lastIndexOf('@');
  if (at <= 0) return () => false;
  const name = canonical.slice(0, at + 1);
  const domain = canonical.slice(at + 1);
  return (text) => {
    const t = folded(unescaped(text));
    for (let i = t.indexOf(name); i !== -1; i = t.indexOf(name, i + 1)) {
      if (i > 0 && LOCAL_PART.test(codePointBefore(t, i))) continue;
      const start = i + name.length;
      // As written, to its end (also a domain no URL has, an address literal: `an@[192.0.2.1]`).
      const end = start + domain.length;
      if (t.startsWith(domain, start) && !continuesDomain(t, end)) return true;
      DOMAIN_RUN.lastIndex = start;
      const written = DOMAIN_RUN.exec(t)![0].replace(TRAILING_DOTS, '');
      if (written !== '' && canonicalDomain(written) === domain) return true;
    }
    return false;
  };
}

/** namesAddress for one text: addressMatcher(address)(text). */
export const namesAddress = (text: string, address: string): boolean => addressMatcher(address)(text);

/**
 * A domain as the URL standard maps it (url.domainToUnicode, UTS 46): an internationalized
 * domain's `xn--` labels decoded (`bücher.de` and `xn--bcher-kva.de` are one domain), fullwidth
 * letters and dots made plain, and no trailing dot (`example.org.` is `example.org`); NFC and
 * lowercased. A domain the standard refuses is compared as written.
 */
function canonicalDomain(domain: string): string {
  const written = domain.replace(TRAILING_DOTS, '');
  const unicode = domainToUnicode(written);
  return unicode === '' ? written : folded(unicode).replace(TRAILING_DOTS, '');
}

/**
 * NFC and lowercased over Unicode, a final sigma as any sigma: `ΑΣ` lowercases to `ας` (the last
 * one final), which Unicode's case folding takes for `ασ` typed. Length kept but for NFC.
 */
const folded = (text: string): string => text.normalize('NFC').toLowerCase().replaceAll('ς', 'σ');

/** The character that ends at `i`: a letter outside the BMP (`𠮷`) is two UTF-16 units, neither one a letter alone. */
function codePointBefore(t: string, i: number): string {
  const unit = t.charCodeAt(i - 1);
  return String.fromCodePoint(t.codePointAt(unit >= 0xdc00 && unit <= 0xdfff && i >= 2 ? i - 2 : i - 1)!);
}

/** Dots a domain may end with: ASCII, ideographic, fullwidth and halfwidth (UTS 46 maps each to `.`). */
const TRAILING_DOTS = /[.\u3002\uff0e\uff61]+$/u;

/** What an --email must look like: one `@` between a name and a domain, no spaces. A blank or a fragment (`.org`) would name every row. */
export const looksLikeAddress = (address: string): boolean => /^[^\s@]+@[^\s@]+$/u.test(address);

/**
 * Characters that go on an address's name to its left: a match beside one is part of another
 * address (to its right: continuesDomain, DOMAIN_RUN). Those RFC 5322 also allows in a name (`=`,
 * `?`, `/`, `&`...) are left out: nobody's address has them, and a URL puts them before one
 * (`?q=an@…`, `mailto:`).
 * Combining marks (\p{M}) too: `é` written as `e` and an accent stays a letter of the address.
 */
const LOCAL_PART = /[\p{L}\p{M}\p{N}._%+\-]/u;
/**
 * A domain's characters: letters, digits, `-` and `_`, and the invisible ones UTS 46 drops (a soft
 * hyphen, zero-width spaces); not a left-to-right mark, which UTS 46 refuses in a domain (an
 * address in a Hebrew text keeps one beside it). Its dots: ASCII, ideographic, fullwidth, halfwidth.
 */
const DOMAIN = /[\p{L}\p{M}\p{N}_\-\u00ad\u200b\u2060\ufeff]/u;
const DOT = /[.\u3002\uff0e\uff61]/u;
/** What follows the `@` as one domain: its characters and dots, ended by anything else. */
const DOMAIN_RUN = new RegExp(`(?:${DOMAIN.source}|${DOT.source})*`, 'uy');

/** Whether the text goes on from `end` as a longer domain: a domain's character, or a dot and one. */
function continuesDomain(t: string, end: number): boolean {
  const at = (i: number) => (i < t.length ? String.fromCodePoint(t.codePointAt(i)!) : '');
  return DOMAIN.test(at(end)) || (DOT.test(at(end)) && DOMAIN.test(at(end + 1)));
}

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
