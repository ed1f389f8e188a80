import { classifyResponse } from './classifyResponse.js';
import { sharedHttpClient, type HttpClient, type HttpResponse } from '../http/httpClient.js';
import { resourcePath } from './resourcePath.js';
import type { HiringOutcome, HiringResource } from './types.js';
import { resolveLocation } from '../util/httpTarget.js';
import { redactCredentials } from '../util/redactCredentials.js';

export const DEFAULT_TIMEOUT_MS = 10_000;
export const DEFAULT_MAX_BODY_BYTES = 5 * 1024 * 1024;
export const DEFAULT_USER_AGENT = 'hiring-webhook-receiver';

export interface HiringClientOptions {
  /** The service host, e.g. `https://api.example.com` (trailing slash tolerated); `/api/v1|v2` is appended. */
  readonly baseUrl: string;
  /** Bearer key of this source. Kept in a closure: never exposed, logged or put in an outcome. */
  readonly apiKey: string;
  /** Outbound HTTP; defaults to one shared node:http client (tests inject one to count or fault requests). */
  readonly http?: HttpClient;
  /** Whole-request budget, headers and body included. */
  readonly timeoutMs?: number;
  /** Largest body read, counted while streaming. */
  readonly maxBodyBytes?: number;
  readonly userAgent?: string;
  /** Wall clock in epoch ms (elapsed time, HTTP-date `Retry-After`). */
  readonly now?: () => number;
}

export interface RequestOptions {
  /** Abort the read (e.g. on shutdown); it then ends as a `network` outcome with `timeout: false`. */
  readonly signal?: AbortSignal;
}

export interface HiringClient {
  /** Normalized base URL, without trailing slash. */
  readonly baseUrl: string;
  fetchResource(resource: HiringResource, applicationId: string, options?: RequestOptions): Promise<HiringOutcome>;
  /** GET /api/v2/applications/{id}/interview */
  getInterview(applicationId: string, options?: RequestOptions): Promise<HiringOutcome>;
  /** GET /api/v2/applications/{id}/cv-evaluation */
  getCvEvaluation(applicationId: string, options?: RequestOptions): Promise<HiringOutcome>;
  /** GET /api/v2/applications/{id}/insights */
  getInsights(applicationId: string, options?: RequestOptions): Promise<HiringOutcome>;
  /** GET /api/v1/applications/{id}/interview (legacy engine; no readiness envelope) */
  getLegacyInterview(applicationId: string, options?: RequestOptions): Promise<HiringOutcome>;
}

/**
 * A client for one source (base URL + key) of the hiring service's scoring
 * reads. Every read resolves to a classified {@link HiringOutcome}; it only
 * rejects for programmer errors (unknown resource, empty or dot-segment id).
 *
 * Redirects are never followed: the bearer key must not reach another host,
 * so a 3xx is reported as an outcome.
 */
export function createHiringClient(options: HiringClientOptions): HiringClient {
  const baseUrl = normalizeBaseUrl(options.baseUrl);
  const apiKey = validateApiKey(options.apiKey);
  const http = options.http ?? sharedHttpClient();
  const timeoutMs = positive('timeoutMs', options.timeoutMs ?? DEFAULT_TIMEOUT_MS);
  const maxBodyBytes = positive('maxBodyBytes', options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
  const now = options.now ?? Date.now;
  const headers = {
    authorization: `Bearer ${apiKey}`,
    accept: 'application/json',
    'user-agent': options.userAgent ?? DEFAULT_USER_AGENT,
  };
  const scrub = (text: string): string => redactCredentials(text, apiKey);

  async function fetchResource(
    resource: HiringResource,
    applicationId: string,
    requestOptions: RequestOptions = {},
  ): Promise<HiringOutcome> {
    const url = baseUrl + resourcePath(resource, applicationId);

    const controller = new AbortController();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      controller.abort();
    }, timeoutMs);
    const callerSignal = requestOptions.signal;
    const onCallerAbort = (): void => controller.abort();
    if (callerSignal?.aborted) controller.abort();
    else callerSignal?.addEventListener('abort', onCallerAbort, { once: true });

    const started = now();
    const elapsed = (): number => Math.max(0, Math.round(now() - started));
    let response: HttpResponse;
    try {
      // Redirects are never followed (see above): a 3xx is classified on its head, its body not read.
      response = await http.request(url, { method: 'GET', headers, signal: controller.signal, maxBodyBytes, readBody: (status) => status < 300 || status > 399 });
    } catch (error) {
      const message = timedOut
        ? `no complete response within ${timeoutMs} ms`
        : callerSignal?.aborted
          ? 'aborted by caller'
          : describeError(error);
      return {
        kind: 'network',
        resource,
        elapsedMs: elapsed(),
        message: scrub(message),
        timeout: timedOut,
        code: timedOut ? null : errorCode(error),
      };
    } finally {
      clearTimeout(timer);
      callerSignal?.removeEventListener('abort', onCallerAbort);
    }

    const outcome = classifyResponse({
      resource,
      status: response.status,
      location: response.header('location'),
      retryAfter: response.header('retry-after'),
      body: response.body,
      elapsedMs: elapsed(),
      now: now(),
      applicationId,
    }, scrub);
    const scrubbed = scrubOutcome(outcome, scrub);
    // Resolved (after the key is taken out) so that a relative Location is said by its origin,
    // like any other, in logs, last_error and the source's pause.
    return scrubbed.kind === 'redirect' && scrubbed.location !== null ? { ...scrubbed, location: resolveLocation(scrubbed.location, url) } : scrubbed;
  }

  const client: HiringClient = {
    baseUrl,
    fetchResource,
    getInterview: (id, o) => fetchResource('interview', id, o),
    getCvEvaluation: (id, o) => fetchResource('cv_evaluation', id, o),
    getInsights: (id, o) => fetchResource('insights', id, o),
    getLegacyInterview: (id, o) => fetchResource('legacy_interview', id, o),
  };
  // The key only lives in the closure above; these make the client's printed
  // forms say so explicitly.
  const describe = (): string => `HiringClient(${baseUrl})`;
  Object.defineProperties(client, {
    toString: { value: describe },
    toJSON: { value: () => ({ baseUrl }) },
    [Symbol.for('nodejs.util.inspect.custom')]: { value: describe },
  });
  return Object.freeze(client);
}

function normalizeBaseUrl(raw: string): string {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new TypeError('baseUrl must be an absolute http(s) URL');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError(`baseUrl must use http or https, got ${url.protocol}`);
  }
  // Credentials in the URL would be sent as Basic auth beside the key; refused up front.
  if (url.username !== '' || url.password !== '') throw new TypeError('baseUrl must not contain credentials');
  if (url.search !== '' || url.hash !== '') throw new TypeError('baseUrl must not have a query or fragment');
  return url.origin + url.pathname.replace(/\/+$/, '');
}

function validateApiKey(key: string): string {
  // Checked here, before any request: an invalid header value must never reach
  // an error message that could carry the key.
  if (typeof key !== 'string' || key.length === 0) throw new TypeError('apiKey must be a non-empty string');
  if (!/^[\x21-\x7e]+$/.test(key)) {
    throw new TypeError('apiKey contains whitespace or characters not allowed in a header');
  }
  return key;
}

function positive(name: string, value: number): number {
  if (!Number.isFinite(value) || value <= 0) throw new RangeError(`${name} must be a positive number`);
  return value;
}

function describeError(error: unknown): string {
  if (!(error instanceof Error)) return String(error);
  const cause = error.cause;
  // Errors that wrap another (`fetch failed` from undici, if an injected client uses fetch) carry the useful part in `cause`.
  if (cause instanceof Error && cause.message !== '' && cause.message !== error.message) {
    return `${error.message}: ${cause.message}`;
  }
  return error.message;
}

function errorCode(error: unknown): string | null {
  for (const candidate of [error instanceof Error ? error.cause : undefined, error]) {
    if (typeof candidate === 'object' && candidate !== null && 'code' in candidate) {
      const code = (candidate as { code: unknown }).code;
      if (typeof code === 'string') return code;
    }
  }
  return null;
}

/**
 * Remove the key from the diagnostic strings of an outcome, in case a server
 * or proxy echoes the request headers back. `data` of a ready result is the
 * service's record and is kept exactly as received.
 */
function scrubOutcome(outcome: HiringOutcome, scrub: (text: string) => string): HiringOutcome {
  switch (outcome.kind) {
    case 'ready':
      return outcome;
    case 'processing':
      return outcome.reason === null ? outcome : { ...outcome, reason: scrub(outcome.reason), ...(outcome.unrecognized === undefined ? {} : { unrecognized: scrub(outcome.unrecognized) }) };
    case 'unavailable':
      return outcome.reason === null ? outcome : { ...outcome, reason: scrub(outcome.reason) };
    case 'redirect':
      return outcome.location === null ? outcome : { ...outcome, location: scrub(outcome.location) };
    case 'network':
    case 'invalid_response':
      return { ...outcome, message: scrub(outcome.message) };
    default:
      return {
        ...outcome,
        rawBody: outcome.rawBody === null ? null : scrub(outcome.rawBody),
        errors: outcome.errors.map((e) => ({
          code: scrub(e.code),
          detail: scrub(e.detail),
          attr: e.attr === null ? null : scrub(e.attr),
        })),
      };
  }
}
