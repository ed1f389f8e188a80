/**
 * The short reason of a failed request: ECONNREFUSED, ENOTFOUND, timed out ... (fetch's undici nests
 * it in `cause`, as a ResponseBodyError does; node:http gives it as the error's own `code`). A proxy
 * that refused the tunnel is said with its answer (`ERR_PROXY_TUNNEL: … HTTP/1.1 407 …`): Node.js
 * writes the proxy there without its user and password.
 */
export function networkCause(err: unknown): string {
  const e = err as { name?: string; code?: unknown; message?: string; cause?: { name?: string; code?: unknown; message?: string; errors?: { code?: unknown }[] } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || e.cause?.name === 'TimeoutError' || e.cause?.name === 'AbortError') return 'timed out';
  if (e.code === 'ERR_PROXY_TUNNEL') return `ERR_PROXY_TUNNEL: ${e.message ?? ''}`;
  const tunnel = fetchProxyRefusal(err);
  if (tunnel !== null) return `the outbound proxy refused the tunnel: HTTP ${tunnel}`;
  // Only a string is a code: fetch's "Request was cancelled." is a DOMException whose `code` is the number 0.
  const code = (c: unknown): string | undefined => (typeof c === 'string' && c !== '' ? c : undefined);
  return code(e.cause?.code) ?? e.cause?.errors?.map((x) => code(x.code)).find(Boolean) ?? code(e.code) ?? e.cause?.message ?? e.name ?? 'network error';
}

/**
 * The status with which a proxy refused fetch's CONNECT (NODE_USE_ENV_PROXY=1: undici's
 * "Proxy response (407) !== 200 when HTTP Tunneling", a few causes deep), or null.
 */
export function fetchProxyRefusal(err: unknown): string | null {
  let e: unknown = err;
  for (let depth = 0; depth < 5 && typeof e === 'object' && e !== null; depth++) {
    const m = /^Proxy response \((\d{3})\) !== 200 when HTTP Tunneling/.exec(String((e as { message?: unknown }).message ?? ''));
    if (m) return m[1]!;
    e = (e as { cause?: unknown }).cause;
  }
  return null;
}

/** A request that got no answer, as the CLI says it (`send`, `webhooks`): `from` names where it went. */
export function noAnswerFrom(from: string, err: unknown): string {
  return `no answer from ${from} (${networkCause(err)})`;
}

/**
 * An answer whose head came and whose body then stopped (a timeout, the connection closed), as the
 * CLI says it: `status` as the command shows statuses elsewhere (`200 OK`, `HTTP 200`).
 */
export function brokeOffFrom(from: string, status: string, err: unknown): string {
  return `the answer from ${from} broke off (${status}, ${networkCause(err)})`;
}
