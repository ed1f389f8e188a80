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
  } catch {
    // Not V8's message: it quotes the body around the error (a candidate's name or email), and
    // clients log error answers.
    throw ApiError.of(400, 'parse_error', 'JSON parse error - the body is not valid JSON.');
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw invalidInput('Expected a JSON object.');
  }
  return { raw, body: parsed as Record<string, unknown> };
}

/** Whether the field at `path` is absent from an object that is there (`candidate.first_name` in a `candidate` without it). */
function isMissing(body: Record<string, unknown>, path: readonly PropertyKey[]): boolean {
  let parent: unknown = body;
  for (const key of path.slice(0, -1)) {
    if (parent === null || typeof parent !== 'object') return false;
    parent = (parent as Record<PropertyKey, unknown>)[key as string];
  }
  const last = path.at(-1);
  return parent !== null && typeof parent === 'object' && !Array.isArray(parent) && typeof last === 'string' && !(last in parent);
}

/**
 * Validates with zod and maps issues onto spec codes: a missing field, at any depth, is `required` with
 * `attr` naming it (spec 7: `candidate.first_name`), anything else `invalid_input` with the offending field.
 */
export function validate<S extends z.ZodType>(schema: S, body: Record<string, unknown>): z.output<S> {
  const result = schema.safeParse(body);
  if (result.success) return result.data;
  const errors = result.error.issues.map((issue) => {
    const attr = issue.path.length > 0 ? issue.path.map(String).join('.') : null;
    if (attr !== null && isMissing(body, issue.path)) return required(attr).errors[0]!;
    return invalidInput(issue.message, attr).errors[0]!;
  });
  throw new ApiError(400, errors);
}
