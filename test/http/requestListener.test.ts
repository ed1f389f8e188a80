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

/** A 200 whose body (the app's answer) is `url`, and nothing refused. */
function expectRouted(answer: string, url: string, refused: string[]): void {
  expect(answer).toMatch(/^HTTP\/1\.1 200 /);
  expect(answer.slice(answer.indexOf('\r\n\r\n') + 4)).toBe(url);
  expect(refused).toEqual([]);
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
    expectRouted(answer, url, refused);
    // A Host that is no host is still refused, whatever HOST is.
    const bad = await raw(port, 'GET /healthz HTTP/1.1\r\nHost: a b\r\n\r\n');
    expect(bad).toMatch(/^HTTP\/1\.1 400 /);
    expect(refused).toHaveLength(1);
  });
});

describe('requestListener: the URL of a request is made as @hono/node-server 1.x made it', () => {
  // 2.x makes the URL of a lower-case [a-z0-9._-] Host by concatenation, without the URL parser,
  // which 1.x ran on every request: a host the parser rewrites (127.1 is 127.0.0.1) or refuses
  // (999.1.1.1) reached the app, in a URL `new URL()` cannot read. Such a Host is still no host
  // name or address: refused before routing, as in 1.x.
  const expectRefused = (answer: string, refused: string[]) => {
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(answer).toMatch(/\r\nconnection: close\r\n/i);
    expect(answer).toContain('"error":"bad_request"');
    expect(refused).toEqual([expect.stringContaining('the Host header and the request path do not make a valid URL')]);
  };
  it.each(['127.1', '1', '999.1.1.1', '1.2.3.4.5', '0x7f.1', '0X7F.0.0.1', '08.1.1.1', '127.1:8080'])('Host %s is refused', async (host) => {
    const refused: string[] = [];
    const port = await serving('127.0.0.1', refused);
    expectRefused(await raw(port, `POST /webhooks HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 2\r\n\r\n{}`), refused);
  });

  // An xn-- label that is no punycode: the URL parser of Node.js 20 and 22 refuses it, Node.js 24's
  // (a later WHATWG URL) takes it as it is. Refused where the runtime's parser refuses it, as 1.x
  // did on that runtime; routed where it is a host the parser keeps.
  it.each(['xn--a', 'a.xn--', 'XN--A'])('Host %s is refused where the URL parser refuses it, and routed where it keeps it', async (host) => {
    let parsed: string | null;
    try {
      parsed = new URL(`http://${host}/webhooks`).href;
    } catch {
      parsed = null;
    }
    const refused: string[] = [];
    const port = await serving('127.0.0.1', refused);
    const answer = await raw(port, `GET /webhooks HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    if (parsed === null) expectRefused(answer, refused);
    else expectRouted(answer, parsed, refused);
  });

  // The last, Receiver.Example.com:8443: a host name is case-insensitive, with a port too. 1.x
  // refused it (it compared the parser's lower-cased name with the header's); 2.x routes it.
  it.each(['127.0.0.1:8080', '10.1.2.3', 'xn--nxasmq6b.com', 'receiver.example.com.', '[::1]:8080', 'Receiver.Example.com:8443'])('Host %s is routed', async (host) => {
    const refused: string[] = [];
    const port = await serving('127.0.0.1', refused);
    const answer = await raw(port, `GET /webhooks HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
    expectRouted(answer, `http://${host.toLowerCase()}/webhooks`, refused);
  });

  it('an absolute-form target makes the URL, whatever the Host', async () => {
    const refused: string[] = [];
    const port = await serving('127.0.0.1', refused);
    const answer = await raw(port, 'GET http://receiver.example.com/healthz HTTP/1.1\r\nHost: 999.1.1.1\r\nConnection: close\r\n\r\n');
    expectRouted(answer, 'http://receiver.example.com/healthz', refused);
  });
});
