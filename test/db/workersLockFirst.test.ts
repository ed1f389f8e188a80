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
  it('a receiver with workers, refused because another live process runs them, leaves the schema as it was (an upgrade beside the old version)', () => {
    const dbPath = join(dir, 'old.db');
    // A database of an older version: here, one that has no receiver tables at all yet.
    const old = new BetterSqlite3(dbPath);
    old.exec('CREATE TABLE from_before (x)');
    old.close();
    const live = acquireWorkersLock(dbPath); // the old version's workers
    try {
      expect(() => createApp({ config: config(dbPath, '4'), logger: createLogger('silent', new LogCapture()) })).toThrow(WorkersRunningError);
      expect(tables(dbPath)).toEqual(['from_before']);
    } finally {
      live.release();
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
