/**
 * What a handler's failure says in jobs.last_error and the logs. A handler may throw anything: a
 * `null` or `undefined` (read for its `.message`, the runner threw before it recorded anything, and
 * the job stayed running until its lease ran out, then counted that attempt as never finished), an
 * object whose `message` is no string (which SQLite refused to bind), or an Error with an empty
 * message (a dead letter whose last_error said nothing). Objects are not stringified: their fields
 * may hold what must not reach the logs.
 */
export function failureMessage(err: unknown): string {
  const message = (err as { message?: unknown } | null | undefined)?.message;
  if (typeof message === 'string' && message !== '') return message;
  if (typeof err === 'string' && err !== '') return err;
  if (typeof err === 'number' || typeof err === 'boolean' || typeof err === 'bigint') return `failed with ${String(err)}`;
  if (err instanceof Error) return `failed with ${err.name} (no message)`;
  return `failed with ${err === null ? 'null' : typeof err === 'object' ? 'an object that is not an Error' : typeof err} (no message)`;
}
