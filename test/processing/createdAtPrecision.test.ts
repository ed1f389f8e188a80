import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { newSecret, signDelivery } from '../helpers/signing.js';
import { startReceiver } from '../helpers/receiver.js';

const APP = 'a7d1c3e0-0000-4000-8000-0000000000c5';
const JOB = { id: 'job-1', title: 'Backend Engineer' };
const cand = { first_name: 'Grace', last_name: 'Hopper', email: 'grace@example.com' };
const at = (minute: number) => new Date(Date.UTC(2026, 10, 1, 9, minute)).toISOString();
const application = (status: string, createdAt = at(0)) => ({ id: APP, external_id: 'ats-42', status, created_at: createdAt });
const change = (id: string, createdAt: string, from: string, to: string, appCreatedAt = at(0)) => ({
  id, created_at: createdAt, webhook_id: 'wh_1', event_type: 'application.status_changed',
  payload: { application: application(to, appCreatedAt), candidate: cand, job: JOB, previous_status: from },
});
const created = { id: 'c0', created_at: at(0), webhook_id: 'wh_1', event_type: 'application.created', payload: { application: application('applied'), candidate: cand, job: JOB } };

/** The application row after the events are delivered (over HTTP on 127.0.0.1) and processed, in each of the orders. */
async function finalRows(events: object[], orders: number[][]) {
  const rows: unknown[] = [];
  for (const order of orders) {
    const secret = newSecret();
    const clock = new ManualClock(Date.parse(at(10)));
    const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' }, { clock });
    try {
      for (const i of order) {
        const d = signDelivery(secret, JSON.stringify(events[i]), { timestampSeconds: Math.floor(clock.now() / 1000) });
        expect((await fetch(`${r.url}/webhooks`, { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
      }
      await r.app.worker.runUntilIdle();
      rows.push(r.app.database.ingestSqlite.prepare('SELECT status, status_changed_at, created_at FROM applications').get());
    } finally {
      await r.close();
    }
  }
  return rows;
}

describe('created_at with more than millisecond precision', () => {
  it('orders events microseconds apart by their instants, not by id', async () => {
    // Two changes from "applied" within one millisecond (no previous_status chain between them):
    // the later one (…123900Z) wins. Its id sorts first, so a tie broken by id picks the other.
    const events = [created, change('b-early', '2026-11-01T09:01:00.123100Z', 'applied', 'screened'), change('a-late', '2026-11-01T09:01:00.123900Z', 'applied', 'rejected')];
    const rows = await finalRows(events, [[0, 1, 2], [0, 2, 1]]);
    for (const row of rows) expect(row).toEqual({ status: 'rejected', status_changed_at: '2026-11-01T09:01:00.123Z', created_at: at(0) });
  });
});

describe('created_at that names a day the month does not have', () => {
  it('is not a date: the event sorts by its arrival, and the application keeps no created_at from it', async () => {
    // 31 November does not exist; JavaScript's Date.parse reads it as 1 December, which put this
    // change after a real later one and stored "2026-12-01T…" as when the application was made.
    // The application's own created_at is 30 February in every snapshot (Date.parse: 2 March).
    const notADay = '2026-02-30T08:00:00Z';
    const events = [
      { ...created, payload: { ...created.payload, application: application('applied', notADay) } },
      change('x1', '2026-11-31T09:05:00Z', 'applied', 'screened', notADay),
      change('x2', at(20), 'screened', 'interviewed', notADay),
    ];
    const rows = await finalRows(events, [[0, 1, 2], [2, 1, 0]]);
    // x1 arrived at(10) (the receiver's clock), before x2's at(20).
    for (const row of rows) expect(row).toEqual({ status: 'interviewed', status_changed_at: at(20), created_at: null });
  });
});
