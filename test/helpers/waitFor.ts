/** Waits for `check`, on real timers (every 20 ms), 10 s at most: fails naming `what`. */
export async function waitFor(check: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`${what}: not within 10 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
