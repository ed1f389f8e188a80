import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync, readFileSync } from 'node:fs';
import { ROOT, waitForHttp } from '../../helpers/childServer.js';
import { logPath } from './run.js';

const TSX = `${ROOT}node_modules/tsx/dist/loader.mjs`;

export interface ReceiverProcess {
  proc: ChildProcess;
  pid: number;
  url: string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** The log file its stdout and stderr go to (kept for the log-hygiene test). */
  log: string;
}

/**
 * Our real entry (src/main.ts) as a child process, through tsx's loader like
 * test/helpers/childServer.ts, with stdout and stderr written straight to a
 * file: no pipe back-pressure on the child, no parsing on the test's event loop.
 */
export async function startReceiverProcess(name: string, env: Record<string, string>, opts: { wait?: boolean } = {}): Promise<ReceiverProcess> {
  const log = logPath(name);
  const fd = openSync(log, 'a');
  const proc = spawn(process.execPath, ['--import', TSX, `${ROOT}src/main.ts`], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', LOG_LEVEL: 'debug', ...env },
    stdio: ['ignore', fd, fd],
  });
  closeSync(fd);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.on('exit', (code, signal) => resolve({ code, signal })),
  );
  const url = `http://127.0.0.1:${env.PORT}`;
  if (opts.wait !== false) {
    try {
      await waitForHttp(`${url}/healthz`, 20_000, proc);
    } catch (err) {
      proc.kill('SIGKILL');
      throw new Error(`${(err as Error).message}\n--- ${log} ---\n${readFileSync(log, 'utf8').slice(-3000)}`);
    }
  }
  return { proc, pid: proc.pid!, url, exited, log };
}

/** SIGTERM and wait (bounded); SIGKILL if it does not exit in time. Returns the exit. */
export async function stopReceiverProcess(r: ReceiverProcess, timeoutMs = 15_000) {
  if (r.proc.exitCode !== null || r.proc.signalCode !== null) return r.exited;
  r.proc.kill('SIGTERM');
  const timer = setTimeout(() => r.proc.kill('SIGKILL'), timeoutMs);
  const result = await r.exited;
  clearTimeout(timer);
  return result;
}

/** Resident set size of a process in bytes, from /proc (Linux). */
export function rssOf(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) * 1024 : NaN;
}
