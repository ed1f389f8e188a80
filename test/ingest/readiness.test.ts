import BetterSqlite3 from 'better-sqlite3';
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

describe('/readyz and the schema', () => {
  it('is 503 while the database records a newer migration this build cannot run with, and ready once it does not', async () => {
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret });
    expect(await readyz(r.url)).toMatchObject({ status: 200, checks: { migrations: 'applied' } });
    // A newer build, started on the same file, applied a migration that does not declare this build compatible.
    const other = new BetterSqlite3(r.dbPath);
    try {
      const known = other.prepare('SELECT MAX(version) FROM schema_migrations').pluck().get() as number;
      other.prepare("INSERT INTO schema_migrations (version, name, applied_at, compatible_from) VALUES (?, 'from_a_newer_build', '2026-11-26T00:00:00Z', NULL)").run(known + 1);
      expect(await readyz(r.url)).toMatchObject({ status: 503, checks: { migrations: 'pending' } });
      // One that declares this build compatible does not take it out of routing.
      other.prepare('UPDATE schema_migrations SET compatible_from = ? WHERE version = ?').run(known, known + 1);
      expect(await readyz(r.url)).toMatchObject({ status: 200, checks: { migrations: 'applied' } });
    } finally {
      other.close();
    }
  });
});
