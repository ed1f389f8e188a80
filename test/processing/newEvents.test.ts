import { describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';
import { newSecret, signDelivery } from '../helpers/signing.js';
import { waitFor } from '../helpers/waitFor.js';

const at = (minute: number) => new Date(Date.UTC(2026, 10, 1, 9, minute)).toISOString();
const created = (i: number) => ({
  id: `evt_new_${i}`,
  webhook_id: 'wh_1',
  created_at: at(i),
  event_type: 'application.created',
  payload: { application: { id: `app-${i}`, external_id: null, status: 'applied', created_at: at(i) }, job: { id: 'job-1', title: 'Engineer' } },
});

interface Setup {
  r: TestReceiver;
  clock: ManualClock;
  post: (events: Record<string, unknown>[]) => Promise<void>;
  q: (s: string) => Record<string, unknown>[];
}

async function receiverWith(events: Record<string, unknown>[]): Promise<Setup> {
  const secret = newSecret();
  const clock = new ManualClock(Date.parse(at(30)));
  // WORKER_CONCURRENCY=0: nothing runs by itself; the test drives processing with runUntilIdle.
  const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '0' }, { clock, listen: false });
  const post = async (list: Record<string, unknown>[]) => {
    for (const e of list) {
      const d = signDelivery(secret, JSON.stringify(e), { timestampSeconds: Math.floor(clock.now() / 1000) });
      expect((await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
    }
  };
  await post(events);
  return { r, clock, post, q: (s: string) => r.app.database.ingestSqlite.prepare(s).all() as Record<string, unknown>[] };
}

const cursor = (q: (s: string) => Record<string, unknown>[]) => q('SELECT last_event_rowid AS at FROM processing_cursor')[0]!.at;

describe('new events are folded from the processing cursor, with no job per event', () => {
  it('folds every stored event once, in the order stored, and moves the cursor past them', async () => {
    const { r, q } = await receiverWith([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11].map(created));
    try {
      expect(q('SELECT COUNT(*) AS n FROM jobs')).toEqual([{ n: 0 }]);
      // One batch (8): the first eight stored, and the cursor just past them.
      expect(await r.app.worker.runUntilIdle(8)).toBe(8);
      expect(q('SELECT event_id FROM event_processing ORDER BY event_id').map((x) => x.event_id)).toEqual(
        [1, 2, 3, 4, 5, 6, 7, 8].map((i) => `evt_new_${i}`).sort(),
      );
      expect(cursor(q)).toBe(q("SELECT rowid AS r FROM events WHERE id = 'evt_new_8'")[0]!.r);
      expect(await r.app.worker.runUntilIdle()).toBe(3);
      expect(q("SELECT COUNT(*) AS n FROM event_processing WHERE state = 'settled'")).toEqual([{ n: 11 }]);
      expect(q('SELECT COUNT(*) AS n FROM applications')).toEqual([{ n: 11 }]);
      expect(cursor(q)).toBe(q('SELECT MAX(rowid) AS m FROM events')[0]!.m);
      // Nothing is left, and nothing was queued to do it.
      expect(await r.app.worker.runUntilIdle()).toBe(0);
      expect(q('SELECT COUNT(*) AS n FROM jobs')).toEqual([{ n: 0 }]);
      const metrics = await (await r.app.app.request('/metrics')).text();
      expect(metrics).toMatch(/receiver_job_runs_total\{kind="process_event",outcome="done"\} 11/);
      expect(metrics).toMatch(/receiver_events_unprocessed 0/);
    } finally {
      await r.close();
    }
  });

  it('reports the events processing has not taken yet', async () => {
    const { r } = await receiverWith([1, 2, 3].map(created));
    try {
      expect(await (await r.app.app.request('/metrics')).text()).toMatch(/receiver_events_unprocessed 3/);
    } finally {
      await r.close();
    }
  });

  it('a result event that names no application settles without a result, and says so in the log', async () => {
    const orphan = { id: 'evt_orphan', webhook_id: 'wh_1', created_at: at(1), event_type: 'interview.completed', payload: { interview: { id: 'int-1' } } };
    const { r, q } = await receiverWith([orphan]);
    try {
      await r.app.worker.runUntilIdle();
      expect(q("SELECT event_id FROM event_processing WHERE event_id = 'evt_orphan'")).toHaveLength(1);
      expect(r.logs.lines.filter((l) => l.event_id === 'evt_orphan' && l.level === 40)).toEqual([
        expect.objectContaining({ event_type: 'interview.completed', resource: 'interview', msg: 'result event names no application: its message is sent without the result' }),
      ]);
    } finally {
      await r.close();
    }
  });

  it('hands a fold that fails to the queue as a process_event job, backed off, and moves on; the job folds it later', async () => {
    const { r, clock, post, q } = await receiverWith([]);
    try {
      r.app.database.ingestSqlite.exec(
        "CREATE TRIGGER refuse_evt_new_2 BEFORE INSERT ON event_processing WHEN NEW.event_id = 'evt_new_2' BEGIN SELECT RAISE(ABORT, 'simulated failure'); END",
      );
      await post([1, 2, 3].map(created));

      expect(await r.app.worker.runUntilIdle()).toBe(3);
      // The other two committed; the failed one is a job whose first attempt is spent.
      expect(q("SELECT event_id FROM event_processing WHERE state = 'settled' ORDER BY event_id").map((x) => x.event_id)).toEqual(['evt_new_1', 'evt_new_3']);
      const [job] = q("SELECT kind, event_id, state, attempts, run_at, last_error FROM jobs WHERE kind = 'process_event'");
      expect(job).toMatchObject({ kind: 'process_event', event_id: 'evt_new_2', state: 'pending', attempts: 1, last_error: expect.stringMatching(/simulated failure/) });
      const retryIn = Date.parse(job!.run_at as string) - clock.now();
      expect(retryIn).toBeGreaterThanOrEqual(2_500); // JOB_BACKOFF: about 5 s, with jitter
      expect(retryIn).toBeLessThanOrEqual(5_000);
      expect(r.logs.lines).toContainEqual(expect.objectContaining({ msg: 'job failed; will retry', kind: 'process_event', event_id: 'evt_new_2', attempt: 1 }));
      expect(cursor(q)).toBe(q('SELECT MAX(rowid) AS m FROM events')[0]!.m);

      // Not due yet: nothing runs. Once due, and the cause gone, the job folds it.
      expect(await r.app.worker.runUntilIdle()).toBe(0);
      r.app.database.ingestSqlite.exec('DROP TRIGGER refuse_evt_new_2');
      clock.advance(5_001);
      expect(await r.app.worker.runUntilIdle()).toBe(1);
      expect(q("SELECT state FROM jobs WHERE event_id = 'evt_new_2'")).toEqual([{ state: 'done' }]);
      expect(q("SELECT COUNT(*) AS n FROM event_processing WHERE state = 'settled'")).toEqual([{ n: 3 }]);
    } finally {
      await r.close();
    }
  });

  it('keeps the cursor, the folds and the failure jobs together: a transaction that fails leaves all three as they were', async () => {
    const { r, q } = await receiverWith([1, 2].map(created));
    try {
      const sqlite = r.app.database.ingestSqlite;
      sqlite.exec("CREATE TRIGGER refuse_evt_new_1 BEFORE INSERT ON event_processing WHEN NEW.event_id = 'evt_new_1' BEGIN SELECT RAISE(ABORT, 'simulated failure'); END");
      sqlite.exec("CREATE TRIGGER refuse_cursor BEFORE UPDATE ON processing_cursor BEGIN SELECT RAISE(ABORT, 'cursor refused'); END");
      await expect(r.app.worker.runUntilIdle()).rejects.toThrow(/cursor refused/);
      expect(cursor(q)).toBe(0);
      expect(q('SELECT COUNT(*) AS n FROM applications')).toEqual([{ n: 0 }]);
      expect(q('SELECT COUNT(*) AS n FROM jobs')).toEqual([{ n: 0 }]);

      sqlite.exec('DROP TRIGGER refuse_cursor; DROP TRIGGER refuse_evt_new_1');
      expect(await r.app.worker.runUntilIdle()).toBe(2);
      expect(q("SELECT event_id FROM event_processing WHERE state = 'settled' ORDER BY event_id").map((x) => x.event_id)).toEqual(['evt_new_1', 'evt_new_2']);
      expect(q('SELECT COUNT(*) AS n FROM jobs')).toEqual([{ n: 0 }]);
    } finally {
      await r.close();
    }
  });

  it('loses no event when the disk fills mid-fold (the fold\'s own SQLITE_FULL): the batches before are whole, the failed one is left past the cursor; every event is folded once space returns', async () => {
    // Enough events that their folds need new pages (a few fit in the tables' empty root pages).
    const N = 40;
    const ns = Array.from({ length: N }, (_, i) => i + 1);
    const { r, post, q } = await receiverWith(ns.map(created));
    try {
      const ingest = r.app.database.ingestSqlite;
      const processing = r.app.database.sqlite;
      // max_page_count is per connection: the processing connection alone is full.
      processing.pragma(`max_page_count = ${processing.pragma('page_count', { simple: true }) as number}`);

      await expect(r.app.worker.runUntilIdle()).rejects.toThrow(/full/i);
      // Nothing half-written: the batches folded before the disk filled are committed whole, the one
      // that failed left its events past the cursor, unfolded, with no job.
      const at = cursor(q) as number;
      expect(at).toBeLessThan(N);
      const taken = q(`SELECT e.rowid AS seq, p.event_id AS folded, j.id AS job FROM events e
        LEFT JOIN event_processing p ON p.event_id = e.id LEFT JOIN jobs j ON j.event_id = e.id ORDER BY e.rowid`);
      expect(taken).toHaveLength(N);
      for (const t of taken) {
        if ((t.seq as number) <= at) expect(t.folded !== null || t.job !== null).toBe(true);
        else expect(t).toMatchObject({ folded: null, job: null });
      }
      expect(q('SELECT COUNT(*) AS n FROM applications')).toEqual(q(`SELECT COUNT(*) AS n FROM event_processing`));
      expect(ingest.pragma('quick_check', { simple: true })).toBe('ok');
      // Still serving: a delivery is stored on the ingest connection, which has room.
      await post([created(N + 1)]);

      processing.pragma('max_page_count = 1073741823');
      expect(await r.app.worker.runUntilIdle()).toBe(N + 1 - at);
      expect(q("SELECT event_id FROM event_processing WHERE state = 'settled' ORDER BY event_id").map((x) => x.event_id)).toEqual([...ns, N + 1].map((i) => `evt_new_${i}`).sort());
      expect(q("SELECT COUNT(*) AS n FROM jobs WHERE state <> 'done'")).toEqual([{ n: 0 }]);
      expect(q('SELECT COUNT(*) AS n FROM applications')).toEqual([{ n: N + 1 }]);
      expect(cursor(q)).toBe(q('SELECT MAX(rowid) AS m FROM events')[0]!.m);
    } finally {
      await r.close();
    }
  });

  it('takes an event stored after the newest ones were deleted: a rowid at or below the cursor is never reused', async () => {
    const { r, post, q } = await receiverWith([1, 2, 3].map(created));
    try {
      expect(await r.app.worker.runUntilIdle()).toBe(3);
      // An operator removes the newest events (processed already); SQLite alone would give the next one rowid 2.
      r.app.database.ingestSqlite.prepare("DELETE FROM events WHERE id IN ('evt_new_2', 'evt_new_3')").run();
      await post([created(4)]);
      expect(await (await r.app.app.request('/metrics')).text()).toMatch(/receiver_events_unprocessed 1/);
      expect(await r.app.worker.runUntilIdle()).toBe(1);
      expect(q("SELECT state FROM event_processing WHERE event_id = 'evt_new_4'")).toEqual([{ state: 'settled' }]);
    } finally {
      await r.close();
    }
  });

  it('keeps running process_event jobs while taking new events fails, and takes them once it works again', async () => {
    const secret = newSecret();
    // Real timers: the workers' own loop runs (started below); the test waits on what it does, with a deadline.
    const r = await startReceiver({ WEBHOOK_SECRET: secret, WORKER_CONCURRENCY: '1' }, { listen: false });
    try {
      const sqlite = r.app.database.ingestSqlite;
      const q = (s: string) => sqlite.prepare(s).all() as Record<string, unknown>[];
      const post = async (e: Record<string, unknown>) => {
        const d = signDelivery(secret, JSON.stringify(e));
        expect((await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
      };
      await post(created(1));
      sqlite.exec("CREATE TRIGGER refuse_cursor BEFORE UPDATE ON processing_cursor BEGIN SELECT RAISE(ABORT, 'cursor refused'); END");
      // A replayed event, due now, waits in the queue behind the failing source.
      sqlite
        .prepare(
          `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at)
           VALUES ('process_event', '{"event_id":"evt_new_1"}', 'evt_new_1', 'default', 'pending', ?, 0, 25, ?, ?)`,
        )
        .run(new Date(0).toISOString(), new Date().toISOString(), new Date().toISOString());
      await r.app.startWorkers();
      await waitFor(() => q("SELECT state FROM jobs WHERE kind = 'process_event'")[0]?.state === 'done', 'the process_event job to run');
      expect(cursor(q)).toBe(0);
      expect(r.logs.lines).toContainEqual(expect.objectContaining({ msg: 'processing new events failed; will retry', err: expect.stringMatching(/cursor refused/) }));

      sqlite.exec('DROP TRIGGER refuse_cursor');
      await post(created(2));
      await waitFor(() => cursor(q) === q('SELECT MAX(rowid) AS m FROM events')[0]!.m, 'the cursor to pass both events');
      expect(q("SELECT event_id FROM event_processing WHERE state = 'settled' ORDER BY event_id").map((x) => x.event_id)).toEqual(['evt_new_1', 'evt_new_2']);
    } finally {
      await r.close();
    }
  });
});
