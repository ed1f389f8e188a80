import { Webhook } from 'standardwebhooks';
import { z } from 'zod';
import { parseSecret, quotedProblem } from '../../config/parseSecret.js';
import { HTTP_TOKEN, isPlainKey, KEY_NOT_SHOWN } from '../../config/parseOptions.js';
import { PauseSourceError, PermanentError, RetryableError, RetryAfterError } from '../../hiring/errors.js';
import { parseRetryAfter } from '../../hiring/parseRetryAfter.js';
import { InterruptedByStopError } from '../interrupted.js';
import { serializeMessage } from '../serializeMessage.js';
import type { DeliveryContext, DeliveryOutcome, ResolveContext, Sink, SinkDeps, SinkKind, SinkMessage } from '../types.js';
import { secretRef } from '../../config/secretRef.js';
import type { HttpResponse } from '../../http/httpClient.js';
import { MAX_RETRY_AFTER_MS } from '../../queue/backoff.js';
import { deadlineSignal } from '../../util/deadlineSignal.js';
import { isLoopbackHost } from '../../util/loopback.js';
import { describeLocation, httpTarget } from '../../util/httpTarget.js';

export interface HttpSinkOptions {
  url: string;
  /** `whsec_` + base64: the sink's own signing secret. */
  secret: string;
  timeoutMs: number;
  /** Extra request headers from the config (an API gateway's credential, say): never logged. */
  headers: Readonly<Record<string, string>>;
}

/** Headers a config may not set: the signature's, the framing's, and the connection's. */
const RESERVED_HEADERS = new Set(['content-type', 'content-length', 'content-encoding', 'transfer-encoding', 'host', 'connection', 'keep-alive', 'upgrade', 'expect', 'te', 'trailer', 'proxy-connection', 'user-agent']);
/** Visible ASCII, spaces and tabs: no line breaks (a header injected after them), no NUL. */
const HEADER_VALUE = /^[\t\x20-\x7e]{0,8192}$/;
const MAX_HEADERS = 20;

/** Only the status of a sink's answer matters: its body is drained in the background up to this (the connection is kept), past it the connection is dropped. */
const ANSWER_BODY_LIMIT = 64 * 1024;

const withStatus = <E extends Error>(err: E, status: number): E => Object.assign(err, { status });

/**
 * POST of the message as JSON, signed with Standard Webhooks headers. The
 * webhook-id is the (event, sink) message id, so a consumer dedupes retries and
 * replays; the timestamp and signature are fresh on every attempt.
 */
export function createHttpSink(options: HttpSinkOptions, deps: Pick<SinkDeps, 'http' | 'shutdown'>): Sink {
  const signer = new Webhook(options.secret);
  return {
    async deliver(message: SinkMessage, ctx: DeliveryContext): Promise<DeliveryOutcome> {
      const body = serializeMessage(message);
      const now = ctx.clock.now();
      const headers = {
        ...options.headers,
        'content-type': 'application/json',
        'user-agent': 'hiring-webhook-receiver',
        'webhook-id': ctx.messageId,
        'webhook-timestamp': String(Math.floor(now / 1000)),
        'webhook-signature': signer.sign(ctx.messageId, new Date(now), body),
      };
      let res: HttpResponse;
      // Not AbortSignal.any over AbortSignal.timeout: on Node 20 a garbage collection loses that
      // timeout, and a consumer that never answers would hold this delivery until the shutdown.
      const deadline = deadlineSignal(options.timeoutMs, deps.shutdown);
      try {
        // A redirect is a failure (the consumer must configure its final URL), never followed with our signature.
        res = await deps.http.request(options.url, {
          method: 'POST',
          headers,
          body,
          signal: deadline.signal,
          maxBodyBytes: ANSWER_BODY_LIMIT,
          // Settled on the status: a consumer that accepted the message and then cut or botched its body has it.
          readBody: false,
        });
      } catch (err) {
        const e = err as Error & { code?: string; cause?: { code?: string } };
        if (deps.shutdown?.aborted) throw new InterruptedByStopError();
        if (e.name === 'TimeoutError' || e.name === 'AbortError') throw new RetryableError(`no response within ${options.timeoutMs} ms`);
        throw new RetryableError(`request failed (${e.code ?? e.cause?.code ?? e.message})`);
      } finally {
        deadline.dispose();
      }
      const status = res.status;
      if (status >= 200 && status < 300) return { statusCode: status };
      if (status === 410) throw withStatus(new PauseSourceError(`HTTP 410 Gone from ${new URL(options.url).origin}`), status);
      if (status >= 300 && status < 400) {
        // The Location in the target's form: a redirect (http to https, say) usually repeats the token.
        const location = res.header('location');
        throw withStatus(new RetryableError(`HTTP ${status} redirect${location ? ` to ${describeLocation(location, options.url)}` : ''} not followed`), status);
      }
      if (status === 429 || status === 503) {
        const after = parseRetryAfter(res.header('retry-after'), ctx.clock.now());
        // The consumer's wait holds the whole sink, not only this message: its other deliveries
        // would meet the same answer, each spending an attempt.
        if (after !== null) {
          throw withStatus(new RetryAfterError(`HTTP ${status}; Retry-After ${Math.round(after / 1000)} s`, Math.min(after, MAX_RETRY_AFTER_MS), { throttlesSource: true }), status);
        }
      }
      if (status === 413) {
        // A limit the consumer says is passing (RFC 9110 15.5.14): this message, not the sink, waits
        // as long as it said (its other messages may be smaller), instead of sending the whole
        // message again on the 10 s, 30 s ... backoff before that time.
        const after = parseRetryAfter(res.header('retry-after'), ctx.clock.now());
        if (after !== null) throw withStatus(new RetryAfterError(`HTTP 413; Retry-After ${Math.round(after / 1000)} s`, Math.min(after, MAX_RETRY_AFTER_MS)), status);
      }
      if (status === 413 && res.header('retry-after') === null) {
        // The consumer refuses the message's size: the same bytes meet the same refusal at every
        // attempt (25 over about 14 h, each sending the whole message again). A dead letter at once,
        // to retry once the consumer takes larger bodies.
        throw withStatus(new PermanentError(`HTTP 413: the consumer refuses a message of ${Buffer.byteLength(body)} bytes (raise its body size limit, then dead-letters retry)`), status);
      }
      throw withStatus(new RetryableError(`HTTP ${status}`), status);
    },
  };
}

/** The configured headers by lowercase name, or null after naming each problem (never a value: they hold credentials). */
function resolveHeaders(raw: Record<string, z.infer<typeof secretRef>>, ctx: ResolveContext): Record<string, string> | null {
  const out: Record<string, string> = {};
  let ok = true;
  const entries = Object.entries(raw);
  if (entries.length > MAX_HEADERS) {
    ctx.problem(`${ctx.at}.headers: at most ${MAX_HEADERS} headers`);
    return null;
  }
  for (const [i, [name, ref]] of entries.entries()) {
    // A name shaped like a credential (a token pasted as the name) is not echoed either.
    const at = `${ctx.at}.headers.${isPlainKey(name) ? name : KEY_NOT_SHOWN}`;
    const lower = name.toLowerCase();
    if (!HTTP_TOKEN.test(name)) {
      // Not echoed: a pasted "Authorization: Bearer …" as the name would carry its token.
      ctx.problem(`${ctx.at}.headers: the name of header ${i + 1} is not a header name (letters, digits and !#$%&'*+.^_\`|~-, up to 100; not shown, as it may hold a value)`);
      ok = false;
      continue;
    }
    if (RESERVED_HEADERS.has(lower) || lower.startsWith('webhook-')) {
      ctx.problem(`${at}: set by the receiver itself (the message's framing and its Standard Webhooks signature)`);
      ok = false;
      continue;
    }
    if (lower in out) {
      ctx.problem(`${at}: given twice (header names are case-insensitive)`);
      ok = false;
      continue;
    }
    const value = ctx.secret(at, ref);
    if (value === null) {
      ok = false;
      continue;
    }
    if (!HEADER_VALUE.test(value)) {
      ctx.problem(`${at}: the value must be printable ASCII (no line breaks), at most 8,192 characters`);
      ok = false;
      continue;
    }
    // `docker --env-file` and `fly secrets set` keep the quotes of `NAME="Bearer …"`: sent as they
    // are, the gateway refuses every message, each retried until it is a dead letter.
    const quoted = quotedProblem(value);
    if (quoted) {
      ctx.problem(`${at}: the value ${quoted}`);
      ok = false;
      continue;
    }
    out[lower] = value;
  }
  return ok ? out : null;
}

export const httpSinkKind: SinkKind<
  { url: z.ZodString; secret: typeof secretRef; timeout_ms: z.ZodOptional<z.ZodNumber>; headers: z.ZodOptional<z.ZodRecord<z.ZodString, typeof secretRef>> },
  HttpSinkOptions
> = {
  fields: {
    url: z.string(),
    secret: secretRef,
    // Below the job lease (60 s): an attempt never outlives the lease that guards it.
    timeout_ms: z.number().int().min(100).max(50_000).optional(),
    // Each value inline or { "env": "NAME" }, as secrets are: a gateway's token belongs in the environment.
    headers: z.record(z.string(), secretRef).optional(),
  },
  defaultConcurrency: 4,
  resolve(raw, ctx) {
    let url: string | null = raw.url;
    try {
      const u = new URL(raw.url);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new Error('scheme');
      if (u.username || u.password) {
        // fetch refuses them anyway, and its error would carry them into logs and last_error.
        ctx.problem(`${ctx.at}.url: must not carry credentials (user:password@); authenticate with the signature`);
        url = null;
      }
    } catch {
      // Not echoed: a URL may hold a token in its path.
      ctx.problem(`${ctx.at}.url: must be an http(s) URL`);
      url = null;
    }
    const headers = resolveHeaders(raw.headers ?? {}, ctx);
    const secret = ctx.secret(`${ctx.at}.secret`, raw.secret);
    if (secret !== null) {
      const parsed = parseSecret(secret);
      if (!parsed.ok) ctx.problem(`${ctx.at}.secret: ${parsed.problem}`);
      else if (url !== null && headers !== null) return { url, secret, timeoutMs: raw.timeout_ms ?? 10_000, headers };
    }
    return null;
  },
  target: (o) => httpTarget(o.url),
  warnings(o) {
    const u = new URL(o.url);
    return u.protocol === 'http:' && !isLoopbackHost(u.hostname) ? [`plain http to ${u.origin}: its messages (candidate data) travel unencrypted; use https`] : [];
  },
  // Before the digest form, the whole URL was stored.
  formerTargets: (o) => [o.url],
  create: (_name, options, deps) => createHttpSink(options, deps),
};
