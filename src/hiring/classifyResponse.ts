import { detectReadinessEnvelope } from './detectReadinessEnvelope.js';
import { parseApiErrors } from './parseApiErrors.js';
import { parseRetryAfter } from './parseRetryAfter.js';
import type { BodyReadResult } from '../http/httpClient.js';
import { jsonNestsDeeperThan } from '../util/json.js';
import type { HiringOutcome, HiringResource, JsonObject } from './types.js';

/** What the client saw of one HTTP response: everything the decision needs, no I/O. */
export interface ResponseSnapshot {
  readonly resource: HiringResource;
  readonly status: number;
  /** `Location` header, for 3xx. */
  readonly location: string | null;
  /** `Retry-After` header, for 429 and 5xx. */
  readonly retryAfter: string | null;
  /** The body, or null when it was not read (3xx). */
  readonly body: BodyReadResult | null;
  readonly elapsedMs: number;
  /** Wall clock (epoch ms) when the response arrived, for HTTP-date `Retry-After`. */
  readonly now: number;
  /** The application read, when known: a v1 call detail naming another one is not its result. */
  readonly applicationId?: string;
}


/** Deepest nesting of arrays and objects kept from a scoring read; deeper is an invalid response. */
export const MAX_RESULT_DEPTH = 1000;

/**
 * Classify one HTTP response of a scoring read into a {@link HiringOutcome}. Pure. `redact` is
 * applied to the service's text before it is cut to what is kept (an error body's 500 characters,
 * an unknown readiness reason's 300): a credential cut first kept its name and a few characters
 * of its secret, which no longer looked like a credential to redact.
 */
export function classifyResponse(snapshot: ResponseSnapshot, redact: (text: string) => string = (t) => t): HiringOutcome {
  const { resource, status, elapsedMs, body } = snapshot;
  const base = { resource, elapsedMs };

  if (status >= 300 && status <= 399) {
    return { ...base, kind: 'redirect', status, location: snapshot.location };
  }
  if (status >= 200 && status <= 299) return classifySuccess(snapshot, redact);
  if (status < 400 || status > 599) {
    return {
      ...base,
      kind: 'invalid_response',
      status,
      problem: 'unexpected_status',
      message: `unexpected HTTP status ${status}`,
    };
  }

  // An oversized error body must not hide the status: it still decides.
  const parsed =
    body !== null && body.kind === 'text' ? parseApiErrors(redact(body.text)) : { errors: [], rawBody: null };
  const errorFields = { errors: parsed.errors, rawBody: parsed.rawBody };
  if (status === 401 || status === 403) return { ...base, ...errorFields, kind: 'unauthorized', status };
  if (status === 404) return { ...base, ...errorFields, kind: 'not_found', status };
  if (status === 429) {
    const retryAfterMs = parseRetryAfter(snapshot.retryAfter, snapshot.now);
    return { ...base, ...errorFields, kind: 'rate_limited', status, retryAfterMs };
  }
  if (status >= 500) {
    const retryAfterMs = parseRetryAfter(snapshot.retryAfter, snapshot.now);
    return { ...base, ...errorFields, kind: 'server_error', status, retryAfterMs };
  }
  return { ...base, ...errorFields, kind: 'client_error', status };
}

function classifySuccess(snapshot: ResponseSnapshot, redact: (text: string) => string): HiringOutcome {
  const { resource, status, elapsedMs, body } = snapshot;
  const base = { resource, elapsedMs, kind: 'invalid_response' as const, status };

  if (body === null || body.kind === 'too_large') {
    const limit = body === null ? 0 : body.limit;
    return { ...base, problem: 'too_large', message: `response body exceeds ${limit} bytes` };
  }
  if (body.text.trim() === '') {
    return status === 200
      ? { ...base, problem: 'not_json', message: 'HTTP 200 with an empty body' }
      : { ...base, problem: 'unexpected_status', message: `HTTP ${status} without a body` };
  }

  // JSON.parse takes any depth, but storing the result (JSON.stringify) and every message built
  // from it run out of stack past about 4,000 levels: the read failed with `Maximum call stack
  // size exceeded`, retried for a day. The spec's results nest a few levels.
  if (jsonNestsDeeperThan(body.text, MAX_RESULT_DEPTH)) {
    return { ...base, problem: 'too_deep', message: `body is JSON nested more than ${MAX_RESULT_DEPTH} levels deep` };
  }

  let json: unknown;
  try {
    json = JSON.parse(body.text);
  } catch {
    return {
      ...base,
      problem: 'not_json',
      // Length only: a body that is not the API's JSON may still carry candidate data.
      message: `body is not JSON (${body.text.length} characters)`,
    };
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) {
    const shape = json === null ? 'null' : Array.isArray(json) ? 'an array' : `a ${typeof json}`;
    return { ...base, problem: 'not_object', message: `body is ${shape}, expected an object` };
  }
  const data = json as JsonObject;

  // The v1 read (spec 2.3, 4.1) has no readiness envelope: its 200 body is
  // always the interview call detail, whose `status` is an
  // InterviewCallStatus (3.2) that may well be `processing`. That is the
  // call's own state, so the read is `ready` and the handler interprets it.
  if (resource === 'legacy_interview') {
    // Spec 2.3: `job_application_id` is required. Naming another application (a cache or proxy
    // that mixed answers up), the record is not this application's: kept, it was its result.
    const named = data['job_application_id'];
    if (snapshot.applicationId !== undefined && typeof named === 'string' && named.toLowerCase() !== snapshot.applicationId.toLowerCase()) {
      return { ...base, problem: 'other_application', message: 'the call detail names another application (job_application_id)' };
    }
    return { resource, elapsedMs, kind: 'ready', status, data };
  }

  const envelope = detectReadinessEnvelope(data);
  if (envelope === null) return { resource, elapsedMs, kind: 'ready', status, data };
  if (envelope.status === 'processing') {
    return { resource, elapsedMs, kind: 'processing', status, reason: envelope.reason };
  }
  if (envelope.status === 'unrecognized') {
    // Not the result (there is none in it), and not known to be final: read again, as for
    // processing, and given up after RESULT_GIVE_UP_HOURS if it never changes.
    const reason = `readiness status ${JSON.stringify(envelope.sent)}, not one the spec lists${envelope.reason === null ? '' : ` (reason: ${envelope.reason})`}`;
    return { resource, elapsedMs, kind: 'processing', status, reason: redact(reason).slice(0, 300), unrecognized: envelope.sent };
  }
  return { resource, elapsedMs, kind: 'unavailable', status, reason: envelope.reason };
}
