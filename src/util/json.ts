/** Narrowing helpers for JSON read leniently (envelopes, payloads, fetched results). */
export type JsonRecord = Record<string, unknown>;

/** The value as a plain object, or null (arrays and primitives are not objects here). */
export const asObject = (v: unknown): JsonRecord | null =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as JsonRecord) : null;

/** The value as a string, or null. */
export const asString = (v: unknown): string | null => (typeof v === 'string' ? v : null);
