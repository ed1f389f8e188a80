import { connect, type Socket } from 'node:net';

export interface RawAnswer {
  /** HTTP status of the first response line; null when the connection ended without one. */
  status: number | null;
  raw: string;
  ms: number;
}

/**
 * One request written as raw bytes on a fresh connection (duplicate headers,
 * raw UTF-8 in header values, any framing: things node:http and fetch refuse
 * to send). Reads until the server closes or the timeout, whichever first.
 */
export function rawRequest(port: number, request: Buffer, timeoutMs = 5000): Promise<RawAnswer> {
  const started = performance.now();
  return new Promise((resolve) => {
    const sock: Socket = connect(port, '127.0.0.1');
    const parts: Buffer[] = [];
    let done = false;
    const finish = () => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.destroy();
      const raw = Buffer.concat(parts).toString('latin1');
      const m = /^HTTP\/1\.1 (\d{3})/.exec(raw);
      resolve({ status: m ? Number(m[1]) : null, raw, ms: performance.now() - started });
    };
    const timer = setTimeout(finish, timeoutMs);
    sock.on('data', (d: Buffer) => {
      parts.push(d);
      // One response is all we want: stop once its body is complete (Content-Length framing).
      const text = Buffer.concat(parts).toString('latin1');
      const head = text.indexOf('\r\n\r\n');
      if (head >= 0) {
        const len = /\r\ncontent-length: (\d+)/i.exec(text.slice(0, head));
        if (len && text.length - head - 4 >= Number(len[1])) finish();
      }
    });
    sock.on('error', finish);
    sock.on('close', finish);
    sock.write(request);
  });
}

/** Request bytes: header lines given as [name, value] pairs, values as raw UTF-8. */
export function buildRequest(path: string, headers: [string, string][], body: Buffer): Buffer {
  const lines = [`POST ${path} HTTP/1.1`, 'Host: 127.0.0.1', 'Connection: close', ...headers.map(([k, v]) => `${k}: ${v}`), `Content-Length: ${body.length}`, '', ''];
  return Buffer.concat([Buffer.from(lines.join('\r\n'), 'utf8'), body]);
}
