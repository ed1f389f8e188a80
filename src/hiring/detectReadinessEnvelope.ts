import type { ReadinessEnvelope } from './types.js';

/**
 * The interview outcomes of spec 2.10 (`status` of a result object). A body `{status: "failed",
 * result: null}` is such a result, not an envelope.
 */
const RESULT_OUTCOMES: ReadonlySet<string> = new Set(['completed', 'failed', 'unreachable', 'opted_out']);

/**
 * Fields a result object has (spec 2.10 for the interview; 6.4's payloads for all three: every
 * result has `overall_score`). A body with `result: null` and one of these is a result whose own
 * `status` the spec does not list (an interview `cancelled`, a CV evaluation `evaluated`), not an
 * envelope: the envelope of 3.6 is `{status, reason, result}`.
 */
const RESULT_FIELDS: readonly string[] = ['overall_score', 'is_eligible', 'ineligibility_reasons', 'criteria_results', 'hiring_recommendation', 'id', 'completed_at'];

/**
 * Recognise the v2 "not ready" envelope `{status, reason, result: null}`
 * (spec 3.6) in a parsed JSON body; null when the body is anything else.
 *
 * Strict on purpose: a result object has its own `status` (`completed`,
 * `failed`, `unreachable`, `opted_out`...) which is the interview outcome, not
 * readiness. Only an object whose `result` key is present and null is an
 * envelope, or one with status `processing` or `unavailable`, no `result` key and
 * no field of a result (the envelope with its null fields left out);
 * `{status: "processing", result: {...}}` or `{status: "failed", overall_score: null}`
 * are results, and so is `{status: "failed", result: null}`.
 *
 * The envelope's shape with a status the spec does not list (a third readiness state the
 * service adds, `queued` say) is `unrecognized`: it carries no result, and taking it for one
 * stored a final "ready" result of nothing, never read again. Unless it also carries a field of a
 * result (RESULT_FIELDS): then it is a result, whatever its status, and read as one.
 */
export function detectReadinessEnvelope(body: unknown): ReadinessEnvelope | null {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return null;
  const record = body as Record<string, unknown>;
  const status = record['status'];
  const reason = typeof record['reason'] === 'string' ? record['reason'] : null;
  // The envelope with its nulls left out (a serializer or gateway that drops null fields):
  // `{"status": "processing"}` holds no result, and taken for one it was stored as a final
  // `ready` result of nothing, never read again. Only for the two statuses of spec 3.6 and
  // without a field of a result: a result whose own status the spec does not list stays a result.
  if (!Object.hasOwn(record, 'result') && (status === 'processing' || status === 'unavailable') && !RESULT_FIELDS.some((f) => Object.hasOwn(record, f))) {
    return { status, reason };
  }
  if (!Object.hasOwn(record, 'result') || record['result'] !== null) return null;
  if (status === 'processing' || status === 'unavailable') return { status, reason };
  if (typeof status !== 'string' || status === '' || RESULT_OUTCOMES.has(status)) return null;
  if (RESULT_FIELDS.some((f) => Object.hasOwn(record, f))) return null;
  return { status: 'unrecognized', sent: status, reason };
}
