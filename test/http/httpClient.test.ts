import { execFile } from 'node:child_process';
import { getEventListeners } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { brotliCompressSync, deflateRawSync, deflateSync, gzipSync } from 'node:zlib';
import { afterEach, describe, expect, it } from 'vitest';
import { createDeflateDecoder, createNodeHttpClient, type HttpRequest, type NodeHttpClient } from '../../src/http/httpClient.js';
import { startServer, type Handler, type TestServer } from '../hiring/testServer.js';

let server: TestServer | undefined;
let client: NodeHttpClient | undefined;
/** Every connection the current server accepted, in order. */
let sockets: Socket[] = [];

afterEach(async () => {
  client?.close();
  await server?.close();
  server = client = undefined;
  sockets = [];
});

async function serve(handler: Handler): Promise<{ url: string; http: NodeHttpClient }> {
  server = await startServer((req, res) => {
    if (!sockets.includes(req.socket)) sockets.push(req.socket);
    handler(req, res);
  });
  client = createNodeHttpClient();
  return { url: server.url, http: client };
}

const GET: HttpRequest = { method: 'GET', headers: {}, maxBodyBytes: 64 * 1024 };

describe('createNodeHttpClient', () => {
  it('sends the method, headers and body, and reads status, headers and text', async () => {
    const seen: { method?: string; type?: string; encoding?: string; body?: string } = {};
    const { url, http } = await serve((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (d: string) => (body += d));
      req.on('end', () => {
        Object.assign(seen, { method: req.method, type: req.headers['content-type'], encoding: req.headers['accept-encoding'], body });
        res.writeHead(201, [['x-twice', 'a'], ['x-twice', 'b'], ['content-type', 'text/plain']]);
        res.end('héllo');
      });
    });
    const res = await http.request(`${url}/p`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"a":"é"}', maxBodyBytes: 100 });
    expect(seen).toEqual({ method: 'POST', type: 'application/json', encoding: 'gzip, deflate, br', body: '{"a":"é"}' });
    expect(res.status).toBe(201);
    expect(res.header('X-Twice')).toBe('a, b');
    expect(res.header('location')).toBeNull();
    expect(res.body).toEqual({ kind: 'text', text: 'héllo' });
  });

  it.each([
    ['gzip', 'gzip', gzipSync],
    ['deflate', 'deflate (zlib)', deflateSync],
    ['deflate', 'deflate sent raw, as some servers do', deflateRawSync],
    ['br', 'br', brotliCompressSync],
  ] as const)('decodes a %s body: %s', async (coding, _label, encode) => {
    const text = JSON.stringify({ data: 'x'.repeat(5000) });
    const { url, http } = await serve((_req, res) => {
      res.writeHead(200, { 'content-encoding': coding });
      res.end(encode(Buffer.from(text)));
    });
    expect((await http.request(url, GET)).body).toEqual({ kind: 'text', text });
  });

  it.each(['gzip', 'deflate', 'br'])('reads an empty %s body, and a 204 that names a coding, as empty text', async (coding) => {
    let status = 200;
    const { url, http } = await serve((_req, res) => {
      res.writeHead(status, { 'content-encoding': coding });
      res.end();
    });
    expect((await http.request(url, GET)).body).toEqual({ kind: 'text', text: '' });
    status = 204;
    expect(await http.request(url, GET)).toMatchObject({ status: 204, body: { kind: 'text', text: '' } });
  });

  it('fails at once on a 101 Switching Protocols answer instead of waiting forever', async () => {
    const { url, http } = await serve((req) => {
      req.socket.write('HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n');
    });
    await expect(http.request(url, GET)).rejects.toMatchObject({ code: 'EPROTO', message: 'unexpected 101 Switching Protocols answer' });
  });

  it('with readBody false, settles on the head and drains the body in the background, keeping the connection', async () => {
    let cut = false;
    const { url, http } = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': '100', 'content-encoding': 'br' });
      if (!cut) return void res.end('x'.repeat(100));
      res.write('not br, and cut short');
      setTimeout(() => res.socket?.destroy(), 10);
    });
    expect(await http.request(url, { ...GET, readBody: false })).toMatchObject({ status: 200, body: null });
    expect(await http.request(url, { ...GET, readBody: (status) => status !== 200 })).toMatchObject({ status: 200, body: null });
    expect(sockets).toHaveLength(1);
    cut = true;
    expect(await http.request(url, { ...GET, readBody: false })).toMatchObject({ status: 200, body: null });
  });

  it('drops a connection whose unread body outlasts drainTimeoutMs, when no signal bounds it', async () => {
    const { url } = await serve((_req, res) => {
      res.writeHead(302, { location: '/elsewhere' });
      res.write('a body that never ends');
    });
    const http = createNodeHttpClient({ drainTimeoutMs: 200 });
    try {
      const res = await http.request(url, { ...GET, readBody: (status) => status < 300 || status > 399 });
      expect(res).toMatchObject({ status: 302, body: null });
      expect(res.header('location')).toBe('/elsewhere');
      await expect.poll(() => sockets[0]?.destroyed, { timeout: 2000 }).toBe(true);
    } finally {
      http.close();
    }
  });

  it('leaves no listener on a long-lived abort signal, whatever the outcome', async () => {
    const signal = new AbortController().signal;
    let mode = 'ok';
    const { url, http } = await serve((_req, res) => {
      if (mode === 'ok') return void res.end('ok');
      if (mode === 'big') return void res.end('x'.repeat(200));
      res.writeHead(200, { 'content-length': '100' });
      res.write('part');
      setTimeout(() => res.socket?.destroy(), 10);
    });
    const req = { ...GET, signal, maxBodyBytes: 100 };
    expect((await http.request(url, req)).body).toEqual({ kind: 'text', text: 'ok' });
    mode = 'big';
    expect((await http.request(url, req)).body).toEqual({ kind: 'too_large', limit: 100 });
    mode = 'cut';
    await expect(http.request(url, req)).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect(await http.request(url, { ...req, readBody: false })).toMatchObject({ body: null });
    await expect.poll(() => sockets.at(-1)?.destroyed).toBe(true);
    await expect(http.request('http://127.0.0.1:1/', req)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  });

  it('closes an idle keep-alive connection after idleTimeoutMs, and never one waiting for its answer', async () => {
    const { url } = await serve((_req, res) => setTimeout(() => res.end('slow'), 300));
    const http = createNodeHttpClient({ idleTimeoutMs: 100 });
    try {
      expect((await http.request(url, GET)).body).toEqual({ kind: 'text', text: 'slow' });
      expect(sockets[0]!.destroyed).toBe(false);
      await expect.poll(() => sockets[0]!.destroyed, { timeout: 2000 }).toBe(true);
    } finally {
      http.close();
    }
  });

  it('passes a body with an unknown coding through as it came', async () => {
    const { url, http } = await serve((_req, res) => {
      res.writeHead(200, { 'content-encoding': 'zstd' });
      res.end('raw');
    });
    expect((await http.request(url, GET)).body).toEqual({ kind: 'text', text: 'raw' });
  });

  it('counts the decoded bytes against the cap: a small gzip bomb is refused', async () => {
    const bomb = gzipSync(Buffer.alloc(10 * 1024 * 1024));
    expect(bomb.byteLength).toBeLessThan(20 * 1024);
    const { url, http } = await serve((_req, res) => {
      res.writeHead(200, { 'content-encoding': 'gzip', 'content-length': bomb.byteLength });
      res.end(bomb);
    });
    expect((await http.request(url, GET)).body).toEqual({ kind: 'too_large', limit: GET.maxBodyBytes });
  });

  it('reuses one keep-alive connection for requests in sequence, and close() ends it', async () => {
    const { url, http } = await serve((_req, res) => res.end('ok'));
    for (let i = 0; i < 3; i++) expect((await http.request(url, GET)).body).toEqual({ kind: 'text', text: 'ok' });
    expect(sockets).toHaveLength(1);
    expect(sockets[0]!.destroyed).toBe(false);
    http.close();
    await expect.poll(() => sockets[0]!.destroyed).toBe(true);
  });

  it('sends a GET once more on a new connection when a reused one is reset before any answer; a POST is not sent again', async () => {
    let requests = 0;
    const perSocket = new Map<Socket, number>();
    const { url, http } = await serve((req, res) => {
      requests++;
      perSocket.set(req.socket, (perSocket.get(req.socket) ?? 0) + 1);
      // A second request on a connection finds it gone: what a server closing idle connections does.
      if (perSocket.get(req.socket)! > 1) req.socket.destroy();
      else res.end(`answer ${requests}`);
    });
    expect((await http.request(url, GET)).body).toEqual({ kind: 'text', text: 'answer 1' });
    expect((await http.request(url, GET)).body).toEqual({ kind: 'text', text: 'answer 3' });
    expect([requests, sockets.length]).toEqual([3, 2]);

    await expect(http.request(url, { ...GET, method: 'POST', body: 'x' })).rejects.toMatchObject({ code: 'ECONNRESET' });
    expect([requests, sockets.length]).toEqual([4, 2]);
  });

  it('rejects a body cut short by the server instead of returning part of it', async () => {
    const { url, http } = await serve((_req, res) => {
      res.writeHead(200, { 'content-length': '100' });
      res.write('only part');
      setTimeout(() => res.socket?.destroy(), 20);
    });
    await expect(http.request(url, GET)).rejects.toMatchObject({ code: 'ECONNRESET' });
  });

  it('rejects with the signal reason when aborted while the body streams', async () => {
    const controller = new AbortController();
    const { url, http } = await serve((_req, res) => {
      res.writeHead(200);
      res.write('first part');
      setTimeout(() => controller.abort(new Error('stop now')), 20);
    });
    await expect(http.request(url, { ...GET, signal: controller.signal })).rejects.toThrow('stop now');
    await expect.poll(() => sockets[0]?.destroyed).toBe(true);
  });

  it('verifies the certificate over https: an untrusted one fails before the request is sent, a trusted one is served', async () => {
    const fixture = (name: string) => new URL(`./fixtures/${name}`, import.meta.url);
    let requests = 0;
    const tls = createHttpsServer({ cert: readFileSync(fixture('localhost-cert.pem')), key: readFileSync(fixture('localhost-key.pem')) }, (_req, res) => {
      requests++;
      res.end('over tls');
    });
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
    try {
      const url = `https://localhost:${(tls.address() as AddressInfo).port}/x`;
      client = createNodeHttpClient();
      await expect(client.request(url, { ...GET, headers: { authorization: 'Bearer sk-secret' } })).rejects.toMatchObject({ code: 'DEPTH_ZERO_SELF_SIGNED_CERT' });
      expect(requests).toBe(0);
      // Trusted the way an operator would (NODE_EXTRA_CA_CERTS, read at start-up): a child process.
      const out = await new Promise<string>((resolve, reject) =>
        execFile(
          process.execPath,
          ['--import', 'tsx', fileURLToPath(fixture('getOnce.ts')), url],
          { env: { ...process.env, NODE_EXTRA_CA_CERTS: fileURLToPath(fixture('localhost-cert.pem')) }, timeout: 20_000 },
          (err, stdout) => (err ? reject(err) : resolve(stdout)),
        ),
      );
      expect(JSON.parse(out)).toEqual({ status: 200, body: { kind: 'text', text: 'over tls' } });
      expect(requests).toBe(1);
    } finally {
      tls.closeAllConnections();
      await new Promise((resolve) => tls.close(resolve));
    }
  });

  it('refuses a URL that is not http or https', async () => {
    client = createNodeHttpClient();
    await expect(client.request('ftp://127.0.0.1/x', GET)).rejects.toThrow('only http and https URLs are supported, got ftp:');
    await expect(client.request('not a url', GET)).rejects.toThrow('invalid URL');
  });
});

describe('createDeflateDecoder', () => {
  const text = Buffer.from('hello, deflate '.repeat(3000));

  it.each([
    ['zlib-wrapped', deflateSync],
    ['raw', deflateRawSync],
  ] as const)('decodes %s deflate split at any point, ending once', async (_label, encode) => {
    const coded = encode(text);
    for (const at of [1, 2, 3, Math.floor(coded.length / 2), coded.length - 1]) {
      const d = createDeflateDecoder();
      const parts: Buffer[] = [];
      let ends = 0;
      d.on('data', (b: Buffer) => parts.push(b));
      d.on('end', () => ends++);
      d.write(coded.subarray(0, at));
      d.end(coded.subarray(at));
      await new Promise((resolve) => d.on('close', resolve));
      expect([Buffer.concat(parts).equals(text), ends]).toEqual([true, 1]);
    }
  });

  it('keeps zlib backpressure: a bomb nobody reads buffers a few KB, and all of it decodes when read', async () => {
    const bomb = deflateSync(Buffer.alloc(64 * 1024 * 1024));
    const d = createDeflateDecoder();
    d.write(bomb.subarray(0, 20_000));
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(d.readableLength).toBeLessThanOrEqual(64 * 1024);
    let decoded = 0;
    d.on('data', (b: Buffer) => (decoded += b.byteLength));
    d.end(bomb.subarray(20_000));
    await new Promise((resolve) => d.on('end', resolve));
    expect(decoded).toBe(64 * 1024 * 1024);
  });
});
