/**
 * The short reason of a failed request: ECONNREFUSED, ENOTFOUND, timed out ... (fetch's undici nests
 * it in `cause`, as a ResponseBodyError does; node:http gives it as the error's own `code`). A proxy
 * that refused the tunnel is said with its answer (`ERR_PROXY_TUNNEL: … HTTP/1.1 407 …`): Node.js
 * writes the proxy there without its user and password.
 */
export function networkCause(err: unknown): string {
  const e = err as { name?: string; code?: string; message?: string; cause?: { name?: string; code?: string; message?: string; errors?: { code?: string }[] } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError' || e.cause?.name === 'TimeoutError' || e.cause?.name === 'AbortError') return 'timed out';
  if (e.code === 'ERR_PROXY_TUNNEL') return `${e.code}: ${e.message ?? ''}`;
  return e.cause?.code ?? e.cause?.errors?.find((x) => x.code)?.code ?? e.code ?? e.cause?.message ?? e.name ?? 'network error';
}
