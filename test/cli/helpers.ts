import { runTs } from '../helpers/childServer.js';

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs the real CLI (src/cli/main.ts) as a child process, with only the given environment (plus PATH). */
export async function cli(args: string[], env: Record<string, string> = {}): Promise<CliResult> {
  const child = runTs('src/cli/main.ts', args, env);
  const { code } = await child.exited;
  return { code, stdout: child.stdout.join(''), stderr: child.stderr.join('') };
}

/** Polls `check` until it returns a value (bounded). */
export async function until<T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}
