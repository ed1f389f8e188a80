import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
const TSX = `${ROOT}node_modules/tsx/dist/loader.mjs`;

export interface Child {
  proc: ChildProcess;
  stdout: string[];
  stderr: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Runs a TypeScript entry file of ours as a real child process (through tsx's loader). */
export function runTs(entry: string, args: string[], env: Record<string, string>): Child {
  const proc = spawn(process.execPath, ['--import', TSX, `${ROOT}${entry}`, ...args], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  proc.stdout!.on('data', (d: Buffer) => stdout.push(d.toString()));
  proc.stderr!.on('data', (d: Buffer) => stderr.push(d.toString()));
  // 'close', not 'exit': the pipes may still hold the last lines the child wrote when it exits.
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on('close', (code, signal) => resolve({ code, signal })),
  );
  return { proc, stdout, stderr, exited };
}

/** Polls until the server answers /healthz (bounded). */
export async function waitForHttp(url: string, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      if (res.ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not come up within ${timeoutMs} ms`);
}

export { freePort } from './testPort.js';

/** Runs a command until it exits (SIGKILL after `timeoutMs`), collecting its stderr. */
export async function runToExit(
  command: string,
  args: string[],
  opts: { env: Record<string, string>; uid?: number; gid?: number; timeoutMs?: number },
): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(command, args, {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ...opts.env },
    stdio: ['ignore', 'ignore', 'pipe'],
    ...(opts.uid !== undefined ? { uid: opts.uid } : {}),
    ...(opts.gid !== undefined ? { gid: opts.gid } : {}),
  });
  let stderr = '';
  child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
  const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 25_000);
  const code = await new Promise<number | null>((r) => child.on('close', r)).finally(() => clearTimeout(timer));
  return { code, stderr };
}
