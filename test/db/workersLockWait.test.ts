import BetterSqlite3 from 'better-sqlite3';
import { existsSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { acquireWorkersLock } from '../../src/db/workersLock.js';
import { openFiles, runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { until } from '../cli/helpers.js';

// `erase --dry-run` asks whether workers run by reading the lock file, which locks it for that
// one statement. A `work` (or a `serve` with workers) starting in that moment used to be refused
// at once and exit 1; it now waits the read out. A live holder still refuses it: see
// workersLockFirst.test.ts.

// Made in beforeAll, not at import: where the test is skipped, vitest runs no afterAll, and a
// folder made at import was left in the temp folder.
let dir = '';
let cleanup = () => {};
beforeAll(() => ({ dir, cleanup } = tempDir('workers-lock-wait-')));
afterAll(() => cleanup());

describe('a start that meets a moment’s read of the workers lock file', () => {
  // Where there is no /proc (macOS), the start's open files cannot be looked at: the test would
  // find the start never asking, wait for its exit, and fail. (A probe of the lock file from this
  // process cannot tell either: it shares this process's shared lock, and never meets the start's
  // pending one.)
  it.skipIf(!existsSync('/proc/self/fd'))('waits for the read to end and runs its workers, instead of exiting 1', async () => {
    const dbPath = join(dir, 'receiver.db');
    new BetterSqlite3(dbPath).close();
    acquireWorkersLock(dbPath).release(); // the lock file exists, as after any earlier run
    const lockFile = realpathSync(`${dbPath}-workers-lock`);
    // The read erase --dry-run does, held open here until the start is seen waiting for it.
    const reader = new BetterSqlite3(lockFile, { readonly: true, fileMustExist: true });
    reader.exec('BEGIN');
    reader.prepare('SELECT COUNT(*) FROM sqlite_master').get();
    const work = runTs('src/cli/main.ts', ['work'], {
      DATABASE_PATH: dbPath,
      WEBHOOK_SECRET: newSecret(),
      HIRING_API_URL: 'http://127.0.0.1:9',
      HIRING_API_KEY: 'sk-test.unused',
    });
    let exited: { code: number | null } | null = null;
    void work.exited.then((e) => (exited = e));
    try {
      // The start opens the lock file and asks for its exclusive lock in the same synchronous
      // call, microseconds apart: once the file is among its open files, it is asking.
      const opened = () => openFiles(work.proc.pid!).includes(lockFile);
      await until(() => opened() || exited !== null, 'the start to open the workers lock file (or to exit)', 20_000);
      // Long enough for a start that does not wait to have exited; well inside the start's wait.
      await new Promise((r) => setTimeout(r, 100));
      expect(exited, `the start exited while the lock file was read: ${work.stderr.join('')}`).toBeNull();
      reader.exec('COMMIT');
      await until(() => work.stdout.join('').includes('"workers started"') || exited !== null, 'workers started', 20_000);
      expect(work.stdout.join('')).toContain('"workers started"');
      expect(exited).toBeNull();
    } finally {
      if (reader.inTransaction) reader.exec('COMMIT');
      reader.close();
      if (exited === null) work.proc.kill('SIGTERM');
      await work.exited;
    }
  }, 60_000);
});
