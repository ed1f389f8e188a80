import type BetterSqlite3 from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { envelope, newSecret, signDelivery } from '../helpers/signing.js';
import { startReceiverBesideOtherConnection, type TestReceiver } from '../helpers/receiver.js';
import { waitFor } from '../helpers/waitFor.js';

// Another connection on the same file (as a CLI operation or a backup in another process would)
// holds the write lock. Deliveries wait WRITE_TIMEOUT_MS for it, then are answered 503: a load
// balancer must stop routing them here then, and not before (a short hold is waited out).

const secret = newSecret();
const WRITE_TIMEOUT_MS = 300;
let r: TestReceiver;
let clock: ManualClock;
let other: BetterSqlite3.Database;
let close: () => Promise<void>;
beforeEach(async () => {
  clock = new ManualClock(Date.now());
  ({ r, other, close } = await startReceiverBesideOtherConnection({ WEBHOOK_SECRET: secret, WRITE_TIMEOUT_MS: String(WRITE_TIMEOUT_MS) }, clock));
});
afterEach(() => close());

const readyz = async () => {
  const res = await fetch(`${r.url}/readyz`);
  return { status: res.status, writable: ((await res.json()) as { checks: { writable: string } }).checks.writable };
};
const post = (env: Record<string, unknown>) => fetch(`${r.url}/webhooks`, { method: 'POST', ...signDelivery(secret, JSON.stringify(env)) });

describe('/readyz while another connection holds the write lock', () => {
  it('ready during a short hold; not ready once held as long as a delivery waits; ready again when let go', async () => {
    other.exec('BEGIN IMMEDIATE');
    // Just taken: deliveries would wait it out.
    expect(await readyz()).toEqual({ status: 200, writable: 'yes (write lock busy)' });
    clock.advance(WRITE_TIMEOUT_MS - 1);
    expect((await readyz()).status).toBe(200);
    clock.advance(1);
    const held = await readyz();
    expect(held.status).toBe(503);
    expect(held.writable).toBe(`no (the write lock has been held by another connection for 0.3 s; deliveries wait ${WRITE_TIMEOUT_MS} ms for it, then are answered 503)`);
    other.exec('ROLLBACK');
    // Recovers by itself: the probe takes the lock.
    expect(await readyz()).toEqual({ status: 200, writable: 'yes' });
    // And a new hold starts the count afresh.
    other.exec('BEGIN IMMEDIATE');
    expect((await readyz()).status).toBe(200);
  });

  it('two holds with a commit between them are two holds, not one long one (no traffic between the probes)', async () => {
    other.exec('CREATE TABLE IF NOT EXISTS test_hold (x)');
    other.exec('BEGIN IMMEDIATE');
    expect(await readyz()).toEqual({ status: 200, writable: 'yes (write lock busy)' });
    other.exec('INSERT INTO test_hold VALUES (1)');
    other.exec('COMMIT');
    clock.advance(WRITE_TIMEOUT_MS);
    // Another operation takes the lock just before the next probe: held for moments, not 0.3 s.
    other.exec('BEGIN IMMEDIATE');
    expect(await readyz()).toEqual({ status: 200, writable: 'yes (write lock busy)' });
    // This one does last: counted from the probe that first saw it.
    clock.advance(WRITE_TIMEOUT_MS);
    expect((await readyz()).status).toBe(503);
  });

  it('not ready while deliveries are being refused for the lock; a commit makes it ready again', async () => {
    other.exec('BEGIN IMMEDIATE');
    const env = envelope();
    const answer = post(env);
    // Once the committer found the lock held (it retries on 1-4 ms timers), its wait passes its bound.
    await waitFor(() => r.logs.lines.some((l) => l.msg === 'ingest write lock busy; retrying'), 'the committer finding the lock held', 5_000);
    clock.advance(WRITE_TIMEOUT_MS);
    const refused = await answer;
    expect(refused.status).toBe(503);
    expect((await readyz()).status).toBe(503);
    other.exec('ROLLBACK');
    expect((await post(env)).status).toBe(200);
    expect(await readyz()).toEqual({ status: 200, writable: 'yes' });
  });

  it('not ready while another connection commits and takes the lock again at once, leaving deliveries no moment to commit', async () => {
    // A program writing back to back (one write transaction after another, as a bulk import in a
    // loop does): each probe finds the lock held, with a commit since the last one, yet every
    // delivery waits WRITE_TIMEOUT_MS and is answered 503. Those commits are not a gap anyone got in.
    other.exec('CREATE TABLE IF NOT EXISTS test_hold (x)');
    other.exec('BEGIN IMMEDIATE');
    for (let round = 0; round < 3; round++) {
      const answer = post(envelope());
      const before = r.logs.lines.filter((l) => l.msg === 'ingest write lock busy; retrying').length;
      await waitFor(() => r.logs.lines.filter((l) => l.msg === 'ingest write lock busy; retrying').length > before, `round ${round}: the committer finding the lock held`, 5_000);
      expect((await readyz()).writable).toMatch(/^(yes \(write lock busy\)|no \(the write lock has been held)/);
      // Commits, and takes the lock again in the same turn: the receiver's committer never sees it free.
      other.exec(`INSERT INTO test_hold VALUES (${round})`);
      other.exec('COMMIT');
      other.exec('BEGIN IMMEDIATE');
      clock.advance(WRITE_TIMEOUT_MS);
      expect((await answer).status).toBe(503);
      const ready = await readyz();
      expect(ready.status).toBe(503);
      expect(ready.writable).toMatch(/^no \(the write lock has been held by another connection for /);
    }
    other.exec('COMMIT');
    // Let go: the probe takes the lock, and deliveries commit again.
    expect(await readyz()).toEqual({ status: 200, writable: 'yes' });
    expect((await post(envelope())).status).toBe(200);
  });
});
