import { mkdtempSync, rmSync, statfsSync, statSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';

// A disk filling up must show before it is full: checkpoint errors and 503s are what a full one
// looks like, too late for an alert that should let the on-call act first.

let r: TestReceiver | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

const gauge = (text: string, name: string): number | undefined => {
  const m = new RegExp(`^${name} (\\S+)$`, 'm').exec(text);
  return m ? Number(m[1]) : undefined;
};

describe('the space left on the database filesystem in /metrics', () => {
  it('reports its available and total bytes, as statfs of the database folder says', async () => {
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: newSecret() });
    const text = await (await fetch(`${r.url}/metrics`)).text();
    expect(text).toMatch(/^# TYPE receiver_database_filesystem_avail_bytes gauge$/m);
    expect(text).toMatch(/^# TYPE receiver_database_filesystem_size_bytes gauge$/m);
    const fs = statfsSync(dirname(r.dbPath));
    const avail = gauge(text, 'receiver_database_filesystem_avail_bytes');
    const size = gauge(text, 'receiver_database_filesystem_size_bytes');
    expect(size).toBe(fs.blocks * fs.bsize);
    // Other programs write to this filesystem meanwhile: close, not equal.
    expect(Math.abs(avail! - fs.bavail * fs.bsize)).toBeLessThan(256 * 1024 * 1024);
    expect(avail).toBeLessThanOrEqual(size!);
  });

  // A DATABASE_PATH that is a symlink (to a volume mounted elsewhere): SQLite opens the file it
  // points to and keeps its -wal beside that file, on that filesystem. Read beside the link, the
  // gauges said the link's filesystem (another disk: the alert watched the wrong one) and a WAL of 0.
  const shm = '/dev/shm';
  const otherFs = (() => {
    try {
      return statSync(shm).dev !== statSync(tmpdir()).dev;
    } catch {
      return false;
    }
  })();
  it.skipIf(!otherFs)('reads the filesystem and the -wal of the file a symlinked DATABASE_PATH points to', async () => {
    const real = mkdtempSync(join(shm, 'receiver-real-'));
    const links = mkdtempSync(join(tmpdir(), 'receiver-link-'));
    try {
      const link = join(links, 'receiver.db');
      symlinkSync(join(real, 'receiver.db'), link);
      const secret = newSecret();
      r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret, DATABASE_PATH: link });
      expect((await postSigned(r.url, secret, JSON.stringify(envelope()))).status).toBe(200);
      const text = await (await fetch(`${r.url}/metrics`)).text();
      const fs = statfsSync(real);
      expect(fs.blocks * fs.bsize).not.toBe(statfsSync(links).blocks * statfsSync(links).bsize);
      expect(gauge(text, 'receiver_database_filesystem_size_bytes')).toBe(fs.blocks * fs.bsize);
      expect(gauge(text, 'receiver_sqlite_wal_bytes')).toBe(statSync(join(real, 'receiver.db-wal')).size);
      expect(gauge(text, 'receiver_sqlite_wal_bytes')).toBeGreaterThan(0);
    } finally {
      await r?.close();
      r = undefined;
      rmSync(real, { recursive: true, force: true });
      rmSync(links, { recursive: true, force: true });
    }
  });

  it('says NaN, not 0 bytes left, once the database folder is gone', async () => {
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: newSecret() });
    rmSync(dirname(r.dbPath), { recursive: true, force: true });
    const res = await fetch(`${r.url}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    // prom-client writes "Nan"; Prometheus reads NaN in any case.
    expect(text).toMatch(/^receiver_database_filesystem_avail_bytes nan$/im);
    expect(text).toMatch(/^receiver_database_filesystem_size_bytes nan$/im);
  });
});
