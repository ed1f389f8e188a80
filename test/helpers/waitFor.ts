/**
 * Polls `check` on real timers (every `everyMs`) until it gives a value, not `undefined` or
 * `false`, and returns that value; `timeoutMs` at most: fails naming `what`. The one poll loop of
 * the tests (test/cli/helpers.ts `until` is this one with a child process's 15 s).
 */
export async function until<T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 10_000, everyMs = 20): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (performance.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** Waits for `check`, on real timers (every 20 ms), `timeoutMs` at most: fails naming `what`. */
export async function waitFor(check: () => boolean, what: string, timeoutMs = 10_000): Promise<void> {
  await until(() => check() || undefined, what, timeoutMs);
}
