import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/openDatabase.js';
import { readMigrations } from '../../src/db/migrate.js';
import { idleReceiverEnv, openFiles, runTs, type Child } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

const { dir, cleanup } = tempDir('start-lock-wait-');
afterAll(cleanup);

const last = readMigrations().at(-1)!;

/** A database migrated up to `upTo` (the current schema by default), closed. */
async function database(name: string, upTo = last.version): Promise<string> {
  const path = join(dir, name);
  const d = openDatabase(path);
  if (upTo < last.version) {
    // The last migration adds indexes only (checked here): undone, it is pending again.
    const indexes = [...last.sql.matchAll(/^CREATE INDEX (\w+)/gm)].map((m) => m[1]!);
    expect(indexes.length).toBeGreaterThan(0);
    expect(last.sql.split('\n').filter((l) => l.trim() !== '' && !l.startsWith('--') && !l.startsWith('CREATE INDEX '))).toEqual([]);
    for (const i of indexes) d.sqlite.exec(`DROP INDEX ${i}`);
    d.sqlite.prepare('DELETE FROM schema_migrations WHERE version > ?').run(upTo);
  }
  await d.close();
  return path;
}

/** Another process's write transaction (a CLI command, a `work` migrating): the write lock, held until released. */
function holdWriteLock(path: string): () => void {
  const other = new BetterSqlite3(path);
  other.exec('BEGIN IMMEDIATE');
  return () => {
    other.exec('COMMIT');
    other.close();
  };
}

function serve(path: string, workers = '0'): Child {
  const child = runTs('src/main.ts', [], idleReceiverEnv(path, newSecret(), { WORKER_CONCURRENCY: workers }));
  const kill = setTimeout(() => child.proc.kill('SIGKILL'), 30_000);
  void child.exited.then(() => clearTimeout(kill));
  return child;
}

/** Until `done()` or the child exits, bounded. */
async function until(child: Child, done: () => boolean, ms = 20_000): Promise<void> {
  let exited = false;
  void child.exited.then(() => (exited = true));
  const deadline = Date.now() + ms;
  while (!done() && !exited && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
}

/** A `serve` with workers, once it says their start waits for the write lock (held by the caller). */
async function workersWaiting(path: string): Promise<Child> {
  const child = serve(path, '2');
  const waiting = () => child.stdout.join('').includes("the workers' start waits for it");
  await until(child, waiting);
  expect(waiting()).toBe(true);
  return child;
}

const listening = (child: Child) => child.stdout.join('').includes('"msg":"receiver listening"');

/** Whether the child has the database's -shm open: it is in openDatabase, past opening the file. */
const hasShmOpen = (child: Child, path: string): boolean => openFiles(child.proc.pid!).includes(`${path}-shm`);

describe('a start while another process holds the write lock', () => {
  it('on a current database, takes no lock to migrate: it listens while the lock is still held', async () => {
    const path = await database('current.db');
    const release = holdWriteLock(path);
    let child: Child;
    try {
      child = serve(path);
      await until(child, () => listening(child));
      expect(child.stderr.join('')).toBe('');
      expect(listening(child)).toBe(true);
    } finally {
      release();
    }
    child.proc.kill('SIGTERM');
    expect(await child.exited).toEqual({ code: 0, signal: null });
  }, 40_000);

  it("with workers, their start's housekeeping waits for the lock, says so, and starts once it is free (it exited 1 \"database is locked\")", async () => {
    const path = await database('workers.db');
    const release = holdWriteLock(path);
    let child: Child;
    try {
      child = await workersWaiting(path);
    } finally {
      release();
    }
    // 'receiver listening' is the line after 'workers started' (start() says it once the workers
    // started): waited for too, or read before it is written on a busy machine.
    await until(child, () => listening(child));
    expect(child.stderr.join('')).toBe('');
    expect(child.stdout.join('')).toContain('"msg":"workers started"');
    expect(listening(child)).toBe(true);
    child.proc.kill('SIGTERM');
    expect(await child.exited).toEqual({ code: 0, signal: null });
  }, 40_000);

  it('a stop while the workers\' start waits for the lock ends the receiver cleanly (it exited 1 "fatal: database is locked")', async () => {
    const path = await database('stop-waiting.db');
    const release = holdWriteLock(path);
    let child: Child;
    try {
      child = await workersWaiting(path);
      child.proc.kill('SIGTERM');
      expect(await child.exited).toEqual({ code: 0, signal: null });
    } finally {
      release();
    }
    expect(child.stderr.join('')).toBe('');
    const msgs = child.stdout.join('').trim().split('\n').map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(msgs).toContain('workers not started: the stop came during the start');
    expect(msgs).not.toContain('workers started');
    expect(msgs.at(-1), msgs.join(' | ')).toBe('receiver stopped');
  }, 40_000);

  it('with a migration pending, waits for the lock (another process migrating) rather than exit 1 "database is locked"', async () => {
    const path = await database('pending.db', last.version - 1);
    const release = holdWriteLock(path);
    let child: Child;
    try {
      child = serve(path);
      // In openDatabase, then well past the 200 ms the start used to wait for the lock.
      await until(child, () => hasShmOpen(child, path));
      const past = Date.now() + 1000;
      await until(child, () => Date.now() > past);
    } finally {
      release();
    }
    await until(child, () => listening(child));
    expect(child.stderr.join('')).toBe('');
    expect(listening(child)).toBe(true);
    child.proc.kill('SIGTERM');
    expect(await child.exited).toEqual({ code: 0, signal: null });
    const db = new BetterSqlite3(path, { readonly: true });
    expect(db.prepare('SELECT MAX(version) FROM schema_migrations').pluck().get()).toBe(last.version);
    db.close();
  }, 40_000);
});
