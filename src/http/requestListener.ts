import type { IncomingMessage, ServerResponse } from 'node:http';
import { isIPv6 } from 'node:net';
import { getRequestListener, RequestError } from '@hono/node-server';
import { parserRewritesHost } from '../util/parserHost.js';

type Fetch = Parameters<typeof getRequestListener>[0];

/**
 * HOST as the host of a URL, for a request that sends no `Host` (HTTP/1.0): an IPv6 address in
 * brackets, without a zone (`%eth0`, which URLs cannot hold). `http://::/healthz` is no URL, so
 * with HOST=:: (fly.toml) such a request was refused as if its Host header were wrong.
 */
function urlHost(host: string): string {
  return isIPv6(host) ? `[${host.replace(/%.*$/, '')}]` : host;
}

/** An absolute-form request target (`GET http://host/path`): its URL is the target, whatever Host says. */
const isAbsoluteForm = (url: string | undefined): boolean => !!url && url[0] !== '/' && (url.startsWith('http://') || url.startsWith('https://'));

/**
 * @hono/node-server's request listener, with an answer that names the problem when a request
 * cannot even become a `Request`: a `Host` header that is no host (`Host: a b`, `Host: x/y`), or a
 * backslash in the path. Its own answer to those is a 400 with an empty body, outside the app's
 * error handling; `serve()` offers no way to change it. These requests never reach a route.
 *
 * Any other error thrown outside the app (Hono's `fetch` catches its own) keeps the listener's
 * usual 500 (504 for a timeout), with a body that says so.
 */
export function requestListener(
  fetch: Fetch,
  hostname: string,
  onBadRequest: (message: string, method: string | undefined) => void = () => {},
): (incoming: IncomingMessage, outgoing: ServerResponse) => Promise<void> {
  // The request being refused, for its method: the listener calls errorHandler with the error
  // only, synchronously within its own call when the request cannot be built (set around that
  // call below; a version that called it later would give `undefined`, not another request's).
  let building: IncomingMessage | undefined;
  const errorHandler = (err: unknown) => {
    if (err instanceof RequestError) {
      // The listener's messages ("Invalid host header", "Invalid URL", ...) said in full; none
      // echoes the request.
      const message = /backslash/i.test(err.message)
        ? 'the request path contains a backslash'
        : /missing host/i.test(err.message)
          ? 'the request has no Host header'
          : 'the Host header and the request path do not make a valid URL (is the Host header a host name or address, with an optional port?)';
      onBadRequest(message, building?.method);
      return Response.json({ error: 'bad_request', message }, { status: 400, headers: { Connection: 'close' } });
    }
    const timeout = err instanceof Error && (err.name === 'TimeoutError' || err.constructor.name === 'TimeoutError');
    return Response.json({ error: 'internal_error', message: timeout ? 'the request timed out' : 'internal error' }, { status: timeout ? 504 : 500 });
  };
  const listener = getRequestListener(fetch, { hostname: urlHost(hostname), errorHandler });
  // The same listener and answer for a Host the URL parser rewrites or refuses: its fetch throws
  // the RequestError that 1.x threw while making the URL.
  const refuseHost = getRequestListener(
    () => {
      throw new RequestError('Invalid host header');
    },
    { hostname: urlHost(hostname), errorHandler },
  );
  return (incoming, outgoing) => {
    building = incoming;
    try {
      if (parserRewritesHost(incoming.headers.host) && !isAbsoluteForm(incoming.url)) return refuseHost(incoming, outgoing);
      return listener(incoming, outgoing);
    } finally {
      building = undefined;
    }
  };
}
