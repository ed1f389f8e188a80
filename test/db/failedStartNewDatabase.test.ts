import { spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, mkdirSync, readdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { noteNewDatabase, removeNewDatabase } from '../../src/db/newDatabaseFiles.js';
import { openFiles, ROOT, runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

const { dir, cleanup } = tempDir('failed-start-db-');
afterAll(cleanup);

const API = { HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', HOST: '127.0.0.1' };

/** A port held by a plain TCP server on 127.0.0.1, for the receiver to find in use. */
let held: Server | null = null;
async function heldPort(): Promise<number> {
  held = createServer().listen(0, '127.0.0.1');
  await once(held, 'listening');
  return (held.address() as AddressInfo).port;
}
afterEach(async () => {
  if (held) await new Promise((r) => held!.close(r));
  held = null;
});

/** `hiring-receiver <command>` to its exit (SIGKILL after 20 s). */
async function run(command: string, env: Record<string, string>) {
  const child = runTs('src/cli/main.ts', [command], env);
  const kill = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
  const exit = await child.exited.finally(() => clearTimeout(kill));
  return { ...exit, stdout: child.stdout.join(''), stderr: child.stderr.join('') };
}

const logLines = (stdout: string) => stdout.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);

describe('a start that fails after it created the database', () => {
  it('serve on a port in use, at a path that named nothing (in folders that did not exist): removes the file, its side files and the folders; `status` then finds no database', async () => {
    const port = await heldPort();
    const path = join(dir, 'typo', 'deeper', 'receiver.db');
    const env = { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: path, PORT: String(port) };
    const out = await run('serve', env);
    expect(out).toMatchObject({ code: 1, signal: null });
    expect(out.stderr).toBe(`fatal: PORT: 127.0.0.1:${port} is already in use (another receiver still running?); stop it or choose another PORT\n`);
    // Nothing left: not the file, its -wal, -shm, -ingest-wait, nor the folders made for it.
    expect(existsSync(join(dir, 'typo')) && readdirSync(join(dir, 'typo'), { recursive: true })).toBe(false);
    expect(logLines(out.stdout).map((l) => l.msg)).toEqual(expect.arrayContaining(['database migrated', 'start failed', 'the start failed: the database file it created is removed again']));
    const status = await run('status', { DATABASE_PATH: path });
    expect(status.code).toBe(1);
    expect(status.stderr).toMatch(/^error: no database at /);
  }, 30_000);

  it('serve whose file sink cannot be opened (the port bound, the workers started): removes the database and its workers lock', async () => {
    const folder = join(dir, 'sink-case');
    mkdirSync(folder);
    const fifo = join(folder, 'fifo');
    expect(spawnSync('mkfifo', [fifo]).status).toBe(0);
    const configFile = join(folder, 'config.json');
    writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: fifo }] }));
    const out = await run('serve', { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: join(folder, 'r.db'), PORT: '0', CONFIG_FILE: configFile });
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/^fatal: sink "archive": cannot use .*fifo: it is not a regular file/);
    expect(readdirSync(folder).sort()).toEqual(['config.json', 'fifo']);
  }, 30_000);

  it('work on a WORK_METRICS_PORT in use: removes the database it created', async () => {
    const port = await heldPort();
    const folder = join(dir, 'work-case');
    mkdirSync(folder);
    const out = await run('work', { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: join(folder, 'r.db'), WORK_METRICS_PORT: String(port) });
    expect(out.code).toBe(1);
    expect(out.stderr).toMatch(/^error: WORK_METRICS_PORT: .* is already in use/);
    expect(readdirSync(folder)).toEqual([]);
  }, 30_000);

  it('never removes a database that existed before the start', async () => {
    const port = await heldPort();
    const path = join(dir, 'existing.db');
    const before = new BetterSqlite3(path);
    // A receiver's database (schema_migrations: another program's file is refused before this point).
    before.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    before.exec("CREATE TABLE kept (v TEXT); INSERT INTO kept VALUES ('here before')");
    before.close();
    const out = await run('serve', { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: path, PORT: String(port) });
    expect(out.code).toBe(1);
    expect(out.stdout).not.toMatch(/the database file it created/);
    const after = new BetterSqlite3(path, { fileMustExist: true });
    expect(after.prepare('SELECT v FROM kept').pluck().all()).toEqual(['here before']);
    after.close();
  }, 30_000);
});

describe('removeNewDatabase keeps a file that may be anyone else\'s', () => {
  /** A new WAL database at `path` with the events table, as a start left it. */
  function makeNew(name: string) {
    const path = join(dir, name);
    const created = noteNewDatabase(path)!;
    expect(created).not.toBeNull();
    const db = new BetterSqlite3(path);
    db.pragma('journal_mode = WAL');
    db.exec('CREATE TABLE events (id TEXT PRIMARY KEY)');
    return { path, created, db };
  }

  it('while another process has it open (a `serve` and a `work` started together on it, a reader)', async () => {
    const { path, created, db } = makeNew('shared.db');
    db.close();
    const holder = spawn(
      process.execPath,
      ['-e', `const D = require('better-sqlite3'); const d = new D(${JSON.stringify(path)}); d.prepare('SELECT 1 FROM events').all(); process.stdout.write('open\\n'); setTimeout(() => {}, 20000)`],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await Promise.race([once(holder.stdout!, 'data'), new Promise((_, reject) => setTimeout(() => reject(new Error('holder did not open the file in 10 s')), 10_000))]);
      expect(removeNewDatabase(created, null)).toEqual({ kept: 'another process has it open' });
      expect(existsSync(path)).toBe(true);
    } finally {
      holder.kill('SIGKILL');
      await once(holder, 'close');
    }
    // Once nobody has it open, it goes.
    expect(removeNewDatabase(created, null)).toBe('removed');
    expect(existsSync(path)).toBe(false);
  }, 20_000);

  it('while another process holds its workers lock (a start that found the file, before it opens it)', async () => {
    const { path, created, db } = makeNew('workers-held.db');
    db.close();
    const lockFile = `${path}-workers-lock`;
    const holder = spawn(
      process.execPath,
      ['-e', `const D = require('better-sqlite3'); const l = new D(${JSON.stringify(lockFile)}); l.pragma('locking_mode = EXCLUSIVE'); l.exec('BEGIN EXCLUSIVE; COMMIT'); process.stdout.write('held\\n'); setTimeout(() => {}, 20000)`],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await Promise.race([once(holder.stdout!, 'data'), new Promise((_, reject) => setTimeout(() => reject(new Error('holder did not take the lock in 10 s')), 10_000))]);
      expect(removeNewDatabase(created, null)).toEqual({ kept: 'another process holds its workers lock' });
      expect([existsSync(path), existsSync(lockFile)]).toEqual([true, true]);
    } finally {
      holder.kill('SIGKILL');
      await once(holder, 'close');
    }
    expect(removeNewDatabase(created, null)).toBe('removed');
    expect([existsSync(path), existsSync(lockFile)]).toEqual([false, false]);
  }, 20_000);

  it('once a delivery was stored in it (a failure after the port was bound)', () => {
    const { path, created, db } = makeNew('delivered.db');
    db.prepare("INSERT INTO events VALUES ('evt_1')").run();
    db.close();
    expect(removeNewDatabase(created, null)).toEqual({ kept: 'it holds what was received (its events table is not empty)' });
    expect(existsSync(path)).toBe(true);
  });

  it('when another file has taken its path since', () => {
    const { path, created, db } = makeNew('replaced.db');
    const st = { dev: 1n, ino: 1n };
    db.close();
    expect(removeNewDatabase(created, st)).toEqual({ kept: 'it is no longer the file this start created' });
    expect(existsSync(path)).toBe(true);
  });
});

describe('a start on the same new path while a failed start removes its file', () => {
  it('a `work` whose open waited for the lock the removal held opens the file now at the path, not "disk I/O error"', async () => {
    const folder = join(dir, 'reopen-case');
    mkdirSync(folder);
    const path = join(folder, 'r.db');
    // A new database as a failed start leaves it, then its removal: checked under an exclusive
    // lock, and removed while that lock is held.
    const made = new BetterSqlite3(path);
    made.pragma('journal_mode = WAL');
    made.exec('CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)');
    made.close();
    const check = new BetterSqlite3(path, { fileMustExist: true });
    check.pragma('locking_mode = EXCLUSIVE');
    check.exec('BEGIN EXCLUSIVE; COMMIT');
    const child = runTs('src/cli/main.ts', ['work'], { ...API, WEBHOOK_SECRET: newSecret(), DATABASE_PATH: path });
    const kill = setTimeout(() => child.proc.kill('SIGKILL'), 25_000);
    try {
      // Its workers lock is taken first (the file exists), then the database opened: both open is
      // the open that now waits for the lock (up to 5 s).
      const deadline = Date.now() + 15_000;
      for (let i = 0; i < 3000 && Date.now() < deadline; i++) {
        const open = openFiles(child.proc.pid!);
        if (open.includes(path) && open.includes(`${path}-workers-lock`)) break;
        await new Promise((r) => setTimeout(r, 5));
      }
      expect(openFiles(child.proc.pid!)).toContain(path);
      unlinkSync(path);
      check.close();
      const deadline2 = Date.now() + 15_000;
      while (!child.stdout.join('').includes('workers started') && child.proc.exitCode === null && Date.now() < deadline2) await new Promise((r) => setTimeout(r, 20));
      expect(child.stderr.join('')).toBe('');
      expect(child.stdout.join('')).toContain('workers started');
      child.proc.kill('SIGTERM');
      expect(await child.exited).toEqual({ code: 0, signal: null });
      // The database it made anew, at the path.
      expect(existsSync(path)).toBe(true);
    } finally {
      clearTimeout(kill);
      if (check.open) check.close();
      if (child.proc.exitCode === null) child.proc.kill('SIGKILL');
    }
  }, 40_000);
});
