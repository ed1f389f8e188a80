import { createServer, type Server } from 'node:http';
import type { Config } from '../config/loadConfig.js';
import type { Logger } from '../observability/logger.js';
import type { Metrics } from '../observability/metrics.js';
import type { RefusalLog } from '../observability/RefusalLog.js';
import { trackConnections } from './closeWithinGrace.js';
import { watchParserRefusals } from './parserRefusals.js';
import { requestListener } from './requestListener.js';

/** What a listen uses: HOST and REQUEST_TIMEOUT_MS, and where a request refused before routing is said and counted. */
export interface ListenDeps {
  config: Pick<Config, 'host' | 'requestTimeoutMs'>;
  logger: Logger;
  metrics: Metrics;
  /** Throttles the lines of requests refused before routing (anyone can send them): see RefusalLog. */
  refusals: RefusalLog;
}

/** A server for `fetch` on HOST:port; an error names the setting (`portVar`) to change. */
export function listen(fetch: Parameters<typeof requestListener>[0], port: number, portVar: string, { config, logger, metrics, refusals }: ListenDeps): Promise<Server> {
  // A request refused before any route (its URL, or Node's HTTP parser), by the listener or the server.
  const refused = (message: string, method: string | undefined, status = 400) => {
    // Per port and message: a fixed few kinds, whatever the requests say.
    const msg = `request refused before routing: ${message}`;
    const counts = refusals.refused(`bad_request\n${portVar}\n${message}`, { status, refused: msg, ...(portVar === 'PORT' ? {} : { port_setting: portVar }) });
    if (counts === null) logger.debug({ status, method }, msg);
    else logger.warn({ status, method, ...counts }, msg);
    // A POST is most likely a delivery (a proxy that rewrites Host breaks every one): counted
    // with the refused deliveries, so the "deliveries refused" alert sees it.
    if (method === 'POST' && portVar === 'PORT') metrics.deliveriesReceived.inc({ outcome: 'rejected:bad_request', source: 'unknown' });
  };
  return new Promise<Server>((resolve, reject) => {
    const srv = createServer(
      // Node checks requestTimeout/headersTimeout only this often (default 30 s), so a
      // trickling client would otherwise outlive a shorter REQUEST_TIMEOUT_MS.
      { connectionsCheckingInterval: Math.min(1000, config.requestTimeoutMs) },
      requestListener(fetch, config.host, refused),
    );
    watchParserRefusals(srv, refused);
    trackConnections(srv);
    srv.once('error', (err: NodeJS.ErrnoException) => reject(listenError(err, config.host, port, portVar)));
    srv.listen(port, config.host, () => resolve(srv));
  });
}

/** A listen failure, naming the settings to change (Node's own says only `listen EADDRINUSE ...`). */
function listenError(err: NodeJS.ErrnoException, host: string, port: number, portVar = 'PORT'): Error {
  const where = `${host}:${port}`;
  const message =
    err.code === 'EADDRINUSE'
      ? `${portVar}: ${where} is already in use (another receiver still running?); stop it or choose another ${portVar}`
      : err.code === 'EACCES'
        ? `${portVar}: not allowed to listen on ${where} (ports below 1024 need privileges); choose another ${portVar}`
        : err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND' || err.code === 'EAI_AGAIN'
          ? `HOST: cannot listen on ${JSON.stringify(host)} (${err.code}): not an address of this machine`
          : `cannot listen on ${where} (${portVar}): ${err.message}`;
  return Object.assign(new Error(message), { code: err.code, cause: err });
}
