import { createRequire } from 'node:module';
import { join } from 'node:path';
import { Worker } from 'node:worker_threads';
import BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import type { WalBlocked } from '../../src/db/checkpointer.js';
import { logWalBlocked } from '../../src/db/logWalBlocked.js';
import { openDatabase, type OpenDatabase } from '../../src/db/openDatabase.js';
import { createLogger } from '../../src/observability/logger.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { LogCapture, tempDir } from '../helpers/receiver.js';

/** A database file of its own with the checkpointer thread, closed and removed when the test ends. */
function openWithCheckpointer(opts: { maxWalBytes: number; blockedReportMs: number; onWalBlocked: (b: WalBlocked) => void }): { path: string; database: OpenDatabase } {
  const t = tempDir();
  const path = join(t.dir, 'r.db');
  const { onWalBlocked, ...checkpointer } = opts;
  const database = openDatabase(path, { checkpointer: { intervalMs: 20, ...checkpointer }, onWalBlocked });
  onTestFinished(async () => {
    await database.close();
    t.cleanup();
  });
  return { path, database };
}

/**
 * Runs a write on a connection of busy_timeout 0 (the ingest connection), retrying the SQLITE_BUSY
 * of the checkpointer's RESTART, or of its look at the write lock (causeOf), holding the write lock
 * for a moment, as the ingest committer does on its own timer.
 */
async function retryingBusy<T>(write: () => T): Promise<T> {
  for (let i = 0; i < 200; i++) {
    try {
      return write();
    } catch (err) {
      if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
      await new Promise((r) => setTimeout(r, 2));
    }
  }
  throw new Error('the write lock stayed busy');
}

const gauge = async (metrics: ReturnType<typeof createMetrics>) =>
  Number(/^receiver_sqlite_wal_blocked_seconds (\S+)$/m.exec(await metrics.registry.metrics())?.[1]);

describe('a reader holding an old snapshot on the database', () => {
  it('is reported while the WAL cannot be reset (log at warn, receiver_sqlite_wal_blocked_seconds), and its end at info', async () => {
    const maxWalBytes = 256 * 1024;
    const logs = new LogCapture();
    const metrics = createMetrics();
    const report = logWalBlocked(metrics, createLogger('debug', logs));
    const seen: WalBlocked[] = [];
    const { path, database } = openWithCheckpointer({
      maxWalBytes,
      blockedReportMs: 200,
      onWalBlocked: (b) => {
        seen.push(b);
        report(b);
      },
    });
    const ingest = database.ingestSqlite;
    const insert = ingest.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)");
    const commit = ingest.transaction((n: number) => {
      for (let i = 0; i < n; i++) insert.run(Buffer.alloc(4096, i));
    });
    const commitRetrying = (n: number) => retryingBusy(() => commit.immediate(n));
    const waitFor = async (what: () => boolean) => {
      for (let i = 0; i < 250 && !what(); i++) {
        await commitRetrying(1);
        await new Promise((r) => setTimeout(r, 20));
      }
      return what();
    };
    const warned = () => logs.lines.some((l) => l.level === 40 && /^the WAL cannot be reset/.test(String(l.msg)));

    const reader = new BetterSqlite3(path, { readonly: true });
    try {
      reader.prepare('BEGIN').run();
      reader.prepare('SELECT COUNT(*) FROM quarantine').pluck().get();
      // Past the bound (2 KB pages: 128 frames) while the reader pins its snapshot.
      for (let i = 0; i < 20; i++) await commitRetrying(10);
      expect(await waitFor(warned)).toBe(true);
      const line = logs.lines.find((l) => l.level === 40)!;
      expect(line.wal_bytes as number).toBeGreaterThan(maxWalBytes);
      expect(line.blocked_seconds).toBeTypeOf('number');
      expect(line.cause).toBe('reader');
      expect(await gauge(metrics)).toBeGreaterThan(0);
    } finally {
      reader.prepare('COMMIT').run();
      reader.close();
    }
    expect(await waitFor(() => seen.at(-1)?.since === null)).toBe(true);
    expect(logs.lines.some((l) => l.level === 30 && l.msg === 'the WAL can be reset again')).toBe(true);
    expect(await gauge(metrics)).toBe(0);
  });

  it('is not blamed on a reader when no reader holds the WAL: the write lock was never free for the RESTART', async () => {
    const logs = new LogCapture();
    const metrics = createMetrics();
    const report = logWalBlocked(metrics, createLogger('debug', logs));
    const { path } = openWithCheckpointer({ maxWalBytes: 256 * 1024, blockedReportMs: 200, onWalBlocked: report });
    // Another connection commits past the bound, then holds the write lock (as commits back to
    // back do, leaving the 10 ms of a RESTART's wait no moment). No read transaction is open.
    const writer = new BetterSqlite3(path);
    try {
      writer.pragma('busy_timeout = 5000');
      const insert = writer.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)");
      writer.transaction(() => {
        for (let i = 0; i < 100; i++) insert.run(Buffer.alloc(4096, i));
      })();
      writer.prepare('BEGIN IMMEDIATE').run();
      const warnLine = () => logs.lines.find((l) => l.level === 40);
      for (let i = 0; i < 250 && !warnLine(); i++) await new Promise((r) => setTimeout(r, 20));
      const line = warnLine();
      expect(line?.msg).toMatch(/^the WAL cannot be reset/);
      expect(line!.cause).toBe('writes');
      expect(String(line!.msg)).not.toMatch(/old snapshot/);
      expect(String(line!.hint)).not.toMatch(/read transaction/);
      expect(await gauge(metrics)).toBeGreaterThan(0);
    } finally {
      if (writer.inTransaction) writer.prepare('ROLLBACK').run();
      writer.close();
    }
  });

  it('does not end while the reader holds it when another connection is checkpointing too (a `work` process beside `serve`)', async () => {
    const seen: WalBlocked[] = [];
    const { path, database } = openWithCheckpointer({ maxWalBytes: 256 * 1024, blockedReportMs: 100, onWalBlocked: (b) => seen.push(b) });
    // Another process's checkpointer, as in a split deployment, on a thread of its own: its
    // passes hold the checkpoint lock, and a pass of this checkpointer that finds it taken (log -1)
    // learns nothing about the WAL.
    const other = new Worker(
      `const { workerData, parentPort } = require('node:worker_threads');
       const db = new (require(workerData.driver))(workerData.path);
       let stop = false;
       parentPort.on('message', () => { stop = true; });
       const end = Date.now() + 10000;
       const tick = () => {
         for (let i = 0; i < 200; i++) db.pragma('wal_checkpoint(PASSIVE)');
         if (stop || Date.now() > end) { db.close(); parentPort.close(); } else setImmediate(tick);
       };
       tick();`,
      { eval: true, workerData: { path, driver: createRequire(import.meta.url).resolve('better-sqlite3') } },
    );
    const otherEnded = new Promise((r) => other.once('exit', r));
    const reader = new BetterSqlite3(path, { readonly: true });
    try {
      reader.prepare('BEGIN').run();
      reader.prepare('SELECT COUNT(*) FROM quarantine').pluck().get();
      const insert = database.ingestSqlite.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)");
      const started = Date.now();
      for (let i = 0; i < 100 && Date.now() - started < 2000; i++) {
        try {
          for (let j = 0; j < 5; j++) insert.run(Buffer.alloc(4096, j));
        } catch (err) {
          if ((err as { code?: string }).code !== 'SQLITE_BUSY') throw err;
        }
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(seen.filter((b) => b.since !== null).length).toBeGreaterThan(0);
      expect(seen.filter((b) => b.since === null || b.walBytes <= 0)).toEqual([]);
    } finally {
      other.postMessage('stop');
      await otherEnded;
      if (reader.inTransaction) reader.prepare('COMMIT').run();
      reader.close();
    }
  });

  it('blames the reader that holds the WAL while nothing is committed (its snapshot at the WAL\'s end)', async () => {
    const logs = new LogCapture();
    const report = logWalBlocked(createMetrics(), createLogger('debug', logs));
    const { path, database } = openWithCheckpointer({ maxWalBytes: 256 * 1024, blockedReportMs: 100, onWalBlocked: report });
    const insert = database.ingestSqlite.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)");
    const older = new BetterSqlite3(path, { readonly: true });
    const newer = new BetterSqlite3(path, { readonly: true });
    try {
      // The older reader keeps the frames past its snapshot from being copied, so the newer one,
      // begun after the commits, takes a snapshot at the WAL's end; then the older one ends and
      // nothing more is committed: every frame can be copied, and only the newer reader stops the reset.
      older.prepare('BEGIN').run();
      older.prepare('SELECT COUNT(*) FROM quarantine').pluck().get();
      for (let i = 0; i < 100; i++) await retryingBusy(() => insert.run(Buffer.alloc(4096, i)));
      newer.prepare('BEGIN').run();
      newer.prepare('SELECT COUNT(*) FROM quarantine').pluck().get();
      older.prepare('COMMIT').run();
      const warnings = () => logs.lines.filter((l) => l.level === 40);
      const after = warnings().length;
      for (let i = 0; i < 250 && warnings().length < after + 3; i++) await new Promise((r) => setTimeout(r, 20));
      expect(warnings().length).toBeGreaterThanOrEqual(after + 3);
      expect(warnings().at(-1)!.cause).toBe('reader');
    } finally {
      if (older.inTransaction) older.prepare('COMMIT').run();
      if (newer.inTransaction) newer.prepare('COMMIT').run();
      older.close();
      newer.close();
    }
  });

  it('is not reported while the WAL stays under its bound', async () => {
    const seen: WalBlocked[] = [];
    const { path, database } = openWithCheckpointer({ maxWalBytes: 4 * 1024 * 1024, blockedReportMs: 100, onWalBlocked: (b) => seen.push(b) });
    const reader = new BetterSqlite3(path, { readonly: true });
    try {
      reader.prepare('BEGIN').run();
      reader.prepare('SELECT COUNT(*) FROM quarantine').pluck().get();
      const insert = database.ingestSqlite.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', x'00')");
      for (let i = 0; i < 20; i++) {
        insert.run();
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      reader.prepare('COMMIT').run();
      reader.close();
    }
    expect(seen).toEqual([]);
  });
});
