import { afterAll, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { request } from 'node:http';
import { idleReceiverEnv, runTs, type Child } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

/**
 * The log lines a receiver writes before it exits all reach its stdout, whole and in order, even
 * when the reader of that stdout (a container runtime, a log shipper) is slow: the process exits
 * only after the lines it wrote are out. Here the test stops reading the child's stdout while the
 * receiver logs a few hundred KB, stops it (SIGTERM), and reads again only later.
 * And a reader that is stuck (reads nothing any more) or gone (the pipe's read end closed: EPIPE)
 * does not keep the process from exiting, with its code, within the 5 s it has for its last lines.
 */
const { dir, cleanup } = tempDir('exit-logs-');
afterAll(cleanup);
const stdoutSinkConfig = join(dir, 'stdout-sink.json');
writeFileSync(stdoutSinkConfig, JSON.stringify({ sinks: [{ name: 'console', type: 'stdout' }] }));

/**
 * One POST /webhooks without the Standard Webhooks headers: a 400, and one line in the log (the
 * receivers here log at debug: past the first few a minute, refused deliveries are at debug).
 */
function unsigned(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/webhooks', headers: { 'content-type': 'application/json' }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end('{}');
  });
}

/** `count` rejected deliveries, 50 at a time: one log line each. */
async function logDeliveries(port: number, count: number): Promise<void> {
  for (let i = 0; i < count; i += 50) {
    const statuses = await Promise.all(Array.from({ length: Math.min(50, count - i) }, () => unsigned(port)));
    expect(new Set(statuses)).toEqual(new Set([400]));
  }
}

type LogTo = 'stdout' | 'stderr';

/**
 * A receiver (src/main.ts, or `entry`) on a new database; its log on stdout, or on stderr with a
 * stdout sink configured. Resolves with its port once it listens.
 */
async function startReceiver(name: string, logTo: LogTo, entry = 'src/main.ts', extra: Record<string, string> = {}): Promise<{ child: Child; port: number }> {
  const child = runTs(entry, [], idleReceiverEnv(join(dir, `${name}.db`), newSecret(), { LOG_LEVEL: 'debug', ...(logTo === 'stderr' ? { CONFIG_FILE: stdoutSinkConfig } : {}), ...extra }));
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline && child.proc.exitCode === null) {
    const m = /"port":(\d+)[^\n]*"msg":"receiver listening"/.exec(child[logTo].join(''));
    if (m) return { child, port: Number(m[1]) };
    await new Promise((r) => setTimeout(r, 20));
  }
  child.proc.kill('SIGKILL');
  throw new Error(`the receiver did not listen: ${child.stderr.join('').slice(-2000)}`);
}

/** Sends `signal`; the child's exit and how long after the signal it came (SIGKILL at 30 s: a hang). */
async function exitOn(child: Child, signal: NodeJS.Signals): Promise<{ code: number | null; signal: NodeJS.Signals | null; ms: number }> {
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.proc.once('exit', (code, sig) => resolve({ code, signal: sig })));
  const from = Date.now();
  child.proc.kill(signal);
  const kill = setTimeout(() => child.proc.kill('SIGKILL'), 30_000);
  const exit = await exited.finally(() => clearTimeout(kill));
  return { ...exit, ms: Date.now() - from };
}

describe('log lines at exit', () => {
  it('a stop while stdout is not being read: every line is out, whole and in order, before the process ends', async () => {
    const { child, port } = await startReceiver('receiver', 'stdout');
    const kill = setTimeout(() => child.proc.kill('SIGKILL'), 60_000);
    try {
      // From here the child's stdout fills: the parent's stream buffer, then the pipe's.
      child.proc.stdout!.pause();
      await logDeliveries(port, 1500);
      child.proc.kill('SIGTERM');
      // The receiver stops meanwhile, with its last lines still to be written.
      await new Promise((r) => setTimeout(r, 1_500));
      child.proc.stdout!.resume();
      expect(await child.exited).toEqual({ code: 0, signal: null });
    } finally {
      clearTimeout(kill);
    }
    const lines = child.stdout.join('').split('\n').filter((l) => l !== '');
    const msgs = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(msgs.filter((m) => m === 'webhook delivery')).toHaveLength(1500);
    expect(msgs.at(-1), msgs.slice(-5).join(' | ')).toBe('receiver stopped');
    expect(msgs.indexOf('shutting down')).toBeGreaterThan(msgs.lastIndexOf('webhook delivery'));
  }, 90_000);
});

describe.each(['stdout', 'stderr'] as const)('log lines at exit, the log on %s', (logTo) => {
  it('a stop while nothing reads the log pipe any more: exit 0 after at most the 5 s, not a hang', async () => {
    const { child, port } = await startReceiver(`stuck-${logTo}`, logTo);
    // Far more than a pipe holds (64 KiB): the receiver's writes to it wait for a reader.
    child.proc[logTo]!.pause();
    await logDeliveries(port, 1500);
    const exit = await exitOn(child, 'SIGTERM');
    child.proc[logTo]!.resume();
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
    // 5 s for the lines, the stop itself, and a busy machine's slack; a hang is killed at 30 s.
    expect(exit.ms).toBeLessThan(15_000);
  }, 60_000);

  it("a stop after the log pipe's reader is gone (EPIPE): exit 0 at once, not after 5 s of waiting for nothing", async () => {
    const { child, port } = await startReceiver(`gone-${logTo}`, logTo);
    child.proc[logTo]!.destroy();
    // Lines written to the closed pipe: the first meets EPIPE.
    await logDeliveries(port, 100);
    const exit = await exitOn(child, 'SIGTERM');
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 0, signal: null });
    // The stop takes about 100 ms here; the 5 s wait would show as more than 5,000.
    expect(exit.ms).toBeLessThan(3_500);
  }, 60_000);
});

describe.each(['exception', 'rejection'] as const)('log lines at a crash (an uncaught %s)', (kind) => {
  it("nothing reading the log pipe: exit 1 after at most the 5 s, not a hang in pino's flush of its fatal line", async () => {
    const { child, port } = await startReceiver(`crash-${kind}`, 'stdout', 'test/helpers/crashOnSignal.ts', { CRASH_KIND: kind });
    child.proc.stdout!.pause();
    await logDeliveries(port, 1500);
    const exit = await exitOn(child, 'SIGUSR2');
    child.proc.stdout!.resume();
    expect({ code: exit.code, signal: exit.signal }).toEqual({ code: 1, signal: null });
    expect(exit.ms).toBeLessThan(15_000);
  }, 60_000);
});
