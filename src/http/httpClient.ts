import http from 'node:http';
import https from 'node:https';
import type { Readable, Transform } from 'node:stream';
import zlib from 'node:zlib';

export type BodyReadResult =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'too_large'; readonly limit: number };

export interface HttpRequest {
  readonly method: 'GET' | 'POST';
  readonly headers: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
  /** Aborts the request or the body read; the promise then rejects with the signal's AbortError. */
  readonly signal?: AbortSignal;
  /** Largest body read, counted after decoding while streaming; past it the connection is dropped. */
  readonly maxBodyBytes: number;
}

export interface HttpResponse {
  readonly status: number;
  /** A header's value (repeated ones joined with ", "), or null. */
  header(name: string): string | null;
  readonly body: BodyReadResult;
}

/**
 * The outbound HTTP of the receiver: the hiring service's scoring GETs and the
 * http sinks' POSTs. A seam, so tests can count or fault requests.
 */
export interface HttpClient {
  request(url: string, request: HttpRequest): Promise<HttpResponse>;
}

export interface NodeHttpClient extends HttpClient {
  /** Closes the idle keep-alive connections (the app's stop). */
  close(): void;
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
 * 3xx); gzip, deflate and br bodies are decoded (Accept-Encoding is sent), and
 * the body cap counts decoded bytes, so a small compressed bomb cannot get past
 * it; a body over the cap, by Content-Length or while streaming, drops the
 * connection instead of draining it. A GET that meets a reset on a reused
 * keep-alive connection before any answer (the server closed it while idle) is
 * sent once more on a new one.
 */
export function createNodeHttpClient(): NodeHttpClient {
  const agents = {
    'http:': new http.Agent({ keepAlive: true, scheduling: 'lifo' }),
    'https:': new https.Agent({ keepAlive: true, scheduling: 'lifo' }),
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
      let answered = false;
      const out = (protocol === 'https:' ? https : http).request(url, { method: req.method, headers, agent });
      const onAbort = (): void => {
        out.destroy(abortError(signal!));
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      const settle = (): void => signal?.removeEventListener('abort', onAbort);
      out.on('error', (err: NodeJS.ErrnoException) => {
        if (answered) return;
        settle();
        if (!retried && req.method === 'GET' && out.reusedSocket && (err.code === 'ECONNRESET' || err.code === 'EPIPE')) {
          send(url, req, true).then(resolve, reject);
        } else reject(err);
      });
      out.on('response', (res) => {
        answered = true;
        readBody(res, req.maxBodyBytes, signal).then(
          (result) => {
            settle();
            resolve({ status: res.statusCode ?? 0, header: (name) => headerValue(res.headers[name.toLowerCase()]), body: result });
          },
          (err: unknown) => {
            settle();
            out.destroy();
            reject(err);
          },
        );
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
    // Flushes as fetch does, so a body cut short still yields what was decoded; the error follows.
    if (coding === 'gzip' || coding === 'x-gzip') chain.push(zlib.createGunzip({ flush: zlib.constants.Z_SYNC_FLUSH, finishFlush: zlib.constants.Z_SYNC_FLUSH }));
    else if (coding === 'deflate') chain.push(zlib.createInflate());
    else if (coding === 'br') chain.push(zlib.createBrotliDecompress());
    else return null;
  }
  return chain;
}

function readBody(res: http.IncomingMessage, maxBytes: number, signal: AbortSignal | undefined): Promise<BodyReadResult> {
  const declared = res.headers['content-length'];
  if (declared !== undefined && /^\d+$/.test(declared.trim()) && Number(declared) > maxBytes) {
    res.destroy();
    return Promise.resolve({ kind: 'too_large', limit: maxBytes });
  }
  const chain = decoders(headerValue(res.headers['content-encoding']) ?? undefined) ?? [];
  let stream: Readable = res;
  for (const d of chain) stream = stream.pipe(d);
  return new Promise<BodyReadResult>((resolve, reject) => {
    const decoder = new TextDecoder('utf-8');
    const parts: string[] = [];
    let seen = 0;
    let done = false;
    const finish = (fn: () => void): void => {
      if (done) return;
      done = true;
      signal?.removeEventListener('abort', onAbort);
      fn();
    };
    const drop = (): void => {
      res.destroy();
      for (const d of chain) d.destroy();
    };
    const onAbort = (): void => {
      drop();
      finish(() => reject(abortError(signal!)));
    };
    if (signal?.aborted) return onAbort();
    signal?.addEventListener('abort', onAbort, { once: true });
    stream.on('data', (chunk: Buffer) => {
      if (done) return;
      seen += chunk.byteLength;
      if (seen > maxBytes) {
        drop();
        finish(() => resolve({ kind: 'too_large', limit: maxBytes }));
        return;
      }
      parts.push(decoder.decode(chunk, { stream: true }));
    });
    stream.on('end', () =>
      finish(() => {
        parts.push(decoder.decode());
        resolve({ kind: 'text', text: parts.join('') });
      }),
    );
    const onError = (err: Error): void => {
      drop();
      finish(() => reject(err));
    };
    // A connection cut mid-body: node:http emits 'error' (ECONNRESET, "aborted") on the response.
    res.on('error', onError);
    for (const d of chain) d.on('error', onError);
  });
}
