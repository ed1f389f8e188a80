import { createHash } from 'node:crypto';

/**
 * A URL as logged and stored: the origin, and a digest of the whole URL so that another path or
 * query still reads as another target. Never the path, query or credentials themselves: hook URLs
 * carry their token there (`/hooks/T0/B0/XXXX`, `?token=...`), and a sign-in redirect's query
 * carries tokens and the user's address (`?login_hint=...&access_token=...`).
 */
export function httpTarget(url: string): string {
  const u = new URL(url);
  if (u.pathname === '/' && !u.search && !u.hash && !u.username && !u.password) return u.origin;
  return `${u.origin}/… (url sha256 ${createHash('sha256').update(url).digest('hex').slice(0, 12)})`;
}

/**
 * A URL reference (a redirect's Location, a page's `next` link) resolved against the URL of the
 * answer that gave it, as a browser would (RFC 3986 5.2); undefined when it cannot be.
 */
export function resolveReference(reference: string, base: string): string | undefined {
  try {
    return new URL(reference, base).href;
  } catch {
    return undefined;
  }
}

/**
 * A redirect's Location as a client following it would take it: resolved against the URL of the
 * request it answered (RFC 9110 10.2.2: `Location: /api/v2/...` is on the same host). Kept as it is
 * when it cannot be resolved.
 */
export function resolveLocation(location: string, requestUrl: string): string {
  return resolveReference(location, requestUrl) ?? location;
}

/**
 * A redirect's Location as httpTarget says it, resolved against `base` when given; without a
 * base, a relative one is said as such, with its digest.
 */
export function describeLocation(location: string, base?: string): string {
  try {
    return httpTarget(new URL(location, base).href);
  } catch {
    if (base === undefined && location.trim() !== '') return `a relative Location (sha256 ${createHash('sha256').update(location).digest('hex').slice(0, 12)})`;
    return 'an unparseable Location';
  }
}
