/**
 * Shared types of the hiring API client: the resources it reads, the error
 * objects of the API (spec 2.1) and the classified outcome of one read.
 */

/** The four reads the processing layer needs (spec 2.3, 2.10, 4.1, 4.2). */
export type HiringResource = 'interview' | 'cv_evaluation' | 'insights' | 'legacy_interview';

export const HIRING_RESOURCES: readonly HiringResource[] = Object.freeze([
  'interview',
  'cv_evaluation',
  'insights',
  'legacy_interview',
]);

/** One element of an error response body (spec 2.1, codes in 7). */
export interface ApiError {
  /** Machine-readable code, e.g. `not_found`, `authentication_failed`; `''` if the body had none. */
  readonly code: string;
  /** Human-readable message; `''` if the body had none. */
  readonly detail: string;
  /** Offending field, null for non-field errors. */
  readonly attr: string | null;
}

/** A JSON object exactly as received: known fields are not validated, unknown ones are kept. */
export type JsonObject = { readonly [key: string]: unknown };

/** Reasons the spec lists for an `unavailable` envelope (3.6); others are passed through as-is. */
export type KnownUnavailableReason = 'interview_not_available' | 'scoring_failed' | 'no_result';
// `string & {}` keeps editor completion for the known values while admitting new ones.
export type UnavailableReason = KnownUnavailableReason | (string & {});

/** The v2 "not ready" body `{status, reason, result: null}` (spec 3.6). */
export type ReadinessEnvelope =
  | { readonly status: 'processing'; readonly reason: string | null }
  | { readonly status: 'unavailable'; readonly reason: UnavailableReason | null }
  /** The envelope's shape (`result: null`) with a status spec 3.6 does not list, as `sent`. */
  | { readonly status: 'unrecognized'; readonly sent: string; readonly reason: string | null };

/** Why a response could not be used although its status looked usable. */
export type InvalidResponseProblem =
  | 'too_large' // body over `maxBodyBytes`
  | 'not_json' // body is not JSON (or empty)
  | 'not_object' // JSON, but not an object (array, string, null...)
  | 'too_deep' // JSON nested deeper than MAX_RESULT_DEPTH: it could not be stored or sent on
  | 'other_application' // a v1 call detail whose job_application_id is not the application read
  | 'unexpected_status'; // a status the API never documents (1xx, other 2xx without body, >= 600)

interface OutcomeBase {
  readonly resource: HiringResource;
  /** Wall time from sending the request to classifying it (body read included). */
  readonly elapsedMs: number;
}

interface ErrorBodyFields {
  /** Parsed error array (spec 2.1); empty when the body was not one. */
  readonly errors: readonly ApiError[];
  /** The raw body, truncated to 500 characters, when it was not an error array; else null. */
  readonly rawBody: string | null;
}

/**
 * Every way one read can end. Discriminated on `kind`; nothing here ever
 * contains the API key.
 */
export type HiringOutcome =
  /** Full result object, unknown fields kept. Its own `status` is the interview outcome, not readiness. */
  | (OutcomeBase & { readonly kind: 'ready'; readonly status: number; readonly data: JsonObject })
  /**
   * Envelope `processing`: poll again (no faster than every 30 s, spec 8). Also an envelope whose
   * readiness status the spec does not list, named in `unrecognized` (and in `reason`).
   */
  | (OutcomeBase & { readonly kind: 'processing'; readonly status: number; readonly reason: string | null; readonly unrecognized?: string })
  /** Envelope `unavailable`: terminal, no result will ever come. */
  | (OutcomeBase & { readonly kind: 'unavailable'; readonly status: number; readonly reason: UnavailableReason | null })
  /** 404: the application is unknown or belongs to another organization (never work in progress). */
  | (OutcomeBase & ErrorBodyFields & { readonly kind: 'not_found'; readonly status: 404 })
  /** 401/403: the key is missing, invalid or revoked (keys die with their creator's membership). */
  | (OutcomeBase & ErrorBodyFields & { readonly kind: 'unauthorized'; readonly status: 401 | 403 })
  | (OutcomeBase &
      ErrorBodyFields & { readonly kind: 'rate_limited'; readonly status: 429; readonly retryAfterMs: number | null })
  | (OutcomeBase &
      ErrorBodyFields & { readonly kind: 'server_error'; readonly status: number; readonly retryAfterMs: number | null })
  /** Any other 4xx. */
  | (OutcomeBase & ErrorBodyFields & { readonly kind: 'client_error'; readonly status: number })
  /** 3xx: never followed, so the bearer key cannot leak to another host. `location` is resolved against the request URL. */
  | (OutcomeBase & { readonly kind: 'redirect'; readonly status: number; readonly location: string | null })
  /** No HTTP response (refused, reset, DNS, TLS) or the timeout fired, possibly mid-body. */
  | (OutcomeBase & {
      readonly kind: 'network';
      readonly message: string;
      readonly timeout: boolean;
      /** System error code when known, e.g. `ECONNREFUSED`. */
      readonly code: string | null;
    })
  | (OutcomeBase & {
      readonly kind: 'invalid_response';
      readonly status: number;
      readonly problem: InvalidResponseProblem;
      readonly message: string;
    });

export type HiringOutcomeKind = HiringOutcome['kind'];

/** Narrow an outcome union member by kind. */
export type OutcomeOf<K extends HiringOutcomeKind> = Extract<HiringOutcome, { kind: K }>;
