import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { requestListener } from '../../src/http/requestListener.js';

/** One request written as it is on a fresh connection; the whole answer, once the server closes it. */
function raw(port: number, request: string): Promise<string> {
  return new Promise<string>((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let text = '';
    socket.on('data', (c: Buffer) => (text += c.toString()));
    socket.on('end', () => resolve(text));
    socket.on('error', reject);
    socket.end(request);
  });
}

let server: Server | null = null;
afterEach(() => {
  server?.close();
  server = null;
});

/** A server whose app answers 200 with the URL it was given; `host` as the receiver's HOST. */
async function serving(host: string, refused: string[]): Promise<number> {
  server = createServer(
    requestListener(
      (req) => new Response(req.url, { status: 200 }),
      host,
      (m) => refused.push(m),
    ),
  );
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return (server.address() as AddressInfo).port;
}

describe('requestListener: a request that sends no Host (HTTP/1.0) is routed on HOST', () => {
  // fly.toml sets HOST = "::": the URL `http://::/healthz` is no URL, and such a request was a
  // 400 "the Host header ... do not make a valid URL" (for a request with no Host header at all).
  it.each([
    ['::', 'http://[::]/healthz'],
    ['::1', 'http://[::1]/healthz'],
    ['0.0.0.0', 'http://0.0.0.0/healthz'],
    ['127.0.0.1', 'http://127.0.0.1/healthz'],
  ])('HOST %s', async (host, url) => {
    const refused: string[] = [];
    const port = await serving(host, refused);
    const answer = await raw(port, 'GET /healthz HTTP/1.0\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1\.1 200 /);
    expect(answer.slice(answer.indexOf('\r\n\r\n') + 4)).toBe(url);
    expect(refused).toEqual([]);
    // A Host that is no host is still refused, whatever HOST is.
    const bad = await raw(port, 'GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n');
    expect(bad).toMatch(/^HTTP\/1\.1 400 /);
    expect(refused).toHaveLength(1);
  });
});
