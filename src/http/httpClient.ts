import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import { Transform, type Readable } from 'node:stream';
import zlib from 'node:zlib';
import { proxyEnvOf, type OutboundProxy } from './outboundProxy.js';

export type BodyReadResult =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'too_large'; readonly limit: number };

export interface HttpRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
  /** Aborts the request or the body read; the promise then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Largest body read, counted after decoding while streaming; past it the connection is dropped. */
  readonly maxBodyBytes: number;
  /**
   * Whether to read the answer's body (default true), or for which statuses. When not, the
   * promise resolves at the response head with `body` null, and the body is drained in the
   * background (the connection is kept) up to `maxBodyBytes`, or until the signal aborts,
   * past which the connection is dropped; errors while draining are ignored.
   */
  readonly readBody?: boolean | ((status: number) => boolean);
}

export interface HttpResponse {
  readonly status: number;
  /** A header's value as node:http gives it (most repeated headers joined with ", ", a few such as Location keep the first), or null. */
  header(name: string): string | null;
  /** The body, or null when the request asked not to read it (`readBody`). */
  readonly body: BodyReadResult | null;
}

/**
 * A request that failed after its answer's head arrived (the body broke off, or the caller's signal
 * aborted while it was read): `status` is the answer's, `cause` the failure, whose message and code
 * this error repeats.
 */
export class ResponseBodyError extends Error {
  readonly code: string | undefined;
  constructor(
    readonly status: number,
    cause: Error,
  ) {
    super(cause.message, { cause });
    this.name = 'ResponseBodyError';
    this.code = (cause as NodeJS.ErrnoException).code;
  }
}

/**
 * The outbound HTTP of the receiver: the hiring service's scoring GETs, the
 * http sinks' POSTs and the CLI's `webhooks` calls. A seam, so tests can count or fault requests.
 */
export interface HttpClient {
  request(url: string, request: HttpRequest): Promise<HttpResponse>;
}

export interface NodeHttpClient extends HttpClient {
  /** Closes the idle keep-alive connections (the app's stop). */
  close(): void;
}

export interface NodeHttpClientOptions {
  /**
   * How long a body nobody reads (`readBody` false) may take to drain before its connection is
   * dropped (default 5,000 ms): the caller's signal may be disarmed once the head arrived.
   */
  drainTimeoutMs?: number;
  /**
   * How long an idle keep-alive connection is kept (default 4,000 ms, as undici's fetch). A
   * shorter `Keep-Alive: timeout=` from the server wins. Without a bound, a connection a NAT or
   * load balancer forgot long ago would be reused and reset.
   */
  idleTimeoutMs?: number;
  /**
   * The outbound proxy (readOutboundProxy: HTTPS_PROXY, HTTP_PROXY, NO_PROXY), or null/absent to
   * connect directly. Through Node.js's own `proxyEnv` agent option: a CONNECT tunnel for https
   * URLs, an absolute-form request for http ones; a tunnel the proxy refuses fails the request
   * with ERR_PROXY_TUNNEL (its status in the message, the proxy's credentials not).
   */
  proxy?: OutboundProxy | null;
}

/**
 * An HttpClient on node:http and node:https with keep-alive agents.
 *
 * Not the global fetch (undici in Node 20): `npm run bench:http`
 * (bench/httpclient.mjs: 20,000 GETs of a 1.5 KB answer, 4 in flight, each
 * client in its own process) measured 157 µs of CPU per request with fetch
 * against 52 µs with this client, and a peak RSS of 127 MB against 59 MB.
 * Every result read and every http-sink delivery runs on the event loop that
 * answers deliveries; in the receiver at 1,000-2,500 deliveries/s with workers
 * in process, peak RSS fell by 14-20 MB (bench/README.md, "Tenth round").
 *
 * What it keeps from fetch: redirects are never followed (the caller sees the
 * 3xx); gzip, deflate (zlib or raw) and br bodies are decoded as leniently as
 * fetch does (Accept-Encoding is sent), and the body cap counts decoded bytes,
 * so a small compressed bomb cannot get past it; a body over the cap, by
 * Content-Length or while streaming, drops the connection instead of draining
 * it. A GET that meets a reset on a reused keep-alive connection before the
 * response head arrived (the server closed it while idle) is sent once more on
 * a new one. An answer that is not HTTP/1.1 request-response (101 Switching
 * Protocols) fails the request.
 */
export function createNodeHttpClient(options: NodeHttpClientOptions = {}): NodeHttpClient {
  const timeout = options.idleTimeoutMs ?? 4_000;
  const drainTimeoutMs = options.drainTimeoutMs ?? 5_000;
  // `proxyEnv` is in Node.js 22.21+ and 24.5+ (readOutboundProxy refuses an older one), not yet in @types/node 22.
  const proxyOption = (options.proxy ? { proxyEnv: proxyEnvOf(options.proxy) } : {}) as object;
  const agents = {
    'http:': new http.Agent({ keepAlive: true, scheduling: 'lifo', timeout, ...proxyOption }),
    'https:': new https.Agent({ keepAlive: true, scheduling: 'lifo', timeout, ...proxyOption }),
  };

  function send(url: URL, req: HttpRequest, retried: boolean): Promise<HttpResponse> {
    const protocol = url.protocol as keyof typeof agents;
    const agent = agents[protocol];
    if (!agent) return Promise.reject(new TypeError(`only http and https URLs are supported, got ${url.protocol}`));
    const headers: Record<string, string | number> = { 'accept-encoding': 'gzip, deflate, br', ...req.headers };
    const body = typeof req.body === 'string' ? Buffer.from(req.body) : req.body;
    if (body) headers['content-length'] = body.byteLength;
    const { signal } = req;
    return new Promise<HttpResponse>((resolve, reject) => {
      if (signal?.aborted) return reject(abortError(signal));
      /** Set once the response head arrived: from then on the body read settles the promise. */
      let answered = false;
      let settled = false;
      /** Stops the body read in progress (the response and its decoders), if any. */
      let dropBody: (() => void) | null = null;
      const out = (protocol === 'https:' ? https : http).request(url, { method: req.method, headers, agent });
      /** Claims the promise for one outcome; false if it already has one. The signal is this function's alone until then. */
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        return true;
      };
      /** The answer's status once its head arrived, or null before. */
      let status: number | null = null;
      const fail = (err: Error): void => {
        if (!settle()) return;
        dropBody?.();
        out.destroy();
        reject(status === null ? err : new ResponseBodyError(status, err));
      };
      // Rejects at once, at any stage: a request whose socket is already gone emits nothing more.
      const onAbort = (): void => fail(abortError(signal!));
      signal?.addEventListener('abort', onAbort, { once: true });
      out.on('error', (err: NodeJS.ErrnoException) => {
        if (answered || settled) return;
        if (!retried && req.method === 'GET' && out.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) {
          settle();
          send(url, req, true).then(resolve, reject);
        } else fail(err);
      });
      // Without an 'upgrade' listener node:http drops the socket and emits neither 'response' nor 'error'.
      out.on('upgrade', (res: http.IncomingMessage, socket: Socket) => {
        socket.destroy();
        fail(Object.assign(new Error(`unexpected ${res.statusCode ?? 101} Switching Protocols answer`), { code: 'EPROTO' }));
      });
      out.on('close', () => {
        if (!answered) fail(Object.assign(new Error('the connection closed without an answer'), { code: 'ECONNRESET' }));
      });
      out.on('response', (res) => {
        answered = true;
        const code = res.statusCode ?? 0;
        const header = (name: string): string | null => headerValue(res.headers[name.toLowerCase()]);
        let wanted: boolean;
        try {
          wanted = typeof req.readBody === 'function' ? req.readBody(code) : req.readBody !== false;
        } catch (err) {
          return fail(err as Error);
        }
        if (!wanted) {
          settle();
          drain(res, req.maxBodyBytes, signal, drainTimeoutMs);
          resolve({ status: code, header, body: null });
          return;
        }
        // From here a failure (the body cut, an abort) is one of this answer's: a ResponseBodyError.
        status = code;
        const read = readBody(res, req.maxBodyBytes);
        dropBody = read.drop;
        read.result.then((result) => {
          if (settle()) resolve({ status: code, header, body: result });
        }, fail);
      });
      out.end(body);
    });
  }

  return {
    request: (url, req) => {
      let parsed: URL;
      try {
        parsed = new URL(url);
      } catch {
        return Promise.reject(new TypeError('invalid URL'));
      }
      return send(parsed, req, false);
    },
    close() {
      agents['http:'].destroy();
      agents['https:'].destroy();
    },
  };
}

let shared: NodeHttpClient | null = null;

/** One client for the process, for callers given none (its idle sockets never hold the process open). */
export function sharedHttpClient(): HttpClient {
  shared ??= createNodeHttpClient();
  return shared;
}

const headerValue = (v: string | string[] | undefined): string | null => (v === undefined ? null : Array.isArray(v) ? v.join(', ') : v);

function abortError(signal: AbortSignal): Error {
  const reason: unknown = signal.reason;
  if (reason instanceof Error) return reason;
  return Object.assign(new Error('This operation was aborted'), { name: 'AbortError', code: 'ABORT_ERR' });
}

/** Reads and drops a body nobody needs, so the connection can be reused; past `maxBytes`, `timeoutMs` or an abort, drops the connection. */
function drain(res: http.IncomingMessage, maxBytes: number, signal: AbortSignal | undefined, timeoutMs: number): void {
  let seen = 0;
  const timer = setTimeout(() => onAbort(), timeoutMs);
  timer.unref();
  const stop = (): void => {
    clearTimeout(timer);
    signal?.removeEventListener('abort', onAbort);
  };
  const onAbort = (): void => {
    stop();
    res.destroy();
  };
  if (signal?.aborted) return onAbort();
  signal?.addEventListener('abort', onAbort, { once: true });
  res.on('data', (chunk: Buffer) => {
    seen += chunk.byteLength;
    if (seen > maxBytes) onAbort();
  });
  res.on('error', stop);
  res.on('close', stop);
}

// Lenient as fetch is: a body that ends early or empty yields what was decoded instead of an error.
const ZLIB_LENIENT = { flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH };
const BROTLI_LENIENT = { flush: zlib.constants.BROTLI_OPERATION_FLUSH, finishFlush: zlib.constants.BROTLI_OPERATION_FLUSH };

/**
 * `deflate` should be zlib-wrapped, but some servers send raw deflate under that name; as
 * fetch does, the first byte decides (a zlib header's low nibble is 8, for the deflate method).
 * Exported for its tests.
 */
export function createDeflateDecoder(): Transform {
  let inner: zlib.Inflate | zlib.InflateRaw | null = null;
  const out = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      if (chunk.length === 0) return callback();
      if (!inner) {
        const created = (chunk[0]! & 0x0f) === 0x08 ? zlib.createInflate(ZLIB_LENIENT) : zlib.createInflateRaw(ZLIB_LENIENT);
        // zlib's own backpressure: the inflater pauses while this stream's readable side is full.
        created.on('data', (d: Buffer) => {
          if (!out.push(d)) created.pause();
        });
        created.on('error', (err) => out.destroy(err));
        inner = created;
      }
      inner.write(chunk, () => callback());
    },
    flush(callback) {
      if (!inner) return callback();
      inner.once('end', () => callback());
      inner.end();
    },
    destroy(err, callback) {
      inner?.destroy();
      callback(err);
    },
  });
  const read = out._read.bind(out);
  out._read = (size: number) => {
    inner?.resume();
    read(size);
  };
  return out;
}

/** The decoders for Content-Encoding (outermost coding last); null when a coding is unknown, as fetch then passes the bytes through. */
function decoders(contentEncoding: string | undefined): Transform[] | null {
  if (!contentEncoding) return [];
  const codings = contentEncoding
    .toLowerCase()
    .split(',')
    .map((c) => c.trim())
    .filter((c) => c !== '' && c !== 'identity');
  if (codings.length > 4) return null;
  const chain: Transform[] = [];
  for (const coding of codings.reverse()) {
    if (coding === 'gzip' || coding === 'x-gzip') chain.push(zlib.createGunzip(ZLIB_LENIENT));
    else if (coding === 'deflate') chain.push(createDeflateDecoder());
    else if (coding === 'br') chain.push(zlib.createBrotliDecompress(BROTLI_LENIENT));
    else return null;
  }
  return chain;
}

/**
 * Reads the body as UTF-8 text within `maxBytes` (decoded). `drop` stops the read (the caller's
 * abort): the response and its decoders are destroyed and `result` never settles.
 */
function readBody(res: http.IncomingMessage, maxBytes: number): { result: Promise<BodyReadResult>; drop: () => void } {
  const declared = res.headers['content-length'];
  if (declared !== undefined && /^\d+$/.test(declared.trim()) && Number(declared) > maxBytes) {
    res.destroy();
    return { result: Promise.resolve({ kind: 'too_large', limit: maxBytes }), drop: () => undefined };
  }
  // An empty body (a 204, say, that names a coding) decodes to nothing: the decoders are lenient.
  const chain = decoders(headerValue(res.headers['content-encoding']) ?? undefined) ?? [];
  let stream: Readable = res;
  for (const d of chain) stream = stream.pipe(d);
  let done = false;
  const drop = (): void => {
    done = true;
    res.destroy();
    for (const d of chain) d.destroy();
  };
  const result = new Promise<BodyReadResult>((resolve, reject) => {
    const decoder = new TextDecoder('utf-8');
    const parts: string[] = [];
    let seen = 0;
    // Each outcome first checks `done` and ends the read (`drop` sets it), so only one settles.
    stream.on('data', (chunk: Buffer) => {
      if (done) return;
      seen += chunk.byteLength;
      if (seen > maxBytes) {
        drop();
        resolve({ kind: 'too_large', limit: maxBytes });
        return;
      }
      parts.push(decoder.decode(chunk, { stream: true }));
    });
    stream.on('end', () => {
      if (done) return;
      done = true;
      parts.push(decoder.decode());
      resolve({ kind: 'text', text: parts.join('') });
    });
    const onError = (err: Error): void => {
      if (done) return;
      drop();
      reject(err);
    };
    // A connection cut mid-body: node:http emits 'error' (ECONNRESET, "aborted") on the response.
    res.on('error', onError);
    for (const d of chain) d.on('error', onError);
  });
  return { result, drop };
}
