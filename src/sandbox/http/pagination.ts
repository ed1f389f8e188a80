/** Spec 2.2 and 8: v2 page envelope with `limit` default 50, silently clamped to 200, and `offset`. */
export const DEFAULT_LIMIT = 50;
export const MAX_LIMIT = 200;

export interface Page<T> {
  count: number;
  next: string | null;
  previous: string | null;
  results: T[];
}

/**
 * A limit or offset that is not a usable integer falls back to its default rather than failing,
 * like the limit/offset paginator the spec's wording follows (assumption: the spec only says
 * "clamped, not rejected" for large limits).
 */
function parseNonNegative(value: string | undefined, fallback: number, min: number): number {
  if (value === undefined || !/^\d+$/.test(value)) return fallback;
  const n = Number(value);
  return n < min ? fallback : n;
}

export function pageParams(url: URL): { limit: number; offset: number } {
  const limit = Math.min(MAX_LIMIT, parseNonNegative(url.searchParams.get('limit') ?? undefined, DEFAULT_LIMIT, 1));
  const offset = parseNonNegative(url.searchParams.get('offset') ?? undefined, 0, 0);
  return { limit, offset };
}

/** `next`/`previous` are absolute URLs that keep the caller's other query parameters. */
export function paginate<T>(requestUrl: string, items: readonly T[]): Page<T> {
  const url = new URL(requestUrl);
  const { limit, offset } = pageParams(url);
  const link = (newOffset: number): string => {
    const u = new URL(url);
    u.searchParams.set('limit', String(limit));
    if (newOffset > 0) u.searchParams.set('offset', String(newOffset));
    else u.searchParams.delete('offset');
    return u.toString();
  };
  return {
    count: items.length,
    next: offset + limit < items.length ? link(offset + limit) : null,
    previous: offset > 0 ? link(Math.max(0, offset - limit)) : null,
    results: items.slice(offset, offset + limit),
  };
}
