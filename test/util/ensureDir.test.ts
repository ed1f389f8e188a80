import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ensureDir, ensureDirSync } from '../../src/util/ensureDir.js';
import { ROOT } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';

const { dir, cleanup } = tempDir('ensure-dir-');
afterAll(cleanup);

// procfs answers ENOENT to a mkdir under a directory that exists: Node's own recursive mkdir
// then never returns (nodejs/node, the recursive walk in src/node_file.cc).
const PROC = existsSync('/proc/self') ? '/proc/no-such-dir/deeper' : null;
const TSX = `${ROOT}node_modules/tsx/dist/loader.mjs`;

describe.each([
  ['ensureDirSync', async (d: string) => ensureDirSync(d)],
  ['ensureDir', ensureDir],
] as const)('%s', (name, make) => {
  it('makes every missing level and accepts a directory that is already there', async () => {
    const target = join(dir, name, 'a', 'b', 'c');
    await make(target);
    expect(statSync(target).isDirectory()).toBe(true);
    await make(target);
    await make(join(dir, name, 'a'));
  });

  it('refuses a file in the way, naming it', async () => {
    const file = join(dir, `${name}-file`);
    writeFileSync(file, 'x');
    await expect(make(join(file, 'sub'))).rejects.toMatchObject({ code: 'ENOTDIR' });
    await expect(make(file)).rejects.toThrow(`${file} exists and is not a directory`);
  });

  it('refuses a dangling symlink, at it or below it', async () => {
    const link = join(dir, `${name}-dangling`);
    symlinkSync(join(dir, 'nowhere'), link);
    await expect(make(join(link, 'sub'))).rejects.toMatchObject({ code: 'ENOTDIR', path: link });
    await expect(make(link)).rejects.toMatchObject({ code: 'ENOTDIR', path: link });
  });

  // An error root meets too (CI runs the tests as root, where the read-only parent below is skipped).
  it('passes on other errors (a name longer than the filesystem allows)', async () => {
    const tooLong = join(dir, `${name}-${'n'.repeat(300)}`, 'sub');
    await expect(make(tooLong)).rejects.toMatchObject({ code: 'ENAMETOOLONG' });
  });

  // Root writes anywhere, so there is nothing to test as root (these machines run tests as root).
  it.skipIf(process.getuid?.() === 0)('passes on other errors (a read-only parent)', async () => {
    const parent = join(dir, `${name}-ro`);
    mkdirSync(parent, { mode: 0o500 });
    await expect(make(join(parent, 'sub'))).rejects.toMatchObject({ code: 'EACCES' });
  });
});

describe.skipIf(!PROC)('a directory under /proc', () => {
  it('ensureDir rejects with ENOENT instead of never settling', async () => {
    const outcome = await Promise.race([
      ensureDir(PROC!).then(() => 'made', (err: NodeJS.ErrnoException) => err.code),
      new Promise((r) => setTimeout(() => r('still pending after 5 s'), 5000)),
    ]);
    expect(outcome).toBe('ENOENT');
  });

  it('ensureDirSync throws ENOENT instead of spinning (in a child process, so a regression cannot freeze the suite)', () => {
    const code = `import { ensureDirSync } from ${JSON.stringify(`${ROOT}src/util/ensureDir.ts`)};
      try { ensureDirSync(${JSON.stringify(PROC)}); console.log('made'); } catch (err) { console.log(err.code); }`;
    const r = spawnSync(process.execPath, ['--import', TSX, '--input-type=module', '-e', code], { cwd: ROOT, timeout: 10_000, encoding: 'utf8' });
    expect(r.signal, 'killed by the timeout: the walk did not end').toBeNull();
    expect(r.stdout.trim()).toBe('ENOENT');
  });
});
