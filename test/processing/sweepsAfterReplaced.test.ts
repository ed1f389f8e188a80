import { renameSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDatabase } from '../../src/db/openDatabase.js';
import { startReceiver, tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { freePort, waitForHttp } from '../helpers/childServer.js';

const { dir, cleanup } = tempDir('receiver-sweeps-replaced-');
afterEach(() => {
  vi.useRealTimers();
  cleanup();
});

const PRUNED = 'finished jobs past JOB_RETENTION_DAYS deleted';

/** Waits for `check`, on real timers, 10 s at most. */
async function waitFor(check: () => boolean, what: string): Promise<void> {
  const deadline = performance.now() + 10_000;
  while (!check()) {
    if (performance.now() > deadline) throw new Error(`${what}: not within 10 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe('the workers\' sweeps once the database file is found replaced', () => {
  it('write nothing more: the sweep every 5 minutes (stranded reads, then the prune of finished jobs) does not run', async () => {
    // The interval of the sweeps (5 minutes) and of the file watch are driven here; the rest runs on real timers.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const path = join(dir, 'receiver.db');
    const seed = openDatabase(path);
    // 10,050 finished jobs past the retention: the start's prune takes 10,000 (its bound), the next sweep the rest.
    seed.sqlite.exec(`INSERT INTO jobs (kind, payload, state, run_at, max_attempts, created_at, updated_at, finished_at)
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10050)
      SELECT 'process_event', '{}', 'done', '2020-01-01T00:00:00.000Z', 5, '2020-01-01T00:00:00.000Z', '2020-01-01T00:00:00.000Z', '2020-01-01T00:00:00.000Z' FROM n`);
    await seed.close();
    const r = await startReceiver({ DATABASE_PATH: path, WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '1' });
    const pruned = () => r.logs.lines.filter((l) => l.msg === PRUNED);
    try {
      await waitFor(() => pruned().length === 1, 'the start\'s prune');
      expect(pruned()[0]).toMatchObject({ jobs: 10_000 });
      renameSync(path, join(dir, 'moved.db'));
      expect((await fetch(`${r.url}/readyz`)).status).toBe(503);
      await waitFor(() => r.logs.lines.some((l) => /no longer the one this process opened/.test(String(l.msg))), 'the error line');
      vi.advanceTimersByTime(5 * 60_000);
    } finally {
      // The stop waits for a sweep and prune in flight.
      await r.app.stop();
    }
    expect(pruned()).toHaveLength(1);
  }, 30_000);

  it('found during the start\'s housekeeping: no sweep prunes into it afterwards', async () => {
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const path = join(dir, 'receiver.db');
    const seed = openDatabase(path);
    // 200,000 queued deliveries of a sink no longer configured: the start dead-letters them 500 a
    // transaction, after the receiver listens and before its workers start. And 50 finished jobs
    // past the retention, which a sweep's prune would delete.
    const jobs = (n: number, kind: string, state: string) => `INSERT INTO jobs (kind, payload, event_id, state, run_at, max_attempts, created_at, updated_at, finished_at)
      WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ${n})
      SELECT '${kind}', '{}', 'evt_' || i, '${state}', '2020-01-01T00:00:00.000Z', 5, '2020-01-01T00:00:00.000Z', '2020-01-01T00:00:00.000Z', '2020-01-01T00:00:00.000Z' FROM n;`;
    seed.sqlite.exec(jobs(200_000, 'sink:gone', 'pending') + jobs(50, 'process_event', 'done'));
    await seed.close();
    const config = join(dir, 'config.json');
    writeFileSync(config, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: join(dir, 'archive.ndjson') }] }));
    const secret = newSecret();
    // Not started here: the test moves the file while the start runs.
    const port = await freePort();
    const r = await startReceiver({ DATABASE_PATH: path, WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '1', CONFIG_FILE: config, PORT: String(port) }, { listen: false });
    const started = r.app.start();
    try {
      await waitForHttp(`http://127.0.0.1:${port}/healthz`);
      renameSync(path, join(dir, 'moved.db'));
      // Found now, during the housekeeping (the timer's check is driven here: it has not run).
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(503);
      await started;
      expect(r.logs.lines.some((l) => String(l.msg).startsWith('workers not started: the database file was found replaced'))).toBe(true);
      vi.advanceTimersByTime(5 * 60_000);
    } finally {
      await started.catch(() => {});
      await r.app.stop();
    }
    expect(r.logs.lines.filter((l) => l.msg === PRUNED)).toEqual([]);
  }, 60_000);
});
