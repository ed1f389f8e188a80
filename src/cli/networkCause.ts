/** The short reason of a failed fetch: ECONNREFUSED, ENOTFOUND, TimeoutError ... (undici nests it in `cause`). */
export function networkCause(err: unknown): string {
  const e = err as { name?: string; cause?: { code?: string; message?: string; errors?: { code?: string }[] } };
  if (e.name === 'TimeoutError' || e.name === 'AbortError') return 'timed out';
  return e.cause?.code ?? e.cause?.errors?.find((x) => x.code)?.code ?? e.cause?.message ?? e.name ?? 'network error';
}
