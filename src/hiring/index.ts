export { createHiringClient, DEFAULT_MAX_BODY_BYTES, DEFAULT_TIMEOUT_MS, DEFAULT_USER_AGENT } from './HiringClient.js';
export type { HiringClient, HiringClientOptions, RequestOptions } from './HiringClient.js';
export { classifyResponse } from './classifyResponse.js';
export type { ResponseSnapshot } from './classifyResponse.js';
export { decideOutcome, isRetryable } from './decideOutcome.js';
export type { OutcomeDecision } from './decideOutcome.js';
export { detectReadinessEnvelope } from './detectReadinessEnvelope.js';
export {
  DecisionError,
  isDecisionError,
  PauseSourceError,
  PermanentError,
  RetryableError,
  RetryAfterError,
} from './errors.js';
export type { DecisionErrorOptions, ErrorDecision } from './errors.js';
export { describeOutcome, outcomeToError } from './outcomeToError.js';
export { parseApiErrors, RAW_BODY_LIMIT } from './parseApiErrors.js';
export type { ParsedApiErrors } from './parseApiErrors.js';
export { parseHttpDate, parseRetryAfter } from './parseRetryAfter.js';
export { resourcePath } from './resourcePath.js';
export { HIRING_RESOURCES } from './types.js';
export type {
  ApiError,
  HiringOutcome,
  HiringOutcomeKind,
  HiringResource,
  InvalidResponseProblem,
  JsonObject,
  KnownUnavailableReason,
  OutcomeOf,
  ReadinessEnvelope,
  UnavailableReason,
} from './types.js';
