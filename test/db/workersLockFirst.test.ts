import { existsSync, unlinkSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/loadConfig.js';
import { readMigrations } from '../../src/db/migrate.js';
import { acquireWorkersLock, WorkersRunningError } from '../../src/db/workersLock.js';
import { createLogger } from '../../src/observability/logger.js';
import { LogCapture, tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { cli } from '../cli/helpers.js';
import { freePort, runTs } from '../helpers/childServer.js';

const { dir, cleanup } = tempDir('workers-lock-first-');
afterAll(cleanup);

const config = (dbPath: string, workers: string) =>
  loadConfig({ DATABASE_PATH: dbPath, WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', WORKER_CONCURRENCY: workers });
const tables = (dbPath: string) => {
  const db = new BetterSqlite3(dbPath, { readonly: true });
  try {
    return (db.prepare("SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name").pluck().all() as string[]);
  } finally {
    db.close();
  }
};

describe('the workers lock is taken before the database is migrated', () => {
  it('serve and work with workers, refused because another live process runs them, leave the schema as it was (an upgrade beside the old version)', async () => {
    const dbPath = join(dir, 'old.db');
    // A database of an older version: here, one that has no receiver tables at all yet.
    const old = new BetterSqlite3(dbPath);
    old.exec('CREATE TABLE from_before (x)');
    old.close();
    const live = acquireWorkersLock(dbPath); // the old version's workers
    try {
      const env = { DATABASE_PATH: dbPath, WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', PORT: String(await freePort()), HOST: '127.0.0.1' };
      for (const command of ['serve', 'work']) {
        const r = await cli([command], env);
        expect(r.code, command).toBe(1);
        expect(r.stderr, command).toMatch(/another process is already running the workers of /);
        expect(tables(dbPath), command).toEqual(['from_before']);
      }
    } finally {
      live.release();
    }
  }, 40_000);

  it('serve, and work with WORK_METRICS_PORT, on a new database whose workers lock another process took first are refused before they listen', async () => {
    // Two starts on a path that names no database yet (neither takes the lock before the database
    // is opened: there is none to protect); here the other one holds the lock already.
    for (const [command, portVar] of [['serve', 'PORT'], ['work', 'WORK_METRICS_PORT']] as const) {
      const dbPath = join(dir, `new-${command}.db`);
      writeFileSync(dbPath, '');
      const live = acquireWorkersLock(dbPath);
      unlinkSync(dbPath);
      try {
        const port = await freePort();
        const start = runTs('src/cli/main.ts', [command], { DATABASE_PATH: dbPath, WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', [portVar]: String(port), HOST: '127.0.0.1' });
        let exited: { code: number | null } | null = null;
        void start.exited.then((e) => (exited = e));
        // Connections tried until it exits: taken after the port, the lock's wait (WORKERS_LOCK_WAIT_MS)
        // held its event loop while the port took them, and the failed start closed them unanswered.
        let connected = 0;
        const deadline = Date.now() + 30_000;
        try {
          while (exited === null && Date.now() < deadline) {
            const ok = await new Promise<boolean>((resolve) => {
              const socket = connect(port, '127.0.0.1');
              socket.once('connect', () => (socket.destroy(), resolve(true)));
              socket.once('error', () => resolve(false));
            });
            if (ok) connected++;
            await new Promise((r) => setTimeout(r, 10));
          }
        } finally {
          if (exited === null) start.proc.kill('SIGKILL');
        }
        const { code } = await start.exited;
        expect(code, `${command}: ${start.stderr.join('')}`).toBe(1);
        expect(start.stderr.join(''), command).toMatch(/another process is already running the workers of /);
        expect(connected, `connections the refused ${command} took on its ${portVar}`).toBe(0);
        expect(existsSync(dbPath), command).toBe(false); // the file it created, removed again
      } finally {
        live.release();
      }
    }
  }, 60_000);

  it('a path that is not an SQLite file gets no lock file beside it, and its own error', async () => {
    const notDb = join(dir, 'notes.txt');
    writeFileSync(notDb, 'not a database at all, just some text');
    const r = await cli(['work'], { DATABASE_PATH: notDb, WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/cannot open the database at .*notes\.txt \(DATABASE_PATH\): file is not a database/);
    expect(existsSync(`${notDb}-workers-lock`)).toBe(false);
  }, 40_000);

  it('a workers lock handed to a receiver whose start fails is released', async () => {
    const dbPath = join(dir, 'failed-start.db');
    new BetterSqlite3(dbPath).close();
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    try {
      const port = String((taken.address() as AddressInfo).port);
      const cfg = loadConfig({ DATABASE_PATH: dbPath, WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', PORT: port, HOST: '127.0.0.1' });
      const app = createApp({ config: cfg, logger: createLogger('silent', new LogCapture()), workersLock: acquireWorkersLock(dbPath) });
      await expect(app.start()).rejects.toThrow(/PORT: .* is already in use/);
      acquireWorkersLock(dbPath).release(); // free again
      await app.stop();
    } finally {
      taken.close();
    }
  });

  it('an ingest-only receiver (WORKER_CONCURRENCY=0) takes no lock and migrates; with the lock free, one with workers does too', async () => {
    const dbPath = join(dir, 'ingest.db');
    new BetterSqlite3(dbPath).close();
    const live = acquireWorkersLock(dbPath);
    try {
      const logs = new LogCapture();
      const ingest = createApp({ config: config(dbPath, '0'), logger: createLogger('info', logs) });
      expect(tables(dbPath)).toContain('schema_migrations');
      // Which migrations the start applied is logged once.
      const latest = readMigrations().at(-1)!.version;
      expect(logs.lines.filter((l) => l.msg === 'database migrated').map((l) => l.migrations)).toEqual([Array.from({ length: latest }, (_, i) => i + 1)]);
      await ingest.stop();
    } finally {
      live.release();
    }
    const withWorkers = createApp({ config: config(dbPath, '4'), logger: createLogger('silent', new LogCapture()) });
    await withWorkers.startWorkers();
    // It holds the lock now: a second one is refused.
    expect(() => acquireWorkersLock(dbPath)).toThrow(WorkersRunningError);
    await withWorkers.stop();
    acquireWorkersLock(dbPath).release();
  });
});
