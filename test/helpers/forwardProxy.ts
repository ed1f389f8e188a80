import { createServer, request, type Server } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';

export interface ProxySeen {
  /** `forward`: an absolute-form request (an http:// URL); `connect`: a tunnel (an https:// URL). */
  readonly kind: 'forward' | 'connect';
  /** The absolute URL, or the tunnel's host:port. */
  readonly target: string;
  /** The Proxy-Authorization header as sent, or null. */
  readonly auth: string | null;
}

export interface ForwardProxy {
  /** http://127.0.0.1:<port> (no credentials). */
  readonly url: string;
  readonly port: number;
  /** Every request and tunnel asked of it, in order, refused ones too. */
  readonly seen: ProxySeen[];
  /** The client connections it accepted so far (a kept-alive one counts once). */
  readonly connections: () => number;
  close(): Promise<void>;
}

/**
 * An HTTP forward proxy on 127.0.0.1 (absolute-form requests and CONNECT tunnels), the only one
 * that knows where the hosts of the reserved `.test` domain are: on 127.0.0.1, at the port the URL
 * names. So a request to `hiring.test` that is answered went through it. With `auth` (a full
 * `Basic …` value), anything else is answered 407, as a corporate proxy does.
 */
export async function startForwardProxy(opts: { auth?: string } = {}): Promise<ForwardProxy> {
  const seen: ProxySeen[] = [];
  const sockets = new Set<Socket>();
  let connections = 0;
  const refused = (auth: string | undefined): boolean => opts.auth !== undefined && auth !== opts.auth;
  const server: Server = createServer((req, res) => {
    const auth = req.headers['proxy-authorization'] ?? null;
    seen.push({ kind: 'forward', target: req.url ?? '', auth });
    let target: URL;
    try {
      target = new URL(req.url ?? '');
    } catch {
      res.writeHead(400).end('not an absolute-form request');
      return;
    }
    if (refused(auth ?? undefined)) {
      res.writeHead(407, { 'proxy-authenticate': 'Basic realm="test"' }).end();
      return;
    }
    if (!target.hostname.endsWith('.test')) {
      res.writeHead(502).end(`this proxy reaches .test hosts only, not ${target.hostname}`);
      return;
    }
    const headers = { ...req.headers };
    delete headers['proxy-authorization'];
    delete headers['proxy-connection'];
    const upstream = request({ host: '127.0.0.1', port: Number(target.port), method: req.method, path: `${target.pathname}${target.search}`, headers }, (up) => {
      res.writeHead(up.statusCode ?? 502, up.headers);
      up.pipe(res);
    });
    upstream.on('error', () => res.headersSent ? res.destroy() : res.writeHead(502).end());
    req.pipe(upstream);
  });
  server.on('connection', (s: Socket) => {
    connections++;
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.on('connect', (req, client: Socket, head: Buffer) => {
    const auth = req.headers['proxy-authorization'] ?? null;
    const target = req.url ?? '';
    seen.push({ kind: 'connect', target, auth });
    const [host = '', port = ''] = target.split(':');
    if (refused(auth ?? undefined)) {
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    if (!host.endsWith('.test')) {
      client.end('HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n');
      return;
    }
    const upstream = connect(Number(port), '127.0.0.1', () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      if (head.length > 0) upstream.write(head);
      upstream.pipe(client);
      client.pipe(upstream);
    });
    sockets.add(upstream);
    upstream.on('close', () => sockets.delete(upstream));
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    seen,
    connections: () => connections,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
