import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { loadgenTimeoutMs, runCommand, stopChildren, tracked } from '../../bench/lib/processes.js';

/** A node child that prints "up" once its handlers are set, then idles until stopped. */
function child(ignoreSigterm: boolean) {
  const code = `${ignoreSigterm ? "process.on('SIGTERM', () => {});" : ''} setInterval(() => {}, 1000); console.log('up');`;
  const c = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'ignore'] });
  const up = new Promise<void>((resolve) => c.stdout.once('data', () => resolve()));
  const exited = new Promise<NodeJS.Signals | number | null>((resolve) => c.once('exit', (code, signal) => resolve(signal ?? code)));
  return { c, up, exited };
}

describe("the bench's children at its end (stopChildren)", () => {
  it('stops every tracked child still running: SIGTERM, then SIGKILL for one that ignores it; an untracked one is left alone', async () => {
    const polite = child(false);
    const stubborn = child(true);
    const untracked = child(false);
    try {
      tracked(polite.c);
      tracked(stubborn.c);
      await Promise.all([polite.up, stubborn.up, untracked.up]);
      const t0 = performance.now();
      await stopChildren(300);
      expect(await polite.exited).toBe('SIGTERM');
      expect(await stubborn.exited).toBe('SIGKILL');
      // It waited for the SIGKILL's effect, not longer than its bound.
      expect(performance.now() - t0).toBeGreaterThanOrEqual(290);
      expect(performance.now() - t0).toBeLessThan(2300);
      expect(untracked.c.exitCode).toBe(null);
      expect(untracked.c.signalCode).toBe(null);
    } finally {
      untracked.c.kill('SIGKILL');
      await untracked.exited;
    }
  });

  it('stops a child started while it waits (the bench goes on until an await fails, and may start the next row\'s processes), and waits for it too', async () => {
    const stubborn = child(true);
    tracked(stubborn.c);
    await stubborn.up;
    const stopped = stopChildren(600);
    // While stopChildren waits for the stubborn one's SIGKILL: a process the bench's main starts now.
    await new Promise((r) => setTimeout(r, 100));
    const late = child(false);
    try {
      tracked(late.c);
      await stopped;
      expect(await stubborn.exited).toBe('SIGKILL');
      // Exited by the time stopChildren resolved (the bench exits right after it: a child still
      // running then is left behind under pid 1).
      expect(late.c.signalCode).toBe('SIGTERM');
    } finally {
      late.c.kill('SIGKILL');
      await late.exited;
    }
  });

  it('forgets a child once it has exited, and tracks the commands runCommand runs while they run', async () => {
    const done = child(false);
    tracked(done.c);
    await done.up;
    done.c.kill('SIGTERM');
    await done.exited;
    let running: ReturnType<typeof child>['c'] | undefined;
    const cmd = runCommand(process.execPath, ['-e', "setInterval(() => {}, 1000); console.log('up')"], {
      cwd: process.cwd(),
      timeoutMs: 20_000,
      onSpawn: (c) => (running = c as ReturnType<typeof child>['c']),
    });
    await new Promise<void>((resolve) => running!.stdout!.once('data', () => resolve()));
    const t0 = performance.now();
    await stopChildren(5000);
    // Only the command was left to stop, and it went at its SIGTERM, not at the 5 s SIGKILL.
    expect((await cmd).code).toBe(null);
    expect(running!.signalCode).toBe('SIGTERM');
    expect(performance.now() - t0).toBeLessThan(4000);
  });
});

describe('how long a loadgen run may take (loadgenTimeoutMs)', () => {
  it('covers the longest periods the bench accepts (240 s of signed deliveries), their signing and the answers\' timeout', () => {
    // The longest fixed-rate row run.ts lets through at 2,500/s: 600,000 deliveries signed (about
    // 18 s), 240 s of sending, then up to 10 s for the last answers. A fixed 180 s killed it.
    expect(loadgenTimeoutMs({ mode: 'open', rate: 2500, warmupS: 3, durationS: 237 })).toBeGreaterThan((18 + 240 + 10) * 1000);
    // The replay row's ingest: --replay-events 480,000 at 2,000/s, no warm-up.
    expect(loadgenTimeoutMs({ mode: 'open', rate: 2000, warmupS: 0, durationS: 240 })).toBeGreaterThan((15 + 240 + 10) * 1000);
    // Short runs keep the 180 s they always had.
    expect(loadgenTimeoutMs({ mode: 'open', rate: 2500, warmupS: 3, durationS: 15 })).toBe(180_000);
  });
});
