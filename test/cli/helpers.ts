import BetterSqlite3 from 'better-sqlite3';
import { expect } from 'vitest';
import { runTs } from '../helpers/childServer.js';

export interface CliResult {
  code: number | null;
  /** SIGKILL when it outlived `killAfterMs` */
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * Runs the real CLI (src/cli/main.ts) as a child process, with only the given environment (plus
 * PATH). A child still running after `killAfterMs` is killed, so a hang fails its test and leaves
 * no process behind.
 */
export async function cli(args: string[], env: Record<string, string> = {}, killAfterMs = 25_000): Promise<CliResult> {
  const child = runTs('src/cli/main.ts', args, env);
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), killAfterMs);
  const { code, signal } = await child.exited.finally(() => clearTimeout(timer));
  return { code, signal, stdout: child.stdout.join(''), stderr: child.stderr.join('') };
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

/** A database `migrate` made at `path`, written meanwhile through a connection of the test's own (as a running receiver would). */
export async function withMigratedDatabase(path: string, body: (path: string, w: BetterSqlite3.Database) => Promise<void>): Promise<void> {
  expect((await cli(['migrate'], { DATABASE_PATH: path })).code).toBe(0);
  const w = new BetterSqlite3(path);
  try {
    await body(path, w);
  } finally {
    w.close();
  }
}
