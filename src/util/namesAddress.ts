/**
 * Whether `text` names the email `address` (given trimmed and lowercased): as a whole address, not
 * as the end of a longer one (`an@example.org` is not named by `joan@example.org`, nor by
 * `an@example.org.uk`), ignoring case, and also where JSON or a URL escaped it (`an\u0040example.org`,
 * `an%40example.org`), as a stored envelope or a quarantined body may have it.
 */
export function namesAddress(text: string, address: string): boolean {
  if (address === '') return false;
  const t = unescaped(text).toLowerCase();
  for (let i = t.indexOf(address); i !== -1; i = t.indexOf(address, i + 1)) {
    const before = t[i - 1];
    const end = i + address.length;
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
 */
const LOCAL_PART = /[\p{L}\p{N}._%+\-]/u;
const DOMAIN = /[\p{L}\p{N}_\-]/u;

/**
 * JSON escapes as the characters they stand for (`\uXXXX`; `\n` and the others as a space, so
 * that `Contact:\nan@…` is not read as the address `nan@…`), and percent-escapes of ASCII.
 */
function unescaped(text: string): string {
  let t = text;
  if (t.includes('\\')) t = t.replace(/\\(u[0-9a-fA-F]{4}|.)/gs, (_, e: string) => (e.length === 5 ? String.fromCharCode(parseInt(e.slice(1), 16)) : ' '));
  if (t.includes('%')) t = t.replace(/%([0-7][0-9a-fA-F])/g, (_, h: string) => String.fromCharCode(parseInt(h, 16)));
  return t;
}
