import { describe, expect, it } from 'vitest';
import { enqueue } from '../../src/queue/JobQueue.js';
import { JobKind } from '../../src/queue/jobKinds.js';
import { ManualClock } from '../../src/util/clock.js';
import { startReceiver } from '../helpers/receiver.js';
import { newSecret, signDelivery } from '../helpers/signing.js';

const at = (minute: number) => new Date(Date.UTC(2026, 10, 1, 9, minute)).toISOString();
const created = (i: number) => ({
  id: `evt_batch_${i}`,
  webhook_id: 'wh_1',
  created_at: at(i),
  event_type: 'application.created',
  payload: {
    application: { id: `app-${i}`, external_id: `ats-${i}`, status: 'applied', created_at: at(i) },
    candidate: { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' },
    job: { id: 'job-1', title: 'Engineer' },
  },
});

describe('process_event jobs run in batches (one transaction, a savepoint per event)', () => {
  it('commits the events that fold and fails only the one that cannot, on its own', async () => {
    const secret = newSecret();
    const clock = new ManualClock(Date.parse(at(30)));
    const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' }, { clock, listen: false });
    try {
      for (const i of [1, 2, 3, 4, 5]) {
        const d = signDelivery(secret, JSON.stringify(created(i)), { timestampSeconds: Math.floor(clock.now() / 1000) });
        expect((await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
      }
      // A job whose event is not stored sits between the others in the same claim.
      const db = r.app.database.db;
      await db.transaction().execute((trx) =>
        enqueue(trx, { kind: JobKind.processEvent, payload: { event_id: 'evt_missing' }, eventId: 'evt_missing', source: 'default' }, clock.now() - 1),
      );
      const q = (s: string) => r.app.database.ingestSqlite.prepare(s).all() as Record<string, unknown>[];

      expect(await r.app.worker.runUntilIdle()).toBe(6);

      expect(q('SELECT id FROM applications ORDER BY id').map((x) => x.id)).toEqual(['app-1', 'app-2', 'app-3', 'app-4', 'app-5']);
      expect(q("SELECT COUNT(*) AS n FROM event_processing WHERE state = 'settled'")).toEqual([{ n: 5 }]);
      expect(q("SELECT event_id, state FROM jobs WHERE kind = 'process_event' AND state <> 'done'")).toEqual([{ event_id: 'evt_missing', state: 'dead' }]);
      expect(q("SELECT last_error FROM jobs WHERE event_id = 'evt_missing'")[0]!.last_error).toMatch(/evt_missing is not stored/);
      expect(r.logs.raw.join('\n')).toMatch(/job dead-lettered/);
    } finally {
      await r.close();
    }
  });

  it("counts an event in its application's row even while its own fold keeps failing", async () => {
    const secret = newSecret();
    const clock = new ManualClock(Date.parse(at(30)));
    const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' }, { clock, listen: false });
    try {
      const sqlite = r.app.database.ingestSqlite;
      // The status change's own fold fails (its event_processing write is refused) on every attempt.
      sqlite.exec(
        "CREATE TRIGGER refuse_evt_moved BEFORE INSERT ON event_processing WHEN NEW.event_id = 'evt_moved' BEGIN SELECT RAISE(ABORT, 'simulated failure'); END",
      );
      const moved = {
        id: 'evt_moved',
        webhook_id: 'wh_1',
        created_at: at(5),
        event_type: 'application.status_changed',
        payload: { application: { id: 'app-1', status: 'interviewing' }, previous_status: 'applied' },
      };
      for (const e of [moved, created(1)]) {
        const d = signDelivery(secret, JSON.stringify(e), { timestampSeconds: Math.floor(clock.now() / 1000) });
        expect((await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
      }

      await r.app.worker.runUntilIdle();

      const q = (s: string) => sqlite.prepare(s).all() as Record<string, unknown>[];
      expect(q("SELECT state, last_error FROM jobs WHERE kind = 'process_event' AND event_id = 'evt_moved'")).toEqual([
        { state: 'pending', last_error: expect.stringMatching(/simulated failure/) },
      ]);
      // The creation's fold (created earlier, folded with it) sees the status change: linked before the savepoints.
      expect(q("SELECT status, status_changed_at FROM applications WHERE id = 'app-1'")).toEqual([{ status: 'interviewing', status_changed_at: at(5) }]);
      expect(q("SELECT event_id FROM application_events WHERE application_id = 'app-1' ORDER BY event_id").map((x) => x.event_id)).toEqual([
        'evt_batch_1',
        'evt_moved',
      ]);
    } finally {
      await r.close();
    }
  });
});
