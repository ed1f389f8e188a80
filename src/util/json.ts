/** Narrowing helpers for JSON read leniently (envelopes, payloads, fetched results). */
export type JsonRecord = Record<string, unknown>;

/** The value as a plain object, or null (arrays and primitives are not objects here). */
export const asObject = (v: unknown): JsonRecord | null =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as JsonRecord) : null;

/** The value as a string, or null. */
export const asString = (v: unknown): string | null => (typeof v === 'string' ? v : null);

/** Same JSON value: objects compared by key whatever their order, arrays in order. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  if (Array.isArray(a)) return a.length === (b as unknown[]).length && a.every((v, i) => sameJson(v, (b as unknown[])[i]));
  const ka = Object.keys(a);
  const bo = b as Record<string, unknown>;
  return ka.length === Object.keys(bo).length && ka.every((k) => Object.prototype.hasOwnProperty.call(bo, k) && sameJson((a as Record<string, unknown>)[k], bo[k]));
}
