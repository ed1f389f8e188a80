import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { onTestFinished } from 'vitest';
import { openDatabase } from '../../src/db/openDatabase.js';
import { ROOT, TSX } from './childServer.js';
import { tempDir } from './receiver.js';

/**
 * A child process running `opener` (an ES module's text; it opens process.env.DB, and prints
 * `ready`) on a migrated database of its own, whose preload (--require, which worker threads run
 * too) sets the worker threads' wall clock (Date.now), and with `mainThreadToo` the main thread's,
 * back an hour once `stepBack()` is called (a file). Stopped and removed when the test ends.
 */
export async function clockBackChild(opener: string, { mainThreadToo = false } = {}): Promise<{ path: string; out: () => string; err: () => string; stepBack: () => void }> {
  const t = tempDir('clock-back-');
  onTestFinished(t.cleanup);
  const path = join(t.dir, 'r.db');
  const flag = join(t.dir, 'clock-back');
  const preload = join(t.dir, 'clock.cjs');
  writeFileSync(
    preload,
    `const { isMainThread } = require('node:worker_threads');
if (${mainThreadToo} || !isMainThread) {
  const { existsSync } = require('node:fs');
  const real = Date.now;
  Date.now = () => (existsSync(${JSON.stringify(flag)}) ? real() - 3_600_000 : real());
}
`,
  );
  // A file, not -e with --input-type=module: the thread's eval'd code would be a module too.
  const openerFile = join(t.dir, 'opener.mjs');
  writeFileSync(openerFile, opener);
  // Migrated here, then opened by the child with its thread.
  await openDatabase(path).close();

  const child = spawn(process.execPath, ['--require', preload, '--import', TSX, openerFile], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', ROOT, DB: path },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  onTestFinished(async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
    await exited;
  });
  for (let i = 0; i < 300 && !out.includes('ready'); i++) await new Promise((r) => setTimeout(r, 50));
  if (!out.includes('ready')) throw new Error(`the child did not open the database: ${err}`);
  return { path, out: () => out, err: () => err, stepBack: () => writeFileSync(flag, '') };
}
