import type { ApiSettings } from './cliConfig.js';
import { CliError } from './errors.js';
import { brokeOffFrom, noAnswerFrom } from './networkCause.js';
import { DEFAULT_MAX_BODY_BYTES } from '../hiring/HiringClient.js';
import { createNodeHttpClient, ResponseBodyError, type HttpClient, type HttpRequest, type HttpResponse } from '../http/httpClient.js';
import type { OutboundProxy } from '../http/outboundProxy.js';
import { describeLocation, resolveReference } from '../util/httpTarget.js';
import { redactCredentials } from '../util/redactCredentials.js';
import { redactPersonalData } from '../util/redactPersonalData.js';

/** One error object of spec 2.1. */
export interface ApiErrorItem {
  code: string;
  detail: string;
  attr: string | null;
}

export class ApiFailure extends CliError {
  constructor(
    readonly status: number,
    readonly errors: ApiErrorItem[],
    message: string,
  ) {
    super(message);
  }
}

/**
 * Largest answer read, as for the result reads (DEFAULT_MAX_BODY_BYTES): a page of the API is at most
 * 200 endpoints or delivery records, a few hundred KB. Read whole, a proxy or a server that is not
 * the API streaming without end was buffered for the 30 s timeout: 7.5 GB here.
 */
export const MAX_ANSWER_BYTES = DEFAULT_MAX_BODY_BYTES;

/** An answer the hiring API never gives: retrying will not help. */
export class NotTheApiError extends CliError {}

export interface ApiAnswer<T> {
  status: number;
  body: T;
  /** A header of the answer by name, or null. */
  header(name: string): string | null;
}

/** Plain-words explanation of the codes an operator meets on /webhooks (spec 4.5, 4.6, 5, 7). */
export function explain(status: number, errors: ApiErrorItem[]): string {
  const first = errors[0];
  const detail = errors.map((e) => `${e.code}${e.attr ? ` (${e.attr})` : ''}: ${e.detail}`).join('; ');
  // Only a proxy answers 407 (HTTP_PROXY, for an http:// API URL; through HTTPS_PROXY it is a
  // refused tunnel): not the service, which the request never reached.
  if (status === 407) return 'the outbound proxy refused its credentials (407 Proxy Authentication Required): the request did not reach the service; check the user and password in HTTP_PROXY (or HTTPS_PROXY)';
  switch (first?.code) {
    case 'already_exists':
      return `this URL is already registered as a webhook of your organization (409 already_exists): a URL may be registered once per organization. Use \`webhooks list\` to find it; rotate its secret or delete it instead of registering it again`;
    case 'idempotency_key_conflict':
      return `this Idempotency-Key was already used with a different request (409 idempotency_key_conflict): use a new key for a new request`;
    case 'not_authenticated':
      return 'the service got no API key (401 not_authenticated): set HIRING_API_KEY';
    case 'authentication_failed':
      return 'the service refused the API key (401 authentication_failed): it is wrong, expired, or revoked (keys die when their creator leaves the organization); create a new one in the portal';
    case 'permission_denied':
      return 'the API key may not do this (403 permission_denied)';
    case 'not_found':
      return `not found (404): no such webhook in your organization${detail ? ` (${detail})` : ''}`;
    default:
      return `the service answered ${status}${detail ? `: ${detail}` : ''}`;
  }
}

function parseErrors(body: unknown): ApiErrorItem[] {
  if (!Array.isArray(body)) return [];
  return body.filter((e): e is ApiErrorItem => typeof e === 'object' && e !== null && typeof (e as ApiErrorItem).code === 'string');
}

/**
 * The hiring service's /api/v2/webhooks with the configured key. Redirects
 * are never followed and `next` links only on the API's own origin, so the
 * bearer key cannot reach another host.
 */
export class WebhooksApi {
  private readonly base: string;
  private readonly origin: string;

  private readonly http: HttpClient;

  /**
   * `http`: the receiver's outbound client by default (through `settings.proxy`, HTTPS_PROXY and
   * the like, as the receiver's reads go), for a test to count or fault requests.
   */
  constructor(
    private readonly settings: Pick<ApiSettings, 'apiUrl' | 'apiKey' | 'origin'> & { readonly proxy?: OutboundProxy | null },
    http?: HttpClient,
  ) {
    this.base = `${settings.apiUrl}/api/v2/webhooks`;
    this.origin = new URL(settings.apiUrl).origin;
    this.http = http ?? createNodeHttpClient({ proxy: settings.proxy ?? null });
  }

  async call<T>(method: HttpRequest['method'], url: string, opts: { body?: unknown; headers?: Record<string, string> } = {}): Promise<ApiAnswer<T>> {
    if (new URL(url).origin !== this.origin) throw new CliError(`refusing to send the API key to ${new URL(url).origin} (the API is at ${this.origin})`);
    let res: HttpResponse;
    try {
      res = await this.http.request(url, {
        method,
        signal: AbortSignal.timeout(30_000),
        headers: {
          authorization: `Bearer ${this.settings.apiKey}`,
          accept: 'application/json',
          ...(opts.body !== undefined ? { 'content-type': 'application/json' } : {}),
          ...opts.headers,
        },
        ...(opts.body !== undefined ? { body: JSON.stringify(opts.body) } : {}),
        maxBodyBytes: MAX_ANSWER_BYTES,
      });
    } catch (err) {
      // The headers came, then the body stopped (the 30 s ran out, the connection closed): said as
      // the service's, not as a bare "terminated" that names nothing.
      if (err instanceof ResponseBodyError) throw new CliError(brokeOffFrom(`the hiring service at ${this.origin}`, `HTTP ${err.status}`, err));
      throw new CliError(noAnswerFrom(`the hiring service at ${this.origin}`, err));
    }
    // Over the cap by its Content-Length or while streaming: the connection is dropped, not read on.
    if (res.body?.kind !== 'text') throw this.notTheApi(`HTTP ${res.status} with a body over ${MAX_ANSWER_BYTES} bytes`);
    const text = res.body.text;
    let body: unknown = null;
    if (text !== '') {
      try {
        body = JSON.parse(text);
      } catch {
        body = text;
      }
    }
    if (res.status >= 300) {
      const errors = parseErrors(body);
      if (res.status < 400) {
        // Where it points, by its origin (an http:// URL redirected to https://, a moved host): never
        // its path or query. Not the API's answer: the same request meets it again (register does not retry it).
        const location = res.header('location');
        throw new NotTheApiError(`the service answered a redirect (${res.status}${location ? ` to ${describeLocation(location, url)}` : ''}); not followed: check HIRING_API_URL`);
      }
      // What the service wrote goes to a terminal or a CI log: without the key (a proxy may echo
      // the Authorization header), another key or secret it names, and candidates' addresses and numbers.
      const key = this.settings.apiKey;
      const clean = (t: string) => redactPersonalData(redactCredentials(t, key));
      const said = errors.map((e) => ({ code: clean(e.code), detail: clean(e.detail), attr: e.attr === null ? null : clean(e.attr) }));
      throw new ApiFailure(res.status, said, explain(res.status, said));
    }
    // A portal page or a proxy's answer is 200 too: what is not JSON is not the API's answer.
    if (typeof body === 'string') throw this.notTheApi(`HTTP ${res.status} with a body that is not JSON (${res.header('content-type') ?? 'no content type'})`);
    return { status: res.status, body: body as T, header: res.header };
  }

  /** An answer in a shape the API never gives: HIRING_API_URL most likely names another server. */
  notTheApi(what: string): NotTheApiError {
    return new NotTheApiError(`the answer from ${this.origin} is not the hiring API's (${what}): is HIRING_API_URL the service's API base URL?`);
  }

  /** A webhook endpoint object (spec 4.5), or a clear error. */
  async endpoint<T extends { id: string; url: string }>(method: HttpRequest['method'], url: string, opts: { body?: unknown; headers?: Record<string, string> } = {}): Promise<ApiAnswer<T>> {
    const answer = await this.call<T>(method, url, opts);
    const b = answer.body as Partial<T> | null;
    if (typeof b !== 'object' || b === null || typeof b.id !== 'string' || typeof b.url !== 'string') throw this.notTheApi(`HTTP ${answer.status} without a webhook's id and url`);
    return answer;
  }

  url(path = ''): string {
    return `${this.base}${path}`;
  }

  /** Every item of a paged list (spec 2.2, 8): follows `next` until null. */
  async listAll<T>(firstUrl: string, maxPages = 10_000): Promise<T[]> {
    const items: T[] = [];
    let url: string | null = firstUrl;
    const seen = new Set<string>();
    for (let page = 0; url !== null; page++) {
      if (page >= maxPages || seen.has(url)) throw new CliError(`pagination did not end after ${page} pages`);
      seen.add(url);
      const { body }: ApiAnswer<{ results?: unknown; next?: unknown } | null> = await this.call('GET', url);
      if (typeof body !== 'object' || body === null || !Array.isArray(body.results)) throw this.notTheApi('a page without a results list');
      // A `next` relative to the page (`/api/v2/webhooks?offset=50`, as some proxies rewrite it) is
      // resolved against it, as a browser would: taken as it was, it failed as a bare "Invalid URL".
      // Its origin is checked as any other's (call).
      const next: string | null | undefined = body.next === undefined || body.next === null ? null : typeof body.next === 'string' ? resolveReference(body.next, url) : undefined;
      if (next === undefined) throw this.notTheApi('a page whose next is not a URL');
      items.push(...(body.results as T[]));
      url = next;
    }
    return items;
  }
}
