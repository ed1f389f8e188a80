import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { startPair, type Pair } from '../helpers/pair.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

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
    expect(text).toMatch(/receiver_hiring_api_calls_total\{resource="interview",outcome="ready"\} 1/);
    expect(text).toMatch(/receiver_job_runs_total\{kind="process_event",outcome="done"\} \d+/);
    expect(text).toMatch(/receiver_sink_deliveries_total\{sink="archive",outcome="done"\} [1-9]/);
    expect(text).toMatch(/receiver_sink_disabled\{sink="crm"\} 1/);
    expect(text).toMatch(/receiver_sink_disabled\{sink="archive"\} 0/);
    expect(text).toMatch(/receiver_sink_lag_seconds\{sink="archive"\} 0/);
    expect(text).toMatch(/receiver_sink_lag_seconds\{sink="crm"\} [0-9.]+/);
    expect(text).toMatch(/receiver_jobs\{state="done",kind="fetch_result"\} 3/);
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
