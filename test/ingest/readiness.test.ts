import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';

// /readyz over real HTTP on a real database file: when a load balancer must stop routing
// deliveries here, and when it may start again (mutation audit).

const secret = newSecret();
let r: TestReceiver | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

const readyz = async (url: string) => {
  const res = await fetch(`${url}/readyz`);
  return { status: res.status, checks: ((await res.json()) as { checks: Record<string, string> }).checks };
};

describe('/readyz after a delivery failed for want of storage', () => {
  it('is 503 for 30 s by the injected clock, then ready again (an instance out of routing gets no delivery that could commit)', async () => {
    const clock = new ManualClock(Date.now());
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret }, { clock });
    const ingest = r.app.database.ingestSqlite;
    ingest.pragma(`max_page_count = ${ingest.pragma('page_count', { simple: true }) as number}`);
    const res = await postSigned(r.url, secret, JSON.stringify(envelope({ padding: 'p'.repeat(20_000) })));
    expect(res.status).toBe(503);
    expect(await readyz(r.url)).toMatchObject({ status: 503, checks: { writable: "no (the last delivery's commit failed: SQLITE_FULL, 0 s ago)" } });
    clock.advance(29_999);
    expect((await readyz(r.url)).status).toBe(503);
    clock.advance(1);
    expect(await readyz(r.url)).toMatchObject({ status: 200, checks: { writable: 'yes' } });
  });
});
