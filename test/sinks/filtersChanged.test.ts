import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, signDelivery } from '../helpers/signing.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

describe("a delivery queued before its sink's filters changed", () => {
  it('is not sent after a restart with filters that leave its event out: a dead letter saying why', async () => {
    const t = tempDir('sinks-filters-');
    cleanups.push(t.cleanup);
    const dbPath = join(t.dir, 'receiver.db');
    const sinkFile = join(t.dir, 'archive.ndjson');
    const config = join(t.dir, 'config.json');
    const secret = newSecret();
    const clock = new ManualClock(Date.now());
    const start = async (events?: string[]): Promise<TestReceiver> => {
      writeFileSync(config, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: sinkFile, ...(events ? { events } : {}) }] }));
      const r = await startReceiver({ WEBHOOK_SECRET: secret, CONFIG_FILE: config, DATABASE_PATH: dbPath }, { clock, listen: false, sinks: { pollIntervalMs: 20 } });
      // close(): stops it and removes the temp folder startReceiver made for it (once).
      let closed = false;
      const close = r.close;
      r.close = async () => {
        if (closed) return;
        closed = true;
        await close();
      };
      cleanups.push(() => r.close());
      return r;
    };

    // First run: every event goes to the archive. The event settles (its delivery queued), and the
    // receiver stops before the sink's worker sends it.
    const first = await start();
    const e = envelope({ event_type: 'application.created' });
    const d = signDelivery(secret, JSON.stringify(e), { timestampSeconds: Math.floor(clock.now() / 1000) });
    expect((await first.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
    for (let i = 0; i < 20 && (await first.app.worker.runUntilIdle()) > 0; i++);
    const sqlite = first.app.database.ingestSqlite;
    expect(sqlite.prepare("SELECT state FROM deliveries WHERE sink = 'archive'").pluck().all()).toEqual(['pending']);
    await first.close();

    // Second run: the archive takes only insights now.
    const second = await start(['insights.*']);
    for (let i = 0; i < 20 && (await second.app.fanOut.runUntilIdle()) > 0; i++);
    const after = second.app.database.ingestSqlite;
    expect(after.prepare("SELECT state, last_error FROM deliveries WHERE sink = 'archive'").all()).toEqual([
      { state: 'dead', last_error: expect.stringMatching(/^not sent: the sink's events\/sources filters no longer take this event/) },
    ]);
    expect(after.prepare("SELECT state FROM jobs WHERE kind = 'sink:archive'").pluck().all()).toEqual(['dead']);
    expect(existsSync(sinkFile) ? readFileSync(sinkFile, 'utf8') : '').toBe('');
  });
});
