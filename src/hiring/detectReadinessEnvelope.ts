import type { ReadinessEnvelope } from './types.js';

/**
 * Recognise the v2 "not ready" envelope `{status, reason, result: null}`
 * (spec 3.6) in a parsed JSON body; null when the body is anything else.
 *
 * Strict on purpose: a result object has its own `status` (`completed`,
 * `failed`, `unreachable`, `opted_out`...) which is the interview outcome, not
 * readiness. Only an object whose `result` key is present and null and whose
 * `status` is `processing` or `unavailable` is an envelope; `{status:
 * "processing", result: {...}}` or `{status: "failed", overall_score: null}`
 * are results.
 */
export function detectReadinessEnvelope(body: unknown): ReadinessEnvelope | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const record = body as Record<string, unknown>;
  if (!Object.hasOwn(record, 'result') || record['result'] !== null) return null;
  const status = record['status'];
  if (status !== 'processing' && status !== 'unavailable') return null;
  const reason = typeof record['reason'] === 'string' ? record['reason'] : null;
  return { status, reason };
}
