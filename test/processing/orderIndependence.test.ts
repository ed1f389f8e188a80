import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { newSecret, signDelivery } from '../helpers/signing.js';
import { startReceiver } from '../helpers/receiver.js';

const APP = 'a7d1c3e0-0000-4000-8000-000000000001';
const JOB = { id: 'job-1', title: 'Backend Engineer' };
const cand = { first_name: 'Grace', last_name: 'Hopper', email: 'grace@example.com' };
const at = (minute: number) => new Date(Date.UTC(2026, 10, 1, 9, minute)).toISOString();
const application = (status: string) => ({ id: APP, external_id: 'ats-42', status, created_at: at(0) });

// One application's life, spec 6.4 shapes: created, three transitions, an interview, then deletion.
const EVENTS = [
  { id: 'e1', created_at: at(0), event_type: 'application.created', payload: { application: application('applied'), candidate: cand, job: JOB } },
  { id: 'e2', created_at: at(1), event_type: 'application.status_changed', payload: { application: application('screened'), candidate: cand, job: JOB, previous_status: 'applied' } },
  { id: 'e3', created_at: at(2), event_type: 'application.status_changed', payload: { application: application('interviewed'), candidate: cand, job: JOB, previous_status: 'screened' } },
  {
    id: 'e4', created_at: at(3), event_type: 'interview.completed',
    payload: {
      application: application('interviewed'), job: JOB,
      candidate: { ...cand, phone_number: '+15555550100' },
      interview: { id: 'iv-1', completed_at: at(3), result: { overall_score: 2.5, is_eligible: false, summary: 's', strengths: [], weaknesses: [], red_flags: [] } },
    },
  },
  { id: 'e5', created_at: at(4), event_type: 'application.status_changed', payload: { application: { ...application('hired'), external_id: 'ats-42-b' }, candidate: cand, job: JOB, previous_status: 'interviewed' } },
  { id: 'e6', created_at: at(5), event_type: 'job_application.deleted', payload: { id: APP, status: 'hired', created_at: at(0), candidate: cand, job: JOB } },
].map((e) => ({ ...e, webhook_id: 'wh_1' }));

async function finalTables(order: number[]) {
  const secret = newSecret();
  const clock = new ManualClock(Date.parse(at(10)));
  const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' }, { clock, listen: false });
  try {
    for (const i of order) {
      const d = signDelivery(secret, JSON.stringify(EVENTS[i]), { timestampSeconds: Math.floor(clock.now() / 1000) });
      const res = await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body });
      expect(res.status).toBe(200);
      // Process between some deliveries, as a running worker would.
      if (i % 2 === 0) await r.app.worker.runUntilIdle();
    }
    await r.app.worker.runUntilIdle();
    const db = r.app.database.ingestSqlite;
    return {
      application: db.prepare('SELECT * FROM applications').all().map((row) => ({ ...(row as object), first_seen_at: 0, updated_at: 0 })),
      history: db.prepare('SELECT event_id, application_id, from_status, to_status, changed_at FROM application_status_history ORDER BY event_id').all(),
    };
  } finally {
    await r.close();
  }
}

describe('application state is independent of delivery order (spec 6.1: at-least-once, unordered)', () => {
  it('gives the expected picture in order', async () => {
    const t = await finalTables([0, 1, 2, 3, 4, 5]);
    expect(t.application).toEqual([
      expect.objectContaining({
        id: APP, status: 'hired', status_changed_at: at(5), external_id: 'ats-42-b', job_title: 'Backend Engineer',
        candidate_phone: '+15555550100', needs_review: 1, deleted_at: at(5), created_at: at(0),
      }),
    ]);
    expect(t.history.map((h) => (h as { to_status: string }).to_status)).toEqual(['screened', 'interviewed', 'hired']);
  });

  it('any permutation, with duplicates, yields the same final tables', async () => {
    const reference = await finalTables([0, 1, 2, 3, 4, 5]);
    await fc.assert(
      fc.asyncProperty(
        fc.shuffledSubarray([0, 1, 2, 3, 4, 5], { minLength: 6, maxLength: 6 }),
        fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 4 }),
        async (perm, dupes) => {
          const order = [...perm];
          dupes.forEach((d, k) => order.splice((k * 3) % (order.length + 1), 0, d));
          expect(await finalTables(order)).toEqual(reference);
        },
      ),
      { numRuns: 15 },
    );
  });

  it('a deletion is never undone by an older event arriving later', async () => {
    const t = await finalTables([5, 0, 1]);
    expect(t.application[0]).toMatchObject({ deleted_at: at(5), status: 'hired' });
  });
});

describe('status changes at the same instant', () => {
  it('follow their previous_status chain whatever the arrival order, including a branch', async () => {
    const t = at(30);
    const change = (id: string, from: string, to: string) => ({
      id, created_at: t, webhook_id: 'wh_1', event_type: 'application.status_changed',
      payload: { application: application(to), candidate: cand, job: JOB, previous_status: from },
    });
    // Q→X, X→A, Y→A, A→B all at one instant; "e0" sorts first by id but is the last step.
    const burst = [change('e3', 'Q', 'X'), change('e2', 'X', 'A'), change('e1', 'Y', 'A'), change('e0', 'A', 'B')];
    const finals = new Set<string>();
    for (const order of [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1], [1, 3, 0, 2]]) {
      const secret = newSecret();
      const clock = new ManualClock(Date.parse(at(40)));
      const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' }, { clock, listen: false });
      try {
        for (const i of order) {
          const d = signDelivery(secret, JSON.stringify(burst[i]), { timestampSeconds: Math.floor(clock.now() / 1000) });
          await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body });
        }
        await r.app.worker.runUntilIdle();
        finals.add(r.app.database.ingestSqlite.prepare('SELECT status FROM applications').pluck().get() as string);
      } finally {
        await r.close();
      }
    }
    expect([...finals]).toEqual(['B']);
  });
});

describe('created_at as senders write it', () => {
  it('an offset is stored as UTC, no offset means UTC, and a created_at that is not a date sorts by arrival, not as 1970', async () => {
    // Not UTC, or "no offset means UTC" could not fail on a UTC machine.
    const tz = process.env.TZ;
    process.env.TZ = 'Asia/Tokyo';
    const secret = newSecret();
    const clock = new ManualClock(Date.parse(at(10)));
    const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' }, { clock, listen: false });
    try {
      const events = [
        { id: 'c1', created_at: at(0), event_type: 'application.created', payload: { application: application('applied'), candidate: cand, job: JOB } },
        // 11:01 at +02:00 is 09:01 UTC, at(1).
        { id: 'c2', created_at: '2026-11-01T11:01:00+02:00', event_type: 'application.status_changed', payload: { application: application('screened'), candidate: cand, job: JOB, previous_status: 'applied' } },
        // No offset: UTC (JavaScript alone would read it in the machine's local time).
        { id: 'c2b', created_at: '2026-11-01T09:02:00', event_type: 'application.status_changed', payload: { application: application('interviewed'), candidate: cand, job: JOB, previous_status: 'screened' } },
        { id: 'c3', created_at: 'yesterday', event_type: 'application.status_changed', payload: { application: application('rejected'), candidate: cand, job: JOB, previous_status: 'interviewed' } },
        // The application's own created_at with an offset, in the latest snapshot (of a type unknown to us; after c3, which sorts at its arrival, at(10)): stored as UTC too (10:00 at +01:00 is 09:00Z, at(0)).
        { id: 'c4', created_at: at(30), event_type: 'application.tagged', payload: { application: { ...application('rejected'), created_at: '2026-11-01T10:00:00+01:00' }, candidate: cand, job: JOB } },
        // A space and no offset: UTC too, not the machine's zone (Tokyo here). Then one that is no date at all: left out.
        { id: 'c5', created_at: at(35), event_type: 'application.tagged', payload: { application: { ...application('rejected'), created_at: '2026-11-01 09:00:00' }, candidate: cand, job: JOB } },
        { id: 'c6', created_at: at(40), event_type: 'application.tagged', payload: { application: { ...application('rejected'), created_at: '1' }, candidate: cand, job: JOB } },
      ];
      for (const e of events) {
        const d = signDelivery(secret, JSON.stringify({ ...e, webhook_id: 'wh_1' }), { timestampSeconds: Math.floor(clock.now() / 1000) });
        expect((await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
      }
      await r.app.worker.runUntilIdle();
      const db = r.app.database.ingestSqlite;
      const received = db.prepare("SELECT received_at FROM events WHERE id = 'c3'").pluck().get();
      expect(db.prepare('SELECT status, status_changed_at, created_at FROM applications').get()).toEqual({ status: 'rejected', status_changed_at: received, created_at: at(0) });
      expect(db.prepare('SELECT event_id, changed_at FROM application_status_history ORDER BY changed_at').all()).toEqual([
        { event_id: 'c2', changed_at: at(1) },
        { event_id: 'c2b', changed_at: at(2) },
        { event_id: 'c3', changed_at: received },
      ]);
    } finally {
      await r.close();
      if (tz === undefined) delete process.env.TZ;
      else process.env.TZ = tz;
    }
  });
});
