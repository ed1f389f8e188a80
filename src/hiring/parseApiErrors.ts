import type { ApiError } from './types.js';

/** How much of a body that is not an error array is kept for diagnosis. */
export const RAW_BODY_LIMIT = 500;

export interface ParsedApiErrors {
  readonly errors: readonly ApiError[];
  /** The body truncated to {@link RAW_BODY_LIMIT} characters when it was not an error array; else null. */
  readonly rawBody: string | null;
}

/**
 * Parse an error response body (spec 2.1: a JSON array of `{code, detail,
 * attr}`). Lenient, never throws: elements that are not objects are skipped,
 * missing or mistyped fields become `''` / null; a body that is not a JSON
 * array gives no errors and its raw text instead.
 */
export function parseApiErrors(text: string): ParsedApiErrors {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return { errors: [], rawBody: truncate(text, RAW_BODY_LIMIT) };
  }
  if (!Array.isArray(parsed)) return { errors: [], rawBody: truncate(text, RAW_BODY_LIMIT) };
  const errors: ApiError[] = [];
  for (const item of parsed) {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) continue;
    const record = item as Record<string, unknown>;
    errors.push({
      code: typeof record['code'] === 'string' ? record['code'] : '',
      detail: typeof record['detail'] === 'string' ? record['detail'] : '',
      attr: typeof record['attr'] === 'string' ? record['attr'] : null,
    });
  }
  return { errors, rawBody: null };
}

/** Cut to at most `max` UTF-16 units without leaving half a surrogate pair. */
function truncate(text: string, max: number): string {
  if (text.length <= max) return text;
  const cut = text.slice(0, max);
  const last = cut.charCodeAt(cut.length - 1);
  return last >= 0xd800 && last <= 0xdbff ? cut.slice(0, -1) : cut;
}
