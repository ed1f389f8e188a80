import { renameSync, writeFileSync } from 'node:fs';
import BetterSqlite3 from 'better-sqlite3';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { openDatabase } from '../../src/db/openDatabase.js';
import { startReceiver, tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { freePort, waitForHttp } from '../helpers/childServer.js';
import { waitFor } from '../helpers/waitFor.js';

const { dir, cleanup } = tempDir('receiver-sweeps-replaced-');
afterEach(() => {
  vi.useRealTimers();
  cleanup();
});

const PRUNED = 'finished jobs past JOB_RETENTION_DAYS deleted';

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
  it('found before the start reached its sweeps (it waited for the write lock): neither the start\'s sweep nor the one every 5 minutes, nor the rest of the housekeeping, writes into it', async () => {
    // A latch in the start's first steps came before sweeps.startTimer(): the callback's
    // clearTimer had nothing to clear, and the timer started after it.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const path = join(dir, 'receiver.db');
    const seed = openDatabase(path);
    const at = '2020-01-01T00:00:00.000Z';
    // A stranded read (its dead letter committed, what follows it not): the sweep gives it up and
    // settles its event. And a job left running, which the start's housekeeping runs again.
    seed.sqlite.prepare("INSERT INTO event_processing (event_id, state, resource, updated_at) VALUES ('evt-s1', 'awaiting_result', 'interview', ?)").run(at);
    seed.sqlite.prepare(`INSERT INTO jobs (kind, payload, event_id, state, run_at, attempts, max_attempts, last_error, created_at, updated_at, finished_at) VALUES ('fetch_result', '{"event_id":"evt-s1","application_id":"app-s1","resource":"interview"}', 'evt-s1', 'dead', ?, 3, 3, 'HTTP 503', ?, ?, ?)`).run(at, at, at, at);
    seed.sqlite.prepare("INSERT INTO jobs (kind, payload, event_id, state, run_at, max_attempts, created_at, updated_at) VALUES ('process_event', '{}', 'evt-r1', 'running', ?, 5, ?, ?)").run(at, at, at);
    await seed.close();
    const port = await freePort();
    const r = await startReceiver({ DATABASE_PATH: path, WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '1', PORT: String(port) }, { listen: false });
    // Another process holds the write lock: the start waits at its first step.
    const holder = new BetterSqlite3(path);
    holder.exec('BEGIN IMMEDIATE');
    let held = true;
    const started = r.app.start();
    try {
      await waitFor(() => r.logs.lines.some((l) => /workers' start waits for it/.test(String(l.msg))), 'the start waiting for the write lock');
      renameSync(path, join(dir, 'moved.db'));
      expect((await fetch(`http://127.0.0.1:${port}/readyz`)).status).toBe(503);
      holder.exec('ROLLBACK');
      held = false;
      await started;
      vi.advanceTimersByTime(5 * 60_000);
    } finally {
      if (held) holder.exec('ROLLBACK');
      holder.close();
      await started.catch(() => {});
      await r.app.stop();
    }
    expect(r.logs.lines.filter((l) => /given up now, and their events settled|dead-lettered read could not be given up|jobs left running by a previous process/.test(String(l.msg)))).toEqual([]);
    const moved = new BetterSqlite3(join(dir, 'moved.db'), { readonly: true });
    try {
      expect(moved.prepare("SELECT state FROM event_processing WHERE event_id = 'evt-s1'").get()).toEqual({ state: 'awaiting_result' });
      expect(moved.prepare("SELECT state FROM jobs WHERE event_id = 'evt-r1'").get()).toEqual({ state: 'running' });
    } finally {
      moved.close();
    }
  }, 60_000);
});
