import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startReceiver } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { until } from '../helpers/waitFor.js';

/**
 * A full disk shows first in the WAL checkpoints (the checkpointer thread's writes into the
 * database file), before any ingest commit fails. A real full file system: a 4 MB tmpfs, which
 * needs the right to mount (root here and in CI); skipped without it.
 */
let mountpoint: string | null = null;
beforeAll(() => {
  const dir = mkdtempSync(join(tmpdir(), 'receiver-full-'));
  try {
    execFileSync('mount', ['-t', 'tmpfs', '-o', 'size=4m', 'tmpfs', dir], { stdio: 'ignore' });
    mountpoint = dir;
  } catch {
    rmdirSync(dir);
  }
});
// Each test starts on an empty file system: the one before filled it.
afterEach(() => {
  if (mountpoint) for (const f of readdirSync(mountpoint)) rmSync(join(mountpoint, f), { force: true });
});
afterAll(() => {
  if (!mountpoint) return;
  try {
    execFileSync('umount', [mountpoint], { stdio: 'ignore' });
  } catch {
    execFileSync('umount', ['-l', mountpoint], { stdio: 'ignore' });
  }
  rmdirSync(mountpoint);
});

describe('a full disk under the WAL checkpoints', () => {
  it('is logged as JSON at error with its SQLite code and counted in receiver_wal_checkpoint_errors_total', async (ctx) => {
    if (!mountpoint) return ctx.skip();
    const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '0', DATABASE_PATH: join(mountpoint, 'receiver.db') });
    try {
      const insert = r.app.database.ingestSqlite.prepare(
        "INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)",
      );
      // Until the file system is full (SQLite refuses the insert, nothing half-written).
      expect(() => {
        for (let i = 0; i < 10_000; i++) insert.run(Buffer.alloc(4000, i));
      }).toThrow(/database or disk is full/);
      const failed = () => r.logs.lines.find((l) => l.level === 50 && /^WAL checkpoint failed/.test(String(l.msg)));
      const deadline = Date.now() + 10_000;
      while (!failed() && Date.now() < deadline) await new Promise((ok) => setTimeout(ok, 50));
      expect(failed()).toMatchObject({ code: 'SQLITE_FULL', err: 'database or disk is full' });
      const text = await (await fetch(`${r.url}/metrics`)).text();
      expect(Number(/^receiver_wal_checkpoint_errors_total\{code="SQLITE_FULL"\} (\d+)$/m.exec(text)?.[1])).toBeGreaterThan(0);
    } finally {
      await r.close().catch(() => {});
    }
  });

  it('says at info when checkpoints go through again, once space is freed', async (ctx) => {
    if (!mountpoint) return ctx.skip();
    const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '0', DATABASE_PATH: join(mountpoint, 'recovers.db') });
    const filler = join(mountpoint, 'filler');
    try {
      // Another file takes most of the space, to be removed as an operator would.
      writeFileSync(filler, Buffer.alloc(2 * 1024 * 1024));
      const insert = r.app.database.ingestSqlite.prepare(
        "INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)",
      );
      expect(() => {
        for (let i = 0; i < 10_000; i++) insert.run(Buffer.alloc(4000, i));
      }).toThrow(/database or disk is full/);
      const line = (msg: RegExp, level: number) => r.logs.lines.find((l) => l.level === level && msg.test(String(l.msg)));
      const waitFor = (msg: RegExp, level: number) => until(() => line(msg, level), `a line ${msg}`);
      expect(await waitFor(/^WAL checkpoint failed/, 50)).toMatchObject({ code: 'SQLITE_FULL' });
      expect(line(/^WAL checkpoints succeed again/, 30)).toBeUndefined();
      rmSync(filler);
      const recovered = await waitFor(/^WAL checkpoints succeed again/, 30);
      expect(recovered).toBeDefined();
      expect(recovered!.failed_checkpoints).toBeGreaterThan(0);
    } finally {
      await r.close().catch(() => {});
    }
  });
});
