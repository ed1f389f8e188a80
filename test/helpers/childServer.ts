import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const TSX = `${ROOT}node_modules/tsx/dist/loader.mjs`;

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

/**
 * The environment of a receiver child with no workers on `databasePath`: a new signing secret, a
 * free port on 127.0.0.1, and a hiring API nothing answers (port 9, discard). `extra` adds or overrides.
 */
export function idleReceiverEnv(databasePath: string, secret: string, extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_PATH: databasePath,
    WEBHOOK_SECRET: secret,
    HIRING_API_URL: 'http://127.0.0.1:9',
    HIRING_API_KEY: 'sk-test.unused',
    PORT: '0',
    HOST: '127.0.0.1',
    WORKER_CONCURRENCY: '0',
    ...extra,
  };
}

/** The process a readiness check waits for: a child of runTs, a spawned child, or a pid. */
export type HttpOwner = Child | ChildProcess | number;

function ownerPid(owner: HttpOwner): number | undefined {
  return typeof owner === 'number' ? owner : 'proc' in owner ? owner.proc.pid : owner.pid;
}

/** Why `owner` can no longer answer (it exited), or null while it runs. */
function ownerGone(owner: HttpOwner): string | null {
  if (typeof owner === 'number') {
    try {
      process.kill(owner, 0);
      return null;
    } catch {
      return `process ${owner} is gone`;
    }
  }
  const proc = 'proc' in owner ? owner.proc : owner;
  if (proc.exitCode === null && proc.signalCode === null) return null;
  const stderr = 'proc' in owner ? owner.stderr.join('').trim() : '';
  return `the child (pid ${proc.pid}) exited (${proc.exitCode ?? proc.signalCode})${stderr ? `; its stderr: ${stderr.slice(-2000)}` : ''}`;
}

/**
 * The files process `pid` holds open, by path (Linux: /proc/<pid>/fd); none where that cannot be
 * read (no /proc, a process that is gone). Tests use it to see a child reach a step (it opened the
 * file it asks a lock on) from outside, without a line it would log for the test.
 */
export function openFiles(pid: number): string[] {
  const fds = `/proc/${pid}/fd`;
  try {
    return readdirSync(fds).flatMap((fd) => {
      try {
        return [readlinkSync(`${fds}/${fd}`)];
      } catch {
        return []; // closed meanwhile
      }
    });
  } catch {
    return [];
  }
}

/**
 * Whether process `pid` holds a listening TCP socket on `port` (Linux: its fds against
 * /proc/net/tcp and tcp6); undefined where /proc cannot tell (no such tables, or the process's
 * fds not ours to read), so the caller does not refuse. A process that is gone listens on
 * nothing: false (it exited between the caller's look at it and this one).
 */
export function listensOn(pid: number, port: number): boolean | undefined {
  let fds: string[];
  let table: string;
  try {
    table = ['/proc/net/tcp', '/proc/net/tcp6'].map((f) => (existsSync(f) ? readFileSync(f, 'utf8') : '')).join('\n');
  } catch {
    return undefined;
  }
  if (table === '\n') return undefined;
  try {
    fds = readdirSync(`/proc/${pid}/fd`);
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'ENOENT' ? false : undefined;
  }
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const inodes = new Set<string>();
  for (const line of table.split('\n')) {
    // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
    const f = line.trim().split(/\s+/);
    if (f.length > 9 && f[1]!.endsWith(`:${hexPort}`) && f[3] === '0A') inodes.add(f[9]!);
  }
  if (inodes.size === 0) return false;
  for (const fd of fds) {
    try {
      const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (m && inodes.has(m[1]!)) return true;
    } catch {
      // closed meanwhile
    }
  }
  return false;
}

/**
 * Polls until `url` answers 2xx (bounded). With `owner`, the process meant to answer it: the
 * answer counts only once that process listens on the URL's port (another process on the port,
 * such as another test's receiver, does not make it ready), and the wait ends at once, with its
 * stderr, when it exits (it failed to start: a port in use, a config error).
 */
export async function waitForHttp(url: string, timeoutMs = 15_000, owner?: HttpOwner): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const port = Number(new URL(url).port);
  let answeredBy = '';
  while (Date.now() < deadline) {
    if (owner !== undefined) {
      const gone = ownerGone(owner);
      if (gone !== null) throw new Error(`${url} will not come up: ${gone}`);
    }
    try {
      const res = await fetch(url);
      if (res.ok) {
        const pid = owner === undefined ? undefined : ownerPid(owner);
        if (pid === undefined || listensOn(pid, port) !== false) return;
        answeredBy = ` (${url} answered ${res.status}, but not from process ${pid}: another process holds port ${port})`;
      }
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not come up within ${timeoutMs} ms${answeredBy}`);
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
