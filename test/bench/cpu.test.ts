/**
 * The bench's CPU accounting (bench/lib/cpu.ts): the shares it computes from two samples, and
 * that it reads real processes right: a thread other than the main one, and a generator whose
 * work happens in a grandchild (loadgen.ts starts opengen).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { cpuBetween, measuredWindow, recordCpu, sampleCpu, type CpuSample } from '../../bench/lib/cpu.js';

const sample = (at: number, threads: [number, number][], generator: number, machine: number[]): CpuSample => ({
  at,
  serverPid: 100,
  serverThreads: new Map(threads),
  generator,
  machine,
});

describe('cpuBetween', () => {
  it('splits the server into its main thread (tid = pid) and the rest, per core, over the window', () => {
    // 2 s apart, 100 ticks a second: the main thread used 150 ticks (75%), thread 101 20 ticks,
    // thread 102 started in the window with 30 ticks (counted from 0): 25% for the others.
    const a = sample(1000, [[100, 500], [101, 40]], 1000, [100, 0, 50, 800, 20, 0, 10, 0]);
    const b = sample(3000, [[100, 650], [101, 60], [102, 30]], 1060, [300, 0, 100, 880, 40, 0, 30, 0]);
    // machine: 200 user + 50 system + 80 idle + 20 iowait + 20 softirq = 370 ticks.
    expect(cpuBetween(a, b, 4000)).toEqual({
      serverMainPct: 75,
      serverOtherPct: 25,
      generatorPct: 30,
      machineIdlePct: 21.6,
      machineIowaitPct: 5.4,
      // 200 ticks = 2 s of CPU over 4,000 requests.
      serverUsPerRequest: 500,
      seconds: 2,
    });
  });

  it('gives no per-request figure without a request count, and nothing for an empty or backwards window', () => {
    const a = sample(0, [[100, 0]], 0, [0, 0, 0, 100, 0]);
    const b = sample(1000, [[100, 50]], 0, [50, 0, 0, 150, 0]);
    expect(cpuBetween(a, b)?.serverUsPerRequest).toBeNull();
    expect(cpuBetween(b, a)).toBeNull();
    expect(cpuBetween(a, sample(1000, [], 0, [50, 0, 0, 150, 0]))).toBeNull();
  });
});

describe('measuredWindow', () => {
  it('keeps the first second and the last half second of the generator’s period out', () => {
    const samples = [0, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000].map((at) => sample(at, [[100, at]], 0, [0, 0, 0, at, 0]));
    // A 3 s period that ended at 4,000: from 2,000 (1 s in) to 3,500 (0.5 s before its end).
    const w = measuredWindow(samples, 4000, 3);
    expect([w?.a.at, w?.b.at]).toEqual([2000, 3500]);
    // Too short a period leaves less than a second between the two samples.
    expect(measuredWindow(samples, 4000, 2)).toBeNull();
  });
});

const onLinux = existsSync('/proc/self/task');
const children: ChildProcess[] = [];
afterEach(() => {
  for (const c of children.splice(0)) c.kill('SIGKILL');
});

/** A child whose main thread waits while a worker thread spins, for `ms`. */
const SPIN_IN_WORKER = (ms: number) => `
const { Worker } = require('node:worker_threads');
new Worker('const end = Date.now() + ${ms}; while (Date.now() < end) {}', { eval: true });
setTimeout(() => {}, ${ms + 2000});
process.stdout.write('ready\\n');`;

function start(cmd: string, args: string[]): Promise<ChildProcess> {
  const child = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve(child));
    child.once('error', reject);
  });
}

describe.runIf(onLinux)('sampling real processes', () => {
  it('puts a worker thread’s CPU under the other threads, and a grandchild’s under the generator', async () => {
    const server = await start(process.execPath, ['-e', SPIN_IN_WORKER(2500)]);
    // The generator's work is done by its child, as opengen's is under loadgen.ts.
    const generator = await start('sh', ['-c', `${JSON.stringify(process.execPath)} -e "const end = Date.now() + 2500; while (Date.now() < end) {}" & echo ready; wait`]);
    // Let the grandchild's node start up before the first sample.
    await new Promise((r) => setTimeout(r, 300));
    const recorder = recordCpu(server.pid!, () => generator.pid!, 200);
    await new Promise((r) => setTimeout(r, 1500));
    const samples = recorder.stop();
    const share = cpuBetween(samples[0]!, samples.at(-1)!, 1000)!;
    expect(share.seconds).toBeGreaterThanOrEqual(1.3);
    // A spinning thread gets well over a third of a core even on a busy two-core machine; the
    // waiting main thread next to nothing.
    expect(share.serverOtherPct).toBeGreaterThan(35);
    expect(share.serverMainPct).toBeLessThan(15);
    expect(share.generatorPct).toBeGreaterThan(35);
    expect(share.serverUsPerRequest).toBeGreaterThan(300);
    expect(sampleCpu(server.pid!, null).generator).toBe(0);
  });
});
