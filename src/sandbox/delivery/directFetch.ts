import http from 'node:http';
import https from 'node:https';

export interface DirectFetch {
  /** A fetch for the dispatcher's deliveries: a string or URL, `method`, `headers`, a string `body`, `signal`. */
  readonly fetch: typeof fetch;
  /** Closes the idle keep-alive connections (the sandbox's stop). */
  close(): void;
}

/**
 * The sandbox's default way to send its deliveries: node:http and node:https with agents of its
 * own, so never through a proxy. The global fetch sends through HTTP_PROXY / HTTPS_PROXY when
 * NODE_USE_ENV_PROXY=1 (or `--use-env-proxy`) is set, 127.0.0.1 included unless NO_PROXY lists it,
 * and a proxy elsewhere cannot reach this machine's loopback, where the quick start's receiver and
 * the demo's listen: every delivery failed as a network error, and the receiver got nothing. The
 * hiring service the sandbox stands in for does not deliver through its customers' proxy either.
 *
 * As the dispatcher's fetch did: redirects are not followed (the 3xx is the answer), and the answer
 * counts once its body was read whole; a body cut off, or the signal aborting, rejects.
 */
export function createDirectFetch(): DirectFetch {
  const agents: Record<string, http.Agent> = {
    'http:': new http.Agent({ keepAlive: true, timeout: 4_000 }),
    'https:': new https.Agent({ keepAlive: true, timeout: 4_000 }),
  };
  const send = (input: string | URL | Request, init: RequestInit = {}): Promise<Response> =>
    new Promise<Response>((resolve, reject) => {
      const url = new URL(input instanceof Request ? input.url : input);
      const agent = agents[url.protocol];
      if (agent === undefined) return reject(new TypeError(`only http and https URLs are supported, got ${url.protocol}`));
      const signal = init.signal ?? undefined;
      if (signal?.aborted) return reject(signal.reason);
      const body = typeof init.body === 'string' ? init.body : '';
      const headers = { ...Object.fromEntries(new Headers(init.headers).entries()), 'content-length': String(Buffer.byteLength(body)) };
      const req = (url.protocol === 'https:' ? https : http).request(url, { method: init.method ?? 'GET', headers, agent });
      let settled = false;
      const settle = (outcome: () => void): void => {
        if (settled) return;
        settled = true;
        signal?.removeEventListener('abort', onAbort);
        outcome();
      };
      const fail = (err: unknown): void => settle(() => reject(err));
      const onAbort = (): void => {
        fail(signal!.reason);
        req.destroy();
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      req.on('error', fail);
      // A 101 emits neither 'response' nor 'error' without this listener: fetch fails on it too.
      req.on('upgrade', (_res, socket) => {
        socket.destroy();
        fail(new Error('the receiver switched protocols (101)'));
      });
      req.on('response', (res) => {
        res.on('error', fail);
        res.on('close', () => {
          if (!res.complete) fail(new Error('the answer broke off before its end'));
        });
        res.on('end', () =>
          settle(() => {
            try {
              resolve(new Response(null, { status: res.statusCode ?? 0 }));
            } catch (err) {
              // A status fetch refuses (outside 200-599) is no answer, as fetch would have it.
              reject(err);
            }
          }),
        );
        res.resume();
      });
      req.end(body);
    });
  return {
    fetch: send as typeof fetch,
    close: () => {
      for (const agent of Object.values(agents)) agent.destroy();
    },
  };
}
