import { chmodSync, chownSync, copyFileSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { ROOT, runToExit } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { cli } from './helpers.js';

// An operator's own account, not the receiver's: root may read and write anything, so the CLI runs
// as nobody here. Only root can run this.
const root = typeof process.getuid === 'function' && process.getuid() === 0;
const NOBODY = 65534;
const { dir, cleanup } = tempDir('cli-other-user-');
afterAll(cleanup);

/** The CLI (src/cli/main.ts) as nobody, until it exits (bounded). */
const cliAsNobody = (args: string[]) =>
  runToExit(process.execPath, ['--import', `${ROOT}node_modules/tsx/dist/loader.mjs`, `${ROOT}src/cli/main.ts`, ...args], { env: {}, uid: NOBODY, gid: NOBODY });

const AS_THE_RECEIVER = 'run the command as the user the receiver runs as';

describe.skipIf(!root)('the CLI on a database another user owns', { timeout: 60_000 }, () => {
  it('names the file, the folder or the permission it lacks, not SQLite\'s "attempt to write a readonly database"', async () => {
    chmodSync(dir, 0o755);
    const made = join(dir, 'made.db');
    expect((await cli(['migrate'], { DATABASE_PATH: made })).code).toBe(0);
    const place = (folder: string, owner: number, mode: number) => {
      mkdirSync(join(dir, folder));
      const path = join(dir, folder, 'receiver.db');
      copyFileSync(made, path);
      chownSync(path, owner, owner);
      chmodSync(path, mode);
      return path;
    };
    // nobody's database in root's folder: SQLite cannot make the -shm it reads a WAL database through.
    const inRootsFolder = place('roots-folder', NOBODY, 0o644);
    // root's database, readable by all, in a folder nobody may write: looking works, writing does not.
    const rootsFile = place('shared-folder', 0, 0o644);
    chownSync(join(dir, 'shared-folder'), NOBODY, NOBODY);
    // root's database that only root may read.
    const unreadable = place('private', 0, 0o600);
    chownSync(join(dir, 'private'), NOBODY, NOBODY);

    const [status, prune, readable, write, secret] = await Promise.all([
      cliAsNobody(['status', '--database', inRootsFolder]),
      cliAsNobody(['prune', '--database', inRootsFolder]),
      cliAsNobody(['status', '--database', rootsFile]),
      cliAsNobody(['dead-letters', 'retry', '--all', '--database', rootsFile]),
      cliAsNobody(['status', '--database', unreadable]),
    ]);
    const folderLine = `error: cannot open the database at ${inRootsFolder}: this process (uid ${NOBODY}) may not create files in its folder ${join(dir, 'roots-folder')} (EACCES), where SQLite makes the -wal and -shm it reads and writes the database through: ${AS_THE_RECEIVER}\n`;
    expect(status).toEqual({ code: 1, stderr: folderLine });
    expect(prune).toEqual({ code: 1, stderr: folderLine });
    expect(readable).toEqual({ code: 0, stderr: '' });
    expect(write).toEqual({ code: 1, stderr: `error: cannot write the database at ${rootsFile}: this process (uid ${NOBODY}) may not write it (EACCES): ${AS_THE_RECEIVER}\n` });
    expect(secret).toEqual({ code: 1, stderr: `error: cannot open the database at ${unreadable}: this process (uid ${NOBODY}) may not read it (EACCES): ${AS_THE_RECEIVER}\n` });
  });
});
