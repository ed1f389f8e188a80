import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { startPair, type Pair } from './pair.js';

/**
 * An API host on 127.0.0.1 in front of the sandbox: `answer` handles a request itself (returns
 * true) or leaves it (false), and what it leaves is forwarded to the sandbox (requests without a
 * body: the receiver's reads). For answers the sandbox does not give.
 */
export async function startSandboxFront(
  sandboxUrl: () => string,
  answer: (req: IncomingMessage, res: ServerResponse) => boolean,
): Promise<{ url: string; server: Server }> {
  const server = createServer((req, res) => {
    if (answer(req, res)) return;
    const headers: Record<string, string> = {};
    for (const [k, v] of Object.entries(req.headers)) if (typeof v === 'string' && k !== 'host' && k !== 'connection') headers[k] = v;
    fetch(`${sandboxUrl()}${req.url}`, { method: req.method!, headers })
      .then(async (got) => res.writeHead(got.status, { 'content-type': got.headers.get('content-type') ?? 'application/json' }).end(Buffer.from(await got.arrayBuffer())))
      .catch(() => res.writeHead(502).end());
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/**
 * A pair (startPair) whose receiver reads the hiring API through such a front; `close` stops both.
 */
export async function startPairBehindFront(answer: (req: IncomingMessage, res: ServerResponse) => boolean): Promise<{ pair: Pair; close: () => Promise<void> }> {
  let sandboxUrl = '';
  const front = await startSandboxFront(() => sandboxUrl, answer);
  const pair = await startPair({ env: { HIRING_API_URL: front.url } });
  sandboxUrl = pair.sandboxUrl;
  return {
    pair,
    close: async () => {
      await pair.close();
      front.server.close();
    },
  };
}
