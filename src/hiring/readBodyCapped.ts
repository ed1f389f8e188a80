export type BodyReadResult =
  | { readonly kind: 'text'; readonly text: string }
  | { readonly kind: 'too_large'; readonly limit: number };

/**
 * Read a response body as UTF-8 text, refusing more than `maxBytes`.
 *
 * The cap is enforced while streaming (the bytes counted are the decoded ones,
 * so a small gzip bomb cannot get past it); a `Content-Length` already over
 * the cap is refused before reading anything. On overflow the stream is
 * cancelled and `abort` is called so the connection is torn down rather than
 * drained. Stream errors (timeout abort, connection reset) are thrown for the
 * caller to classify.
 */
export async function readBodyCapped(
  response: Response,
  maxBytes: number,
  abort: () => void,
): Promise<BodyReadResult> {
  const declared = response.headers.get('content-length');
  if (declared !== null && /^\d+$/.test(declared.trim()) && Number(declared) > maxBytes) {
    abort();
    await response.body?.cancel().catch(() => undefined);
    return { kind: 'too_large', limit: maxBytes };
  }
  if (response.body === null) return { kind: 'text', text: '' };

  const reader = response.body.getReader();
  const decoder = new TextDecoder('utf-8');
  const parts: string[] = [];
  let seen = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    seen += value.byteLength;
    if (seen > maxBytes) {
      abort();
      await reader.cancel().catch(() => undefined);
      return { kind: 'too_large', limit: maxBytes };
    }
    parts.push(decoder.decode(value, { stream: true }));
  }
  parts.push(decoder.decode());
  return { kind: 'text', text: parts.join('') };
}
