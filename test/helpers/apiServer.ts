import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** A stand-in of one organization's hiring API on 127.0.0.1, kept in `servers` for the test to close; returns its base URL. */
export async function listenApi(servers: Server[], handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const s = createServer((req, res) => {
    req.resume();
    handler(req, res);
  });
  servers.push(s);
  await new Promise<void>((ok) => s.listen(0, '127.0.0.1', () => ok()));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}`;
}
