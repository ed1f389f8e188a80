import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { ApiError } from './apiError.js';

interface StoredResponse {
  fingerprint: string;
  status: ContentfulStatusCode;
  body: unknown;
}

type Part = { text: string } | { value: unknown };

/**
 * Key order must not make "the same body" different. Walked with a stack of its own, not by
 * recursion: a body JSON.parse accepts may nest tens of thousands of levels, and a recursive walk
 * overflowed on it (a 500 for a create that, without the key, is answered 201).
 */
function canonical(value: unknown): string {
  const out: string[] = [];
  const todo: Part[] = [{ value }];
  const push = (parts: Part[]) => {
    for (let i = parts.length - 1; i >= 0; i--) todo.push(parts[i]!);
  };
  for (let part = todo.pop(); part !== undefined; part = todo.pop()) {
    if ('text' in part) {
      out.push(part.text);
      continue;
    }
    const v = part.value;
    if (Array.isArray(v)) {
      push([{ text: '[' }, ...v.flatMap((x, i): Part[] => (i === 0 ? [{ value: x }] : [{ text: ',' }, { value: x }])), { text: ']' }]);
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
      push([{ text: '{' }, ...entries.flatMap(([k, x], i): Part[] => [{ text: `${i === 0 ? '' : ','}${JSON.stringify(k)}:` }, { value: x }]), { text: '}' }]);
    } else {
      out.push(String(JSON.stringify(v)));
    }
  }
  return out.join('');
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
