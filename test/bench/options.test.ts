import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';

/**
 * The script's TMPDIR: a folder of this file's own, so a scratch directory it leaves is told apart
 * from one of a bench (or anything else) running on the machine meanwhile in the shared /tmp.
 */
const scratch = tempDir('bench-options-');
afterAll(scratch.cleanup);

/**
 * `npm run bench`'s options, through the real script as a child process: --help, and a mistake
 * said in one line (exit 1) before anything is built, started or measured.
 */
function bench(...args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/run.ts', ...args], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, TMPDIR: scratch.dir } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), 30_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
/** Every row skipped and nothing built. */
const NOTHING = ['--no-build', '--skip-throughput', '--skip-rates', '--skip-fanout', '--skip-replay'];
const benchDirs = () => readdirSync(scratch.dir).filter((n) => n.startsWith('receiver-bench-'));

describe('bench options', () => {
  it('--help prints every option and the exit codes, and exits 0', async () => {
    const r = await bench('--help');
    expect(r.code).toBe(0);
    for (const flag of ['--no-build', '--receivers', '--rates', '--fanout-rate', '--baseline', '--receiver-env', '--cpu-prof', '--out']) expect(r.stdout).toContain(flag);
    expect(r.stdout).toMatch(/2 data went missing/);
    expect(r.stderr).toBe('');
  });

  it.each([
    [['--bogus'], "Unknown option '--bogus'"],
    [['--rates', '1000,abc'], '--rates must be a positive number, got "abc"'],
    // Used only after the other rows (minutes in): checked before they run.
    [['--fanout-rate', '0'], '--fanout-rate must be a positive number, got "0"'],
    [['--generator', 'wkr'], '--generator must be one of auto, wrk, node, got "wkr"'],
    [['--receivers', 'inf:2'], '--receivers: "inf" is not a LOG_LEVEL'],
    [['--rate-receivers', 'info@base'], '--rate-receivers: info@base needs --baseline <dir>'],
    [['--receiver-env', 'PROCESSING_SHARE'], '--receiver-env: expected KEY=VALUE, got "PROCESSING_SHARE"'],
    // Deliveries signed once per period, refused by the receiver past its 5-minute tolerance: the rest
    // of the options skip every row, so without the check the run would end at once with exit 0.
    [['--duration', '300', ...NOTHING], '--warmup + --duration send 305 s of deliveries signed at once: at most 240 s'],
    [['--rate-duration', '240', ...NOTHING], '--rate-warmup + --rate-duration send 243 s of deliveries signed at once'],
    [['--fanout-duration', '600', ...NOTHING], '1 s of warm-up + --fanout-duration send 601 s'],
    [['--replay-events', '1000000', ...NOTHING], '--replay-events at 2,000/s send 500 s'],
  ])('%j is refused in one line, naming it, before anything runs', async (args, message) => {
    const r = await bench(...args);
    expect(r.code).toBe(1);
    expect(r.stderr.split('\n')[0]!.startsWith(`bench: ${message}`)).toBe(true);
    expect(r.stderr).toContain('npm run bench -- --help');
    expect(r.stderr).not.toMatch(/\n\s+at /); // no stack trace
    expect(r.stderr).not.toContain('[bench]'); // nothing built or started
    expect(r.stdout).toBe('');
    // No scratch directory left behind.
    expect(benchDirs()).toEqual([]);
  });
});
