import { chmodSync, chownSync, mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/openDatabase.js';
import { acquireWorkersLock } from '../../src/db/workersLock.js';
import { ROOT, runToExit } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

// Root may write anywhere: the receiver runs as nobody here. Only root can run this.
const root = typeof process.getuid === 'function' && process.getuid() === 0;
const NOBODY = 65534;
const { dir, cleanup } = tempDir('read-only-folder-');
afterAll(cleanup);

/** The receiver (src/main.ts) as nobody, until it exits (bounded). */
function serveAsNobody(dbPath: string): Promise<{ code: number | null; stderr: string }> {
  const env = { DATABASE_PATH: dbPath, WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', PORT: '0', HOST: '127.0.0.1' };
  return runToExit(process.execPath, ['--import', `${ROOT}node_modules/tsx/dist/loader.mjs`, `${ROOT}src/main.ts`], { env, uid: NOBODY, gid: NOBODY });
}

describe.skipIf(!root)('a database file the receiver may write, in a folder it may not', () => {
  chmodSync(dir, 0o755);
  const folderError = (folder: string) =>
    `may not create files in its folder ${folder} (EACCES); SQLite makes the database's -wal and -shm there, and the receiver its -workers-lock and -ingest-wait: make the folder writable by this user`;

  it.each([
    // Said by SQLite as "unable to open database file" (the workers lock)...
    ['a new, empty file', false],
    // ...and, with its lock file there already, as "attempt to write a readonly database" (its -wal).
    ['a migrated database, with the lock file the last start left', true],
  ])('%s: exit 1 naming the folder, not SQLite\'s words', async (name, migrated) => {
    const folder = join(dir, migrated ? 'migrated' : 'empty');
    mkdirSync(folder);
    const dbPath = join(folder, 'receiver.db');
    if (migrated) {
      await openDatabase(dbPath).close();
      acquireWorkersLock(dbPath).release();
    } else {
      writeFileSync(dbPath, '');
    }
    for (const f of [dbPath, ...(migrated ? [`${dbPath}-workers-lock`, `${dbPath}-ingest-wait`] : [])]) chownSync(f, NOBODY, NOBODY);
    chmodSync(folder, 0o755);
    const r = await serveAsNobody(dbPath);
    expect(r.code, name).toBe(1);
    expect(r.stderr, name).toContain(`fatal: cannot open the database at ${dbPath} (DATABASE_PATH): this process (uid ${NOBODY}) ${folderError(folder)}`);
  }, 30_000);

  it('a file that is not a database there keeps its own error: the folder is not blamed for it', async () => {
    const folder = join(dir, 'not-a-database');
    mkdirSync(folder);
    const dbPath = join(folder, 'receiver.db');
    writeFileSync(dbPath, 'x'.repeat(4096));
    acquireWorkersLock(dbPath).release();
    for (const f of [dbPath, `${dbPath}-workers-lock`]) chownSync(f, NOBODY, NOBODY);
    chmodSync(folder, 0o755);
    const r = await serveAsNobody(dbPath);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`fatal: cannot open the database at ${dbPath} (DATABASE_PATH): file is not a database`);
    expect(r.stderr).not.toContain('may not create files');
  }, 30_000);
});
