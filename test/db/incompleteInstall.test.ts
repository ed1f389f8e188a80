import { cpSync, existsSync, mkdirSync, readdirSync, rmSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { LAST_MIGRATION } from '../../src/db/migrate.js';
import { idleReceiverEnv, ROOT, runToExit, TSX } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

const { dir, cleanup } = tempDir('incomplete-install-');
afterAll(cleanup);

/**
 * A copy of the receiver's sources beside a migrations/ folder as `prepare` leaves it (an install
 * or an image built without some of them), with the project's packages linked in.
 */
function install(name: string, prepare: (migrations: string) => void): string {
  const root = join(dir, name);
  mkdirSync(root);
  cpSync(join(ROOT, 'src'), join(root, 'src'), { recursive: true });
  cpSync(join(ROOT, 'package.json'), join(root, 'package.json'));
  symlinkSync(join(ROOT, 'node_modules'), join(root, 'node_modules'));
  prepare(join(root, 'migrations'));
  return root;
}

/** `hiring-receiver serve` of that copy, to its exit (SIGKILL after 20 s): its stderr. */
async function serve(root: string, databasePath: string) {
  const { code, stderr } = await runToExit(process.execPath, ['--import', TSX, join(root, 'src/cli/main.ts'), 'serve'], { env: idleReceiverEnv(databasePath, newSecret()), timeoutMs: 20_000 });
  return { code, out: stderr };
}

describe('an install whose migrations are missing', () => {
  it.each([
    ['no migrations folder', (_m: string) => {}, /migrations folder .*migrations\/? is incomplete: it cannot be read \(ENOENT\)/],
    ['an empty migrations folder', (m: string) => mkdirSync(m), /migrations folder .*migrations\/? is incomplete: it has no migration files/],
    [
      'a migration left out in the middle',
      (m: string) => {
        mkdirSync(m);
        cpSync(join(ROOT, 'migrations'), m, { recursive: true });
        rmSync(join(m, readMigrationName(m, 2)));
      },
      /migrations folder .*migrations\/? is incomplete: migration 2 is missing \(found 1, 3, /,
    ],
    [
      'its last migration left out',
      (m: string) => {
        mkdirSync(m);
        cpSync(join(ROOT, 'migrations'), m, { recursive: true });
        rmSync(join(m, readMigrationName(m, LAST_MIGRATION)));
      },
      new RegExp(`migrations folder .*migrations/? is incomplete: its last migration is ${LAST_MIGRATION - 1}, where this build's is ${LAST_MIGRATION}`),
    ],
  ])('%s: the start is refused, saying the install is broken, before any database file is made', async (name, prepare, said) => {
    const root = install(name.replace(/\W+/g, '-'), prepare);
    const databasePath = join(dir, `${name.replace(/\W+/g, '-')}-data`, 'receiver.db');
    const { code, out } = await serve(root, databasePath);
    expect(code).toBe(1);
    expect(out).toMatch(said);
    expect(out).toContain('The install or image is broken');
    // Not the statement that failed on a database without tables.
    expect(out).not.toContain('no such table');
    expect(existsSync(databasePath)).toBe(false);
    expect(existsSync(join(dir, `${name.replace(/\W+/g, '-')}-data`))).toBe(false);
  }, 60_000);
});

function readMigrationName(folder: string, version: number): string {
  const prefix = `${String(version).padStart(3, '0')}_`;
  const found = readdirSync(folder).find((f) => f.startsWith(prefix));
  if (!found) throw new Error(`no migration ${version} in ${folder}`);
  return found;
}
