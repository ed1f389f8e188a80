import { createServer } from 'node:http';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface RecordedRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

export interface TestServer {
  /** `http://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  readonly requests: RecordedRequest[];
  close(): Promise<void>;
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A real HTTP server on 127.0.0.1, random port, recording every request it receives. */
export async function startServer(handler: Handler): Promise<TestServer> {
  const requests: RecordedRequest[] = [];
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    handler(req, res);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        // Tests leave hanging responses open on purpose (timeouts).
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

export function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(JSON.stringify(body));
}

/**
 * A port nothing listens on: from the worker's slice below the kernel's ephemeral range (checked
 * free). A port bound with listen(0) and released, as before, could be handed at once to a
 * listen(0) of the other worker, and the refused connection this stands for was answered.
 */
export { freePort as closedPort } from '../helpers/testPort.js';
