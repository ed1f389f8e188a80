import { existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, runTs, waitForHttp, type Child } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { waitFor } from '../helpers/waitFor.js';
import { newSecret } from '../helpers/signing.js';

const { dir, cleanup } = tempDir('receiver-lock-deleted-');
afterAll(cleanup);

async function stop(child: Child) {
  if (child.proc.exitCode !== null || child.proc.signalCode !== null) return child.exited;
  child.proc.kill('SIGTERM');
  const t = setTimeout(() => child.proc.kill('SIGKILL'), 15_000);
  return child.exited.finally(() => clearTimeout(t));
}

/** A `serve` with workers on `path`, its workers started. */
async function serveWithWorkers(path: string) {
  const env = { HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', WEBHOOK_SECRET: newSecret(), DATABASE_PATH: path, HOST: '127.0.0.1' };
  const port = await freePort();
  const child = runTs('src/main.ts', [], { ...env, PORT: String(port) });
  await waitForHttp(`http://127.0.0.1:${port}/healthz`, undefined, child);
  await waitFor(() => /workers started/.test(child.stdout.join('')), 'workers started');
  return { child, env, url: `http://127.0.0.1:${port}` };
}

const lockFileOf = (path: string) => `${path}-workers-lock`;
/** `rm receiver.db-workers-lock`, its -journal left where it is. */
const removeLockFile = (path: string) => rmSync(lockFileOf(path));

// The lock is the kernel's on the file: deleted under a running receiver (taken for a stale lock
// file), the next process with workers made a new file, locked it and ran its workers beside the
// first one's, taking back every job the first was running.
describe('the workers lock file deleted under a running receiver', () => {
  it('is taken again on a new file at once: a `work` started after that is still refused', async () => {
    const path = join(dir, 'again.db');
    const a = await serveWithWorkers(path);
    let b: Child | undefined;
    try {
      removeLockFile(path);
      await waitFor(() => existsSync(lockFileOf(path)), 'the lock file made again', 5_000);
      b = runTs('src/cli/main.ts', ['work'], a.env);
      expect((await b.exited).code).toBe(1);
      expect(b.stderr.join('')).toMatch(/another process is already running the workers of/);
      expect(b.stdout.join('')).not.toMatch(/workers started/);
    } finally {
      if (b) await stop(b);
      expect((await stop(a.child)).code).toBe(0);
    }
  }, 60_000);

  it('when another process took the lock on a new file first, this one stops its workers and says so; ingest goes on', async () => {
    const path = join(dir, 'taken.db');
    const a = await serveWithWorkers(path);
    try {
      removeLockFile(path);
      // This test's process takes it on a new file at once, as acquireWorkersLock does, before the
      // receiver's next look (once a second).
      const taker = new BetterSqlite3(lockFileOf(path));
      try {
        taker.pragma('locking_mode = EXCLUSIVE');
        taker.exec('BEGIN EXCLUSIVE; COMMIT');
        await waitFor(() => /the workers lock file was deleted or replaced/.test(a.child.stdout.join('')), 'the line at error', 5_000);
        expect((await fetch(`${a.url}/readyz`)).status).toBe(200);
      } finally {
        taker.close();
      }
    } finally {
      expect((await stop(a.child)).code).toBe(0);
    }
    expect(a.child.stdout.join('').match(/the workers lock file was deleted or replaced/g)).toHaveLength(1);
  }, 60_000);
});
