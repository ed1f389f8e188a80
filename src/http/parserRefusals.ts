import { METHODS, STATUS_CODES, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';

/** What a refusal of Node's HTTP parser is said as: a fixed few messages, none echoing the request. */
function said(code: string): { status: number; message: string } {
  if (code === 'HPE_HEADER_OVERFLOW') return { status: 431, message: 'the request headers are larger than Node accepts (16 KB in all)' };
  if (code === 'HPE_CHUNK_EXTENSIONS_OVERFLOW') return { status: 413, message: 'the chunk extensions of the request body are larger than Node accepts' };
  // Both Content-Length and Transfer-Encoding (which a proxy adding one to the other makes), or a
  // Transfer-Encoding that does not end in chunked: Node refuses either (request smuggling).
  if (code === 'HPE_UNEXPECTED_CONTENT_LENGTH' || code === 'HPE_INVALID_TRANSFER_ENCODING') {
    return { status: 400, message: `the request's body framing is refused: Content-Length with Transfer-Encoding, or a Transfer-Encoding not ending in chunked (${code})` };
  }
  // llhttp's codes are a fixed set: the message stays one of a bounded few.
  return { status: 400, message: `the request is not valid HTTP/1.1 (${/^HPE_[A-Z_]+$/.test(code) ? code : 'parse error'})` };
}

/** The method of the request the parser refused, when its bytes start with one Node knows (never the request's own text). */
function methodOf(raw: unknown): string | undefined {
  if (!Buffer.isBuffer(raw)) return undefined;
  const word = /^([A-Z-]+) /.exec(raw.subarray(0, 24).toString('latin1'))?.[1];
  return word !== undefined && METHODS.includes(word) ? word : undefined;
}

/**
 * Listens on `srv` for the requests Node's HTTP parser refuses (a body framed by both
 * Content-Length and Transfer-Encoding, headers past 16 KB, bytes that are no HTTP): each is told
 * to `refused`, then answered as Node answers it without a 'clientError' listener
 * (lib/_http_server.js, socketOnError: 400, 431 or 413 with `Connection: close`, 408 for a
 * timeout, then the socket destroyed). Without it such a request reached no handler, and neither
 * /metrics nor the log said so: a sender (or a proxy before the receiver) framing every delivery
 * so had each one refused, unseen. Not told: a timeout (a body cut by REQUEST_TIMEOUT_MS is the
 * handler's `body_unreadable`), a connection the client reset or closed mid-request (it went
 * away), and a refusal inside the body of a request already handed to its handler (a chunk size
 * that is no hex number): that handler says and counts it (`body_unreadable`), and told here too
 * it was counted twice, and logged as refused "before routing" although it was routed.
 */
export function watchParserRefusals(srv: Server, refused: (message: string, method: string | undefined, status: number) => void): void {
  // The last request the parser handed to a handler on each connection: one whose body it then
  // refuses is not complete.
  const lastRead = new WeakMap<object, IncomingMessage>();
  srv.on('request', (req: IncomingMessage) => lastRead.set(req.socket, req));
  srv.on('clientError', (err: Error & { code?: string; rawPacket?: unknown }, socket: Duplex): void => {
    const code = err.code ?? '';
    const timeout = code === 'ERR_HTTP_REQUEST_TIMEOUT';
    const { status, message } = timeout ? { status: 408, message: '' } : said(code);
    const inHandledBody = lastRead.get(socket)?.complete === false;
    if (code.startsWith('HPE_') && code !== 'HPE_INVALID_EOF_STATE' && !inHandledBody) refused(message, methodOf(err.rawPacket), status);
    const inFlight = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (socket.writable && (!inFlight || !inFlight.headersSent)) socket.write(`HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nConnection: close\r\n\r\n`);
    socket.destroy(err);
  });
}
