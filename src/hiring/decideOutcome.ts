import type { HiringOutcome } from './types.js';

/**
 * What the caller should do with an outcome.
 *
 * `result` covers the three answers about the resource itself (`ready`,
 * `processing`, `unavailable`): they are data for the handler (store, poll
 * again no sooner than 30 s, record as terminal), not failures of the read.
 */
export type OutcomeDecision =
  | { readonly action: 'result' }
  | { readonly action: 'retry' }
  | { readonly action: 'retry_after'; readonly retryAfterMs: number }
  | { readonly action: 'permanent' }
  | { readonly action: 'pause_source' };

/**
 * The 4xx that pass: 408 (request timeout), and 407, a proxy on the way (HTTP_PROXY for an
 * http:// API URL) refusing its credentials, not the service refusing the read; it passes once
 * the proxy's settings are mended. Other 4xx will not change on retry. Also what fetchResult
 * counts as an outage of the service among them.
 */
export function isTransientClientStatus(status: number): boolean {
  return status === 408 || status === 407;
}

/** Map an outcome to its decision. Pure. */
export function decideOutcome(outcome: HiringOutcome): OutcomeDecision {
  switch (outcome.kind) {
    case 'ready':
    case 'processing':
    case 'unavailable':
      return { action: 'result' };
    case 'unauthorized':
      // Keys are personal and revoked when their creator leaves (spec 5.3):
      // every read of this source will fail the same way until the key changes.
      return { action: 'pause_source' };
    case 'rate_limited':
    case 'server_error':
      return outcome.retryAfterMs === null
        ? { action: 'retry' }
        : { action: 'retry_after', retryAfterMs: outcome.retryAfterMs };
    case 'network':
      return { action: 'retry' };
    case 'not_found':
      // The scoring GETs never 404 for work in progress (spec 4.2), but an
      // event may be seen before the application is readable everywhere: the
      // handler allows a few spaced retries, then dead-letters.
      return { action: 'retry' };
    case 'client_error':
      return isTransientClientStatus(outcome.status) ? { action: 'retry' } : { action: 'permanent' };
    case 'redirect':
      // Not followed (the key must not reach another host). The base URL is
      // wrong (an http:// one behind a load balancer's 301 to https, a moved
      // host): every read of this source is answered so until an operator
      // fixes it, as with a refused key. Given up, each read would be sent to
      // the sinks as given_up although its result exists. (A redirect of some
      // reads only is theirs: the worker pauses only a source redirected as a
      // whole, see outcomeToError's sourceWideOnly.)
      return { action: 'pause_source' };
    case 'invalid_response':
      // A proxy's HTML error page or a truncated body may be transient; a
      // body over the cap, or nested too deeply, will be so next time too.
      return outcome.problem === 'too_large' || outcome.problem === 'too_deep' ? { action: 'permanent' } : { action: 'retry' };
    default: {
      const unknown: never = outcome;
      throw new TypeError(`unknown outcome: ${JSON.stringify(unknown)}`);
    }
  }
}

/** True when trying the same read again later may succeed. */
export function isRetryable(outcome: HiringOutcome): boolean {
  const { action } = decideOutcome(outcome);
  return action === 'retry' || action === 'retry_after';
}
