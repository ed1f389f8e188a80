import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { ApiError } from './apiError.js';

interface StoredResponse {
  fingerprint: string;
  status: ContentfulStatusCode;
  body: unknown;
}

/** Key order must not make "the same body" different. */
function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/**
 * Spec 4.6: a POST create with `Idempotency-Key` replays its original response (header
 * `Idempotent-Replay: true`); the same key with a different body (or on another endpoint) is 409
 * `idempotency_key_conflict`. Assumptions: keys are scoped per organization, kept for the sandbox's
 * lifetime, and only successful responses are stored, so a corrected retry after a 4xx goes through.
 */
export class IdempotencyStore {
  private readonly responses = new Map<string, StoredResponse>();

  /**
   * The 409 for a key reused with another body, before the body is validated: the service
   * answers a reused key by the key (spec 4.6), whatever is wrong with the new body. Each create
   * route calls this first, then handle().
   */
  precheck(c: Context, organizationId: string, body: Record<string, unknown>): void {
    const key = c.req.header('Idempotency-Key');
    if (key === undefined || key === '') return;
    const stored = this.responses.get(`${organizationId}\u0000${key}`);
    if (stored !== undefined && stored.fingerprint !== this.fingerprint(c, body)) {
      throw ApiError.of(409, 'idempotency_key_conflict', 'This Idempotency-Key was already used with a different request body.');
    }
  }

  private fingerprint(c: Context, body: Record<string, unknown>): string {
    return `${c.req.method} ${new URL(c.req.url).pathname} ${canonical(body)}`;
  }

  handle(
    c: Context,
    organizationId: string,
    body: Record<string, unknown>,
    create: () => { status: ContentfulStatusCode; body: unknown },
  ): Response {
    const key = c.req.header('Idempotency-Key');
    if (key === undefined || key === '') {
      const fresh = create();
      return c.json(fresh.body as object, fresh.status);
    }
    const storeKey = `${organizationId}\u0000${key}`;
    const fingerprint = this.fingerprint(c, body);
    const stored = this.responses.get(storeKey);
    if (stored !== undefined) {
      if (stored.fingerprint !== fingerprint) {
        throw ApiError.of(409, 'idempotency_key_conflict', 'This Idempotency-Key was already used with a different request body.');
      }
      c.header('Idempotent-Replay', 'true');
      return c.json(stored.body as object, stored.status);
    }
    const fresh = create();
    if (fresh.status >= 200 && fresh.status < 300) this.responses.set(storeKey, { fingerprint, ...fresh });
    return c.json(fresh.body as object, fresh.status);
  }
}
