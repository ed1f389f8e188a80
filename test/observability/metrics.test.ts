import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/testPort.js';
import { startPair, type Pair } from '../helpers/pair.js';
import { startReceiver, tempDir } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { ManualClock } from '../../src/util/clock.js';

const { dir, cleanup } = tempDir('metrics-');
let pair: Pair | undefined;
let gone: Server | undefined;
afterAll(async () => {
  await pair?.close();
  gone?.close();
  cleanup();
});

describe('/metrics and /readyz report the whole pipeline', () => {
  it('counts API reads, job runs and sink deliveries, and shows a disabled sink without failing readiness', async () => {
    gone = createServer((_req, res) => {
      res.statusCode = 410;
      res.end();
    });
    await new Promise<void>((r) => gone!.listen(0, '127.0.0.1', () => r()));
    const file = join(dir, 'config.json');
    writeFileSync(
      file,
      JSON.stringify({
        sinks: [
          { name: 'archive', type: 'file', path: join(dir, 'events.ndjson') },
          { name: 'crm', type: 'http', url: `http://127.0.0.1:${(gone.address() as AddressInfo).port}/hook`, secret: newSecret() },
        ],
      }),
    );
    pair = await startPair({ env: { CONFIG_FILE: file } });
    pair.sandbox.control.runScenario('lifecycle');
    await pair.settle();
    await pair.receiver.app.fanOut.runUntilIdle();

    const ready = await fetch(`${pair.receiver.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', disabled_sinks: [{ sink: 'crm' }], paused_sources: [] });

    const text = await (await fetch(`${pair.receiver.url}/metrics`)).text();
    expect(text).toMatch(/receiver_hiring_api_calls_total\{source="default",resource="interview",outcome="ready"\} 1/);
    expect(text).toMatch(/receiver_job_runs_total\{kind="process_event",outcome="done"\} \d+/);
    expect(text).toMatch(/receiver_sink_deliveries_total\{sink="archive",outcome="done"\} [1-9]/);
    expect(text).toMatch(/receiver_sink_disabled\{sink="crm"\} 1/);
    expect(text).toMatch(/receiver_sink_disabled\{sink="archive"\} 0/);
    expect(text).toMatch(/receiver_sink_lag_seconds\{sink="archive"\} 0/);
    expect(text).toMatch(/receiver_sink_lag_seconds\{sink="crm"\} [0-9.]+/);
    expect(text).toMatch(/receiver_job_runs_total\{kind="fetch_result",outcome="done"\} 3/);
    // Finished jobs are counted by receiver_job_runs_total, not by a gauge that walks all history.
    expect(text).not.toMatch(/^receiver_jobs\{state="done"/m);
    // Every kind's pending, running and dead series, 0 when empty: a PromQL sum over them is 0, not empty.
    for (const kind of ['process_event', 'fetch_result', 'sink:archive', 'sink:crm']) {
      for (const state of ['pending', 'running', 'dead']) expect(text).toMatch(new RegExp(`^receiver_jobs\\{state="${state}",kind="${kind}"\\} \\d+$`, 'm'));
    }
    // One commit-duration observation per ingest transaction, each a real (non-zero) time.
    const histogram = (name: string, part: 'count' | 'sum') => Number(new RegExp(`^${name}_${part} ([0-9.e-]+)$`, 'm').exec(text)?.[1]);
    expect(histogram('receiver_group_commit_duration_seconds', 'count')).toBeGreaterThan(0);
    expect(histogram('receiver_group_commit_duration_seconds', 'count')).toBe(histogram('receiver_group_commit_batch_size', 'count'));
    expect(histogram('receiver_group_commit_duration_seconds', 'sum')).toBeGreaterThan(0);
    // In seconds: each commit lies within the answer time of the deliveries it held.
    expect(histogram('receiver_group_commit_duration_seconds', 'sum')).toBeLessThanOrEqual(histogram('receiver_ingest_duration_seconds', 'sum'));
    // The receiver's database is a file: its WAL exists and has been written.
    expect(Number(/^receiver_sqlite_wal_bytes (\d+)$/m.exec(text)?.[1])).toBeGreaterThan(0);
  });
});

describe('ages that show stalled work at any volume', () => {
  it('the oldest unprocessed event, the longest-due pending job per kind and running jobs whose lease expired', async () => {
    const clock = new ManualClock(Date.parse('2026-11-02T09:00:00Z'));
    const secret = newSecret();
    // No workers: nothing takes the events or the jobs, as when `work` is down.
    const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' }, { clock });
    try {
      const series = async () => await (await fetch(`${r.url}/metrics`)).text();
      const value = (text: string, name: string) => Number(new RegExp(`^${name.replace(/[{}"]/g, (m) => `\\${m}`)} ([0-9.e+-]+)$`, 'm').exec(text)?.[1]);
      let text = await series();
      expect(value(text, 'receiver_events_unprocessed_oldest_seconds')).toBe(0);
      expect(value(text, 'receiver_jobs_lease_expired')).toBe(0);
      expect(value(text, 'receiver_jobs_oldest_due_seconds{kind="fetch_result"}')).toBe(0);

      expect((await postSigned(r.url, secret, JSON.stringify(envelope()), { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
      const at = (ms: number) => new Date(ms).toISOString();
      const job = r.app.database.ingestSqlite.prepare(
        `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at, lease_expires_at)
         VALUES ('fetch_result', '{}', ?, 'default', ?, ?, 0, 25, ?, ?, ?)`,
      );
      const now = clock.now();
      job.run('evt-due', 'pending', at(now + 60_000), at(now), at(now), null); // due in a minute
      job.run('evt-held', 'running', at(now), at(now), at(now), at(now + 60_000)); // its lease ends in a minute
      clock.advance(10 * 60_000);
      text = await series();
      expect(value(text, 'receiver_events_unprocessed_oldest_seconds')).toBe(600);
      expect(value(text, 'receiver_jobs_oldest_due_seconds{kind="fetch_result"}')).toBe(540);
      expect(value(text, 'receiver_jobs_oldest_due_seconds{kind="process_event"}')).toBe(0);
      expect(value(text, 'receiver_jobs_lease_expired')).toBe(1);
    } finally {
      await r.close();
    }
  });
});

describe('METRICS_PORT', () => {
  it('has the series the runbook alerts on from the start, at 0, so a first refused delivery or failed commit raises their rate', async () => {
    const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '0' });
    try {
      const text = await (await fetch(`${r.url}/metrics`)).text();
      for (const reason of ['missing_header', 'malformed_header', 'timestamp_out_of_tolerance', 'no_valid_signature', 'body_too_large', 'body_unreadable']) {
        expect(text).toContain(`receiver_deliveries_received_total{outcome="rejected:${reason}",source="unknown"} 0`);
      }
      // database_replaced too: the file deleted under the receiver fails every delivery after it, and the first must raise the rate.
      for (const reason of ['lock_timeout', 'database_replaced', 'SQLITE_FULL', 'SQLITE_IOERR']) expect(text).toContain(`receiver_storage_errors_total{reason="${reason}"} 0`);
      // The "disk filling" alert's: a full disk, and a checkpointer thread that ended (`error`), or
      // that could not open the file (`SQLITE_CANTOPEN`: no file descriptor left, the file deleted).
      for (const code of ['SQLITE_FULL', 'SQLITE_IOERR', 'SQLITE_CANTOPEN', 'error']) expect(text).toContain(`receiver_wal_checkpoint_errors_total{code="${code}"} 0`);
      // The quarantine alert's series, for the configured source.
      expect(text).toContain('receiver_deliveries_received_total{outcome="quarantined",source="default"} 0');
      // A refused delivery counts on the series that was there.
      await fetch(`${r.url}/webhooks`, { method: 'POST', body: '{}' });
      expect(await (await fetch(`${r.url}/metrics`)).text()).toContain('receiver_deliveries_received_total{outcome="rejected:missing_header",source="unknown"} 1');
    } finally {
      await r.close();
    }
  });

  it('serves /metrics on its own port only: the webhook port answers 404 for it, and the metrics port takes no deliveries', async () => {
    const receiver = await startReceiver({ WEBHOOK_SECRET: newSecret(), METRICS_PORT: '0', WORKER_CONCURRENCY: '0' }, { listen: false });
    try {
      const { url, metricsUrl } = await receiver.app.start();
      expect(new URL(metricsUrl).port).not.toBe(new URL(url).port);
      const scraped = await fetch(metricsUrl);
      expect(scraped.status).toBe(200);
      expect(scraped.headers.get('content-type')).toMatch(/^text\/plain/);
      expect(await scraped.text()).toMatch(/^receiver_events_unprocessed 0$/m);

      const onPublic = await fetch(`${url}/metrics`);
      expect(onPublic.status).toBe(404);
      expect((await fetch(`${url}/healthz`)).status).toBe(200);

      const metricsOrigin = new URL(metricsUrl).origin;
      const delivery = await fetch(`${metricsOrigin}/webhooks`, { method: 'POST', body: '{}' });
      expect(delivery.status).toBe(404);
      expect(await delivery.json()).toMatchObject({ error: 'not_found', message: expect.stringContaining('METRICS_PORT serves GET /metrics only') });
    } finally {
      await receiver.close();
    }
  });

  it('warns at start when /metrics shares a webhook port that listens beyond this machine, and not on loopback or with METRICS_PORT', async () => {
    const said = (r: { logs: { lines: Record<string, unknown>[] } }) => r.logs.lines.filter((l) => String(l.msg).startsWith('GET /metrics is served on the webhook port'));
    // Bound on every interface for the length of the test; only 127.0.0.1 is called.
    const open = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '0', HOST: '0.0.0.0' });
    try {
      expect(said(open)).toEqual([expect.objectContaining({ level: 40, host: '0.0.0.0', msg: expect.stringContaining('set METRICS_PORT') })]);
    } finally {
      await open.close();
    }
    for (const env of [{ HOST: '127.0.0.1' }, { HOST: '0.0.0.0', METRICS_PORT: '0' }] as Record<string, string>[]) {
      const quiet = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '0', ...env });
      try {
        expect(said(quiet)).toEqual([]);
      } finally {
        await quiet.close();
      }
    }
  });

  it('refuses to start when METRICS_PORT is taken, names it, and leaves the webhook port closed', async () => {
    const taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
    const metricsPort = (taken.address() as AddressInfo).port;
    const port = await freePort();
    const receiver = await startReceiver({ WEBHOOK_SECRET: newSecret(), PORT: String(port), METRICS_PORT: String(metricsPort) }, { listen: false });
    try {
      await expect(receiver.app.start()).rejects.toThrow(`METRICS_PORT: 127.0.0.1:${metricsPort} is already in use (another receiver still running?); stop it or choose another METRICS_PORT`);
      // The webhook port was given back: something else can listen on it now.
      const again = createServer();
      await new Promise<void>((resolve, reject) => {
        again.once('error', reject);
        again.listen(port, '127.0.0.1', () => resolve());
      });
      await new Promise<void>((r) => again.close(() => r()));
    } finally {
      taken.close();
      await receiver.close();
    }
  });
});
