import type { Context } from 'hono';
import type { z } from 'zod';
import { ApiError, invalidInput, required } from './apiError.js';

/**
 * Reads the body as a JSON object. Spec 7: malformed JSON is 400 `parse_error`; an empty body counts
 * as `{}` so that the missing fields are then reported one by one as `required`.
 */
export async function readJsonObject(c: Context): Promise<{ raw: string; body: Record<string, unknown> }> {
  const raw = await c.req.text();
  if (raw.trim() === '') return { raw, body: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    throw ApiError.of(400, 'parse_error', `JSON parse error - ${(e as Error).message}`);
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw invalidInput('Expected a JSON object.');
  }
  return { raw, body: parsed as Record<string, unknown> };
}

/**
 * Validates with zod and maps issues onto spec codes: a missing top-level field is `required` with
 * `attr` (spec 7), anything else `invalid_input` with the offending field.
 */
export function validate<S extends z.ZodType>(schema: S, body: Record<string, unknown>): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const errors = result.error.issues.map((issue) => {
    const attr = issue.path.length > 0 ? issue.path.map(String).join('.') : null;
    const top = issue.path[0];
    if (issue.path.length === 1 && typeof top === 'string' && !(top in body)) return required(top).errors[0]!;
    return invalidInput(issue.message, attr).errors[0]!;
  });
  throw new ApiError(400, errors);
}
