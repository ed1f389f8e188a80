import { statfsSync } from 'node:fs';
import { dirname } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { newSecret } from '../helpers/signing.js';
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
});
