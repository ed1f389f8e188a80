import { spawn, type ChildProcess, type StdioOptions } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Node flags of the receiver as `npm start` and the Dockerfile's ENTRYPOINT run it
 * (keep the three in step): a 4 MB young-generation semi-space instead of V8's 16 MB.
 */
export const RECEIVER_NODE_FLAGS = ['--enable-source-maps', '--max-semi-space-size=4', '--heap-growing-percent=30'];

export interface Server {
  name: string;
  proc: ChildProcess;
  pid: number;
  port: number;
  url: string;
  stderr: string[];
  /** Peak resident set (VmHWM) of the process so far, in bytes. */
  peakRss(): number;
  /** SIGTERM (the receiver drains and closes its database), SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

export { freePort } from '../../src/util/freePort.js';

/** Every child the bench started that has not exited yet: what stopChildren stops. */
const children = new Set<ChildProcess>();
/**
 * How many stopChildren calls are running (the signal handler's and main's own cleanup may
 * overlap). Meanwhile the bench's main goes on until one of its awaits fails, and may start a
 * process (the next row's `sync`, receiver, generator) after stopChildren took its list.
 */
let stopping = 0;

/**
 * Counts `child` among the bench's children until it exits, so a Ctrl-C, a SIGTERM or a failed
 * row stops it too (stopChildren): a `work` process, the later rows' receivers and sandbox, a
 * loadgen or wrk were left running under pid 1 when the bench ended on a signal. One started
 * while stopChildren runs gets its SIGTERM at once, and stopChildren waits for it as well.
 */
export function tracked<T extends ChildProcess>(child: T): T {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return child;
  children.add(child);
  child.once('exit', () => children.delete(child));
  if (stopping > 0) child.kill('SIGTERM');
  return child;
}

/** SIGTERM to `c`, SIGKILL after `graceMs`; resolves when it has exited (at once if it had), or 2 s after the SIGKILL. */
function stopChild(c: ChildProcess, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    if (c.exitCode !== null || c.signalCode !== null) return resolve();
    const kill = setTimeout(() => c.kill('SIGKILL'), graceMs);
    const giveUp = setTimeout(resolve, graceMs + 2000);
    c.once('exit', () => {
      clearTimeout(kill);
      clearTimeout(giveUp);
      resolve();
    });
    c.kill('SIGTERM');
  });
}

/**
 * SIGTERM to every child still running (a receiver drains and closes its database), SIGKILL to
 * those still there after `graceMs`; resolves when all have exited, or 2 s after the SIGKILL.
 * Children started while it waits are stopped and waited for too (up to 10 rounds of them).
 */
export async function stopChildren(graceMs = 2000): Promise<void> {
  stopping++;
  try {
    const waited = new Set<ChildProcess>();
    for (let round = 0; round < 10; round++) {
      const next = [...children].filter((c) => !waited.has(c));
      if (next.length === 0) return;
      for (const c of next) waited.add(c);
      await Promise.all(next.map((c) => stopChild(c, graceMs)));
    }
  } finally {
    stopping--;
  }
}

/** Bytes as MB (2^20), to one decimal: how the bench reports peak RSS. */
export const mb = (bytes: number): number => Math.round((bytes / 2 ** 20) * 10) / 10;

/** VmHWM from /proc/<pid>/status (the kernel's own high-water mark of RSS), in bytes. */
export function readVmHwm(pid: number): number {
  try {
    const m = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

export async function waitForHttp(url: string, timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const res = await fetch(url);
      await res.arrayBuffer();
      if (res.ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${url} did not answer within ${timeoutMs} ms`);
}

export interface StartOptions {
  name: string;
  args: string[];
  env: Record<string, string>;
  port: number;
  healthPath?: string;
  /** Where the child's stdout goes (the receiver's log lines): a file descriptor, or 'ignore'. */
  stdout?: number | 'ignore';
  cwd: string;
}

/** Starts a Node child process (node is process.execPath) and waits until it answers. */
export async function startServer(opts: StartOptions): Promise<Server> {
  const stdio: StdioOptions = ['ignore', opts.stdout ?? 'ignore', 'pipe'];
  const proc = tracked(spawn(process.execPath, opts.args, { cwd: opts.cwd, env: { PATH: process.env.PATH ?? '', ...opts.env }, stdio }));
  const stderr: string[] = [];
  proc.stderr!.on('data', (d: Buffer) => stderr.push(d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code, signal })),
  );
  let exitedEarly = false;
  void exited.then(() => (exitedEarly = true));
  const url = `http://127.0.0.1:${opts.port}`;
  try {
    await Promise.race([
      waitForHttp(`${url}${opts.healthPath ?? '/healthz'}`),
      exited.then((e) => {
        throw new Error(`${opts.name} exited during start-up (${e.code ?? e.signal}): ${stderr.join('').slice(0, 2000)}`);
      }),
    ]);
  } catch (err) {
    if (!exitedEarly) proc.kill('SIGKILL');
    throw err;
  }
  const pid = proc.pid!;
  let peak = 0;
  return {
    name: opts.name,
    proc,
    pid,
    port: opts.port,
    url,
    stderr,
    peakRss() {
      if (!exitedEarly) peak = Math.max(peak, readVmHwm(pid));
      return peak;
    },
    async stop(graceMs = 15_000) {
      if (exitedEarly) return exited;
      peak = Math.max(peak, readVmHwm(pid));
      await stopChild(proc, graceMs);
      return exited;
    },
  };
}

/**
 * How long a loadgen run may take before it is killed: its warm-up and measured period, the
 * signing before them (about 30 µs a delivery: 18 s for 240 s at 2,500/s; 0.1 ms a delivery is
 * allowed) and the answers' 10 s timeout after them, at least the 180 s every run had. A fixed
 * 180 s killed the longer periods the signature tolerance allows (up to 240 s: run.ts's
 * signedSpan), leaving the row failed ("loadgen failed (exit null)") and its opengen sending.
 */
export function loadgenTimeoutMs(args: Record<string, unknown>): number {
  const periodS = Number(args.warmupS ?? 0) + Number(args.durationS ?? 0);
  // The closed loop (rate 0) signs for 60,000/s (loadgen.ts closedLoop).
  const perS = Number(args.rate ?? 0) > 0 ? Number(args.rate) : 60_000;
  return Math.max(180_000, Math.ceil(periodS * 1000 + perS * periodS * 0.1 + 70_000));
}

/**
 * Runs bench/loadgen.ts (through tsx) as its own process with `args` (url, mode, rate, …) and
 * the signing secret, and resolves with its `BENCH_JSON` result.
 */
export async function runLoadgen(root: string, secret: string, args: Record<string, unknown>, onSpawn?: (child: ChildProcess) => void): Promise<unknown> {
  const tsx = join(root, 'node_modules/tsx/dist/loader.mjs');
  const r = await runCommand(process.execPath, ['--import', tsx, join(root, 'bench/loadgen.ts'), JSON.stringify(args)], {
    cwd: root,
    timeoutMs: loadgenTimeoutMs(args),
    env: { PATH: process.env.PATH ?? '', BENCH_SECRET: secret },
    ...(onSpawn ? { onSpawn } : {}),
  });
  const line = r.stdout.split('\n').find((l) => l.startsWith('BENCH_JSON '));
  if (!line) throw new Error(`loadgen failed (exit ${r.code}): ${r.stderr}`);
  return JSON.parse(line.slice('BENCH_JSON '.length)) as unknown;
}

/** Runs a command to completion, bounded in time; resolves with its output. `onSpawn` gets the child as it starts. */
export function runCommand(
  cmd: string,
  args: string[],
  opts: { cwd: string; timeoutMs: number; env?: NodeJS.ProcessEnv; onSpawn?: (child: ChildProcess) => void },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const proc = tracked(spawn(cmd, args, { cwd: opts.cwd, env: opts.env ?? process.env, stdio: ['ignore', 'pipe', 'pipe'] }));
    opts.onSpawn?.(proc);
    let stdout = '';
    let stderr = '';
    proc.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => proc.kill('SIGKILL'), opts.timeoutMs);
    proc.once('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    proc.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
