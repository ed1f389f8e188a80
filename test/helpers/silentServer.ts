import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

/** An HTTP server on 127.0.0.1 that takes requests and never answers them (a hung upstream or consumer). */
export async function startSilentServer(): Promise<{ url: string; held: readonly ServerResponse[]; waitForRequest(timeoutMs?: number): Promise<void>; close(): void }> {
  const held: ServerResponse[] = [];
  const server = createServer((_req, res) => held.push(res));
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    held,
    /** Resolves once a request is being held (bounded; the caller asserts on `held`). */
    async waitForRequest(timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (held.length === 0 && Date.now() < deadline) await new Promise((res) => setTimeout(res, 20));
    },
    close() {
      held.forEach((res) => res.destroy());
      server.close();
    },
  };
}
