import { decideOutcome } from './decideOutcome.js';
import { PauseSourceError, PermanentError, RetryAfterError, RetryableError } from './errors.js';
import type { DecisionError } from './errors.js';
import type { HiringOutcome } from './types.js';
import { describeLocation } from '../util/httpTarget.js';
import { redactPersonalData as pd } from '../util/redactPersonalData.js';

/**
 * The typed error a failed read should be thrown as, carrying its decision;
 * null for `ready` / `processing` / `unavailable`, which are answers, not
 * failures. The outcome is attached as `cause` (it never holds the key).
 */
export function outcomeToError(outcome: HiringOutcome): DecisionError | null {
  const decision = decideOutcome(outcome);
  const message = describeOutcome(outcome);
  const options = { cause: outcome };
  switch (decision.action) {
    case 'result':
      return null;
    case 'retry':
      return new RetryableError(message, options);
    case 'retry_after':
      // A 429, or a 5xx that said when to come back: the service as a whole asked for the wait.
      return new RetryAfterError(message, decision.retryAfterMs, { ...options, throttlesSource: true });
    case 'permanent':
      return new PermanentError(message, options);
    case 'pause_source':
      // A redirect of some reads only (one path moved, one application's URL) is those reads'
      // failure, not the source's: the worker pauses only while the source is redirected as a whole.
      return new PauseSourceError(message, {
        ...options,
        status: 'status' in outcome ? outcome.status : 0,
        summary: pauseSummary(outcome),
        sourceWideOnly: outcome.kind === 'redirect',
        ...(outcome.kind === 'redirect' ? { answeredSummary: redirectAfterAnswersSummary(outcome.resource) } : {}),
      });
  }
}

/** The log line of a source's pause: what the operator must fix. */
function pauseSummary(outcome: HiringOutcome): string {
  return outcome.kind === 'redirect'
    ? "the service's answer was a redirect, not followed (the key must not reach another host): fetching for this source is paused until HIRING_API_URL (or the source's api_url) names the API itself"
    : 'API key refused: fetching for this source is paused until a working key is configured';
}

/**
 * The log line of a redirect's pause of a source that answered other reads before: its reads of
 * one resource may be all that was made in the probe period (a quiet source, one path moved).
 */
function redirectAfterAnswersSummary(resource: string): string {
  return `reads of ${resource} are redirected (not followed) and no other read of this source was answered meanwhile: fetching for this source is paused until a probe is answered; if its other reads are answered, only the redirected ones will be given up. Check whether the service moved this endpoint or HIRING_API_URL (or the source's api_url) is wrong`;
}

/**
 * What describeOutcome writes for a read the service answered 404: processing finds dead 404
 * reads by it in `last_error` (the dead-letter handler, and the requeue when a deletion arrives).
 */
export const NOT_FOUND_MARK = 'HTTP 404 not_found';

/**
 * One line for logs and `last_error` columns, e.g. `interview: HTTP 404 not_found (not_found: Not found.)`.
 * What the service wrote (details, reasons, a body) has emails and phone numbers taken out
 * (before a body is cut to 200 characters: an address across the cut is not left half).
 */
export function describeOutcome(outcome: HiringOutcome): string {
  const head = `${outcome.resource}:`;
  switch (outcome.kind) {
    case 'ready':
      return `${head} HTTP ${outcome.status} ready`;
    case 'processing':
    case 'unavailable':
      return `${head} HTTP ${outcome.status} ${outcome.kind}${outcome.reason === null ? '' : ` (${pd(outcome.reason)})`}`;
    case 'not_found':
    case 'unauthorized':
    case 'client_error':
      return `${head} HTTP ${outcome.status} ${outcome.kind}${errorSummary(outcome)}`;
    case 'rate_limited':
    case 'server_error': {
      const wait = outcome.retryAfterMs === null ? '' : `, retry after ${outcome.retryAfterMs} ms`;
      return `${head} HTTP ${outcome.status} ${outcome.kind}${errorSummary(outcome)}${wait}`;
    }
    case 'redirect':
      // The origin only: a sign-in redirect's query carries tokens and the user's address.
      return `${head} HTTP ${outcome.status} redirect not followed${outcome.location === null ? '' : ` (to ${describeLocation(outcome.location)})`}`;
    case 'network':
      return `${head} ${outcome.timeout ? 'timeout' : 'network error'}: ${outcome.message}`;
    case 'invalid_response':
      return `${head} HTTP ${outcome.status} invalid response (${outcome.problem}): ${outcome.message}`;
  }
}

/**
 * A field of the candidate (spec 2.4, 6.3): an error about it may quote the value (`"Value
 * 442079460958 is invalid"`), so its detail is withheld and only the field is named.
 */
const PERSONAL_FIELD = /(?:^|[^a-z])(?:e-?mail|phone|mobile|tel|telephone|name|first_?name|last_?name|full_?name|address|candidate|cv|resume|transcript)(?:$|[^a-z])/i;

function errorSummary(outcome: Extract<HiringOutcome, { errors: unknown }>): string {
  const first = outcome.errors[0];
  if (first !== undefined) {
    const more = outcome.errors.length > 1 ? ` +${outcome.errors.length - 1} more` : '';
    if (first.attr !== null && PERSONAL_FIELD.test(first.attr)) return ` (${pd(`${first.code} [${first.attr}]`)}: detail withheld, it is about a candidate's field${more})`;
    // Redacted as one text, so that a field such as phone_number labels the number in the detail.
    const attr = first.attr === null ? '' : ` [${first.attr}]`;
    return ` (${pd(`${first.code}${attr}: ${first.detail}`)}${more})`;
  }
  return outcome.rawBody === null || outcome.rawBody === '' ? '' : ` (${pd(outcome.rawBody).slice(0, 200)})`;
}
