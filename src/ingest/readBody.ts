import type { IncomingMessage } from 'node:http';
import type { BodyHold } from './BodyBudget.js';

export class BodyTooLargeError extends Error {
  constructor(readonly limit: number) {
    super(`request body exceeds the limit of ${limit} bytes`);
    this.name = 'BodyTooLargeError';
  }
}

/** The bytes of bodies held at once (BodyBudget) would pass their bound: refused with 503, the rest never read. */
export class BodyBudgetExceededError extends Error {
  constructor(readonly limit: number) {
    super(`the receiver is already holding request bodies up to its limit of ${limit} bytes (MAX_BODY_BYTES_IN_FLIGHT)`);
    this.name = 'BodyBudgetExceededError';
  }
}

/**
 * Reads a Node request body up to `limit` bytes. A declared Content-Length
 * over the limit fails before any byte is read; a chunked body fails as soon
 * as the running total passes the limit, and the rest is never read (the
 * caller answers 413 with `Connection: close`, so the socket is dropped).
 * With `hold`, each chunk is also taken from the receiver's BodyBudget; one that does not fit
 * fails the read the same way (BodyBudgetExceededError, answered 503).
 */
export function readNodeBody(req: IncomingMessage, limit: number, hold?: BodyHold): Promise<Buffer> {
  const declared = req.headers['content-length'];
  if (declared !== undefined && Number(declared) > limit) return Promise.reject(new BodyTooLargeError(limit));
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let total = 0;
    const cleanup = () => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('aborted', onAborted);
    };
    const onData = (chunk: Buffer) => {
      total += chunk.length;
      if (total > limit) {
        cleanup();
        req.pause();
        reject(new BodyTooLargeError(limit));
        return;
      }
      // Each chunk is counted as it arrives, not the declared length: what is held is what was sent.
      if (hold && !hold.take(chunk.length)) {
        cleanup();
        req.pause();
        reject(new BodyBudgetExceededError(hold.limit));
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total));
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onAborted = () => onError(new Error('request aborted'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('aborted', onAborted);
  });
}

/** The same limit over a web stream, for requests that do not come from node:http (app.request in tests). */
export async function readWebBody(body: ReadableStream<Uint8Array> | null, limit: number, declared?: string | null): Promise<Buffer> {
  if (declared != null && Number(declared) > limit) throw new BodyTooLargeError(limit);
  if (!body) return Buffer.alloc(0);
  const reader = body.getReader();
  const chunks: Uint8Array[] = [];
  let total = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    total += value.byteLength;
    if (total > limit) {
      await reader.cancel();
      throw new BodyTooLargeError(limit);
    }
    chunks.push(value);
  }
  return Buffer.concat(chunks, total);
}
