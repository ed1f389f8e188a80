import type { MiddlewareHandler } from 'hono';
import type { Clock } from '../clock.js';
import type { SandboxStore } from '../store.js';
import { ApiError } from './apiError.js';

export type AuthEnv = { Variables: { organizationId: string } };

/**
 * Spec 5: `Authorization: Bearer <key>` on every v1 and v2 request.
 * Missing header → 401 `not_authenticated`; unknown, malformed, revoked or expired key → 401
 * `authentication_failed` (5.3: revocation has no grace period); a key the test restricted → 403
 * `permission_denied` (5.5; the spec states no v2 case of its own, see docs/sandbox.md).
 */
export function requireApiKey(store: SandboxStore, clock: Clock): MiddlewareHandler<AuthEnv> {
  return async (c, next) => {
    const header = c.req.header('Authorization');
    if (header === undefined || header.trim() === '') {
      throw ApiError.of(401, 'not_authenticated', 'Authentication credentials were not provided.');
    }
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
    const record = match?.[1] === undefined ? undefined : store.keys.get(match[1]);
    const expired = record?.expiresAt != null && record.expiresAt <= clock.now();
    if (record === undefined || record.revoked || expired) {
      throw ApiError.of(401, 'authentication_failed', 'Invalid API key.');
    }
    if (record.restricted) {
      throw ApiError.of(403, 'permission_denied', 'You do not have permission to perform this action.');
    }
    c.set('organizationId', record.organizationId);
    await next();
  };
}
