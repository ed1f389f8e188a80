import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

/** Spec 2.1: one error object; a response body is always an array of these. */
export interface ErrorObject {
  code: string;
  detail: string;
  attr: string | null;
}

/** An HTTP error that leaves the app in the spec's envelope from one place (`app.onError`). */
export class ApiError extends Error {
  constructor(
    readonly status: ContentfulStatusCode,
    readonly errors: ErrorObject[],
    readonly headers: Record<string, string> = {},
  ) {
    super(errors.map((e) => `${e.code}: ${e.detail}`).join('; '));
  }

  static of(status: ContentfulStatusCode, code: string, detail: string, attr: string | null = null): ApiError {
    return new ApiError(status, [{ code, detail, attr }]);
  }
}

export const notFound = (detail = 'Not found.'): ApiError => ApiError.of(404, 'not_found', detail);
export const invalidInput = (detail: string, attr: string | null = null): ApiError =>
  ApiError.of(400, 'invalid_input', detail, attr);
export const required = (attr: string): ApiError => ApiError.of(400, 'required', 'This field is required.', attr);

export function errorResponse(c: Context, err: unknown): Response {
  if (err instanceof ApiError) {
    for (const [name, value] of Object.entries(err.headers)) c.header(name, value);
    return c.json(err.errors, err.status);
  }
  return c.json([{ code: 'error', detail: 'A server error occurred.', attr: null }], 500);
}

/** Spec 7: a known path with an unsupported method. */
export function methodNotAllowed(c: Context): Response {
  return c.json([{ code: 'method_not_allowed', detail: `Method "${c.req.method}" not allowed.`, attr: null }], 405);
}
