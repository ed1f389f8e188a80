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
