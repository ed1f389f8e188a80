/**
 * The bench's CPU accounting (bench/lib/cpu.ts): the shares it computes from two samples, and
 * that it reads real processes right: a thread other than the main one, and a generator whose
 * work happens in its children (loadgen.ts starts opengen), running or already reaped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { cpuBetween, measuredWindow, recordCpu, sampleCpu, type CpuSample } from '../../bench/lib/cpu.js';

const sample = (at: number, server: CpuSample['server'], generator: number | null, machine: number[]): CpuSample => ({ at, server, generator, machine });

describe('cpuBetween', () => {
  it('splits the server into its main thread and the rest, per core, over the window', () => {
    // 2 s apart, 100 ticks a second: the process used 200 ticks, its main thread 150 (75%), so
    // the other threads 50 (25%), exited ones included (their time stays in the process's).
    const a = sample(1000, { total: 540, main: 500 }, 1000, [100, 0, 50, 800, 20, 0, 10, 0]);
    const b = sample(3000, { total: 740, main: 650 }, 1060, [300, 0, 100, 880, 40, 0, 30, 0]);
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

  it('leaves out what a sample could not read, and gives nothing for a backwards window', () => {
    const a = sample(0, { total: 0, main: 0 }, null, [0, 0, 0, 100, 0]);
    const b = sample(1000, { total: 50, main: 50 }, 70, [50, 0, 0, 150, 0]);
    // A generator not spawned yet (or gone) at either end: no figure rather than a wrong one.
    expect(cpuBetween(a, b)).toMatchObject({ generatorPct: null, serverMainPct: 50, serverUsPerRequest: null });
    expect(cpuBetween(b, a)).toBeNull();
    expect(cpuBetween(a, sample(1000, null, 70, [50, 0, 0, 150, 0]))).toBeNull();
  });
});

describe('measuredWindow', () => {
  it('keeps the first second and the last half second of the generator’s period out', () => {
    const samples = [0, 500, 1000, 1500, 2000, 2500, 3000, 3500, 4000].map((at) => sample(at, { total: at, main: at }, 0, [0, 0, 0, at, 0]));
    // A 3 s period that ended at 4,000: from 2,000 (1 s in) to 3,500 (0.5 s before its end).
    const w = measuredWindow(samples, 4000, 3);
    expect([w?.a.at, w?.b.at]).toEqual([2000, 3500]);
    // Too short a period leaves less than a second between the two samples.
    expect(measuredWindow(samples, 4000, 2)).toBeNull();
  });
});

const onLinux = existsSync('/proc/self/task');
const groups: ChildProcess[] = [];
afterEach(() => {
  // Each child leads its own process group: kill the group, spinners included.
  for (const c of groups.splice(0)) {
    try {
      process.kill(-c.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

const node = JSON.stringify(process.execPath);
const spin = (ms: number) => `const end = Date.now() + ${ms}; while (Date.now() < end) {}`;

/** Starts `sh -c script` in a process group of its own; resolves when it prints its first line. */
function start(script: string): Promise<ChildProcess> {
  const child = spawn('sh', ['-c', script], { stdio: ['ignore', 'pipe', 'inherit'], detached: true });
  groups.push(child);
  return new Promise((resolve, reject) => {
    child.stdout!.once('data', () => resolve(child));
    child.once('error', reject);
  });
}

const during = async (serverPid: number, generatorPid: number, ms: number) => {
  const recorder = recordCpu(serverPid, () => generatorPid, 200);
  await new Promise((r) => setTimeout(r, ms));
  const samples = recorder.stop();
  return cpuBetween(samples[0]!, samples.at(-1)!)!;
};

describe.runIf(onLinux)('sampling real processes', () => {
  it('puts a worker thread’s CPU under the other threads, and a running grandchild’s under the generator', async () => {
    // The server: node whose main thread waits while a worker thread spins.
    const server = await start(
      `exec ${node} -e "new (require('node:worker_threads').Worker)('${spin(2500)}', { eval: true }); setTimeout(() => {}, 4000); console.log('ready')"`,
    );
    // The generator: a shell whose child does the work, as opengen does under loadgen.ts.
    const generator = await start(`${node} -e "${spin(2500)}" & echo ready; wait`);
    await new Promise((r) => setTimeout(r, 300));
    const share = await during(server.pid!, generator.pid!, 1500);
    expect(share.seconds).toBeGreaterThanOrEqual(1.3);
    // Ratios, so a machine busy with other tests still tells the three apart.
    expect(share.serverOtherPct).toBeGreaterThan(20);
    expect(share.serverOtherPct).toBeGreaterThan(4 * share.serverMainPct);
    expect(share.generatorPct).toBeGreaterThan(20);
    expect(sampleCpu(server.pid!, null).generator).toBeNull();
  });

  it('keeps the time of a generator child that exited and was reaped inside the window', async () => {
    // The child spins 0.8 s and exits; the shell reaps it and sleeps on, past the window.
    const generator = await start(`echo ready; ${node} -e "${spin(800)}"; sleep 3`);
    const idle = await start('echo ready; sleep 3');
    const share = await during(idle.pid!, generator.pid!, 1500);
    // Without the reaped child's time (cutime, cstime) this would be near 0.
    expect(share.generatorPct).toBeGreaterThan(20);
    expect(share.serverMainPct + share.serverOtherPct).toBeLessThan(5);
  });
});
