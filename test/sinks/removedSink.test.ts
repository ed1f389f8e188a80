import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type OpenDatabase } from '../../src/db/openDatabase.js';
import { createLogger } from '../../src/observability/logger.js';
import { enqueue, JobQueue } from '../../src/queue/JobQueue.js';
import { FanOut } from '../../src/sinks/FanOut.js';
import { ManualClock } from '../../src/util/clock.js';
import { tempDir } from '../helpers/receiver.js';
import { startHarness } from './helpers.js';

let database: OpenDatabase | undefined;
let cleanup = () => {};
afterEach(async () => {
  await database?.close();
  cleanup();
});

describe('a sink removed from the configuration', () => {
  it('turns its queued deliveries into dead letters naming the reason, leaving other sinks alone', async () => {
    const t = tempDir();
    cleanup = t.cleanup;
    database = openDatabase(join(t.dir, 'r.db'));
    const clock = new ManualClock(Date.parse('2026-11-02T00:00:00Z'));
    const now = new Date(clock.now()).toISOString();
    const db = database.db;
    for (const sink of ['gone', 'kept']) {
      await enqueue(db, { kind: `sink:${sink}`, payload: { event_id: 'e1', sink }, eventId: 'e1', source: `sink:${sink}` }, clock.now());
      await db
        .insertInto('deliveries')
        .values({ event_id: 'e1', sink, message_id: `msg_${sink}`, state: 'pending', attempts: 0, queued_at: now, created_at: now, updated_at: now })
        .execute();
    }
    const fanOut = new FanOut({
      db,
      queue: new JobQueue(db, clock),
      clock,
      logger: createLogger('silent'),
      sinks: [{ name: 'kept', type: 'stdout', events: null, sources: null, concurrency: 1, maxAttempts: 25, target: 'stdout', options: {} }],
    });
    await fanOut.reconcile();
    const jobs = await db.selectFrom('jobs').select(['kind', 'state', 'last_error']).orderBy('kind').execute();
    expect(jobs).toEqual([
      { kind: 'sink:gone', state: 'dead', last_error: 'sink is no longer configured' },
      { kind: 'sink:kept', state: 'pending', last_error: null },
    ]);
    const deliveries = await db.selectFrom('deliveries').select(['sink', 'state']).orderBy('sink').execute();
    expect(deliveries).toEqual([
      { sink: 'gone', state: 'dead' },
      { sink: 'kept', state: 'pending' },
    ]);
  });
});

describe('a sink whose max_attempts changed in the configuration', () => {
  it('gives the new max_attempts to its deliveries already waiting, at start; its dead letters and other sinks\' jobs keep theirs', async () => {
    const t = tempDir();
    cleanup = t.cleanup;
    database = openDatabase(join(t.dir, 'r.db'));
    const clock = new ManualClock(Date.parse('2026-11-02T00:00:00Z'));
    const db = database.db;
    const queued = async (sink: string, eventId: string, state: 'pending' | 'dead') => {
      const id = await enqueue(db, { kind: `sink:${sink}`, payload: { event_id: eventId, sink }, eventId, source: `sink:${sink}`, maxAttempts: 3 }, clock.now());
      if (state === 'dead') await db.updateTable('jobs').set({ state: 'dead', attempts: 3 }).where('id', '=', id).execute();
      return id;
    };
    // A consumer's outage: the deliveries were queued with 3 attempts, two spent on the first.
    const waiting = await queued('crm', 'e1', 'pending');
    await db.updateTable('jobs').set({ attempts: 2 }).where('id', '=', waiting).execute();
    const waiting2 = await queued('crm', 'e2', 'pending');
    const dead = await queued('crm', 'e3', 'dead');
    const other = await queued('archive', 'e1', 'pending');
    const lines: Record<string, unknown>[] = [];
    const logger = createLogger('info', { write: (l: string) => lines.push(JSON.parse(l) as Record<string, unknown>) });
    const fanOut = new FanOut({
      db,
      queue: new JobQueue(db, clock),
      clock,
      logger,
      sinks: [
        { name: 'crm', type: 'stdout', events: null, sources: null, concurrency: 1, maxAttempts: 50, target: 'stdout', options: {} },
        { name: 'archive', type: 'stdout', events: null, sources: null, concurrency: 1, maxAttempts: 3, target: 'stdout', options: {} },
      ],
    });
    await fanOut.reconcile();
    const of = async (id: number) => db.selectFrom('jobs').select(['state', 'attempts', 'max_attempts']).where('id', '=', id).executeTakeFirstOrThrow();
    expect(await of(waiting)).toEqual({ state: 'pending', attempts: 2, max_attempts: 50 });
    expect(await of(waiting2)).toEqual({ state: 'pending', attempts: 0, max_attempts: 50 });
    // A dead letter is run again by an operator's retry, not by a start.
    expect(await of(dead)).toEqual({ state: 'dead', attempts: 3, max_attempts: 3 });
    expect(await of(other)).toEqual({ state: 'pending', attempts: 0, max_attempts: 3 });
    expect(lines.filter((l) => l.msg === "queued deliveries take the sink's max_attempts as configured now")).toEqual([
      expect.objectContaining({ sink: 'crm', deliveries: 2, max_attempts: 50 }),
    ]);
  });
});

describe('a sink removed from the configuration while a 410 disabled it', () => {
  it('is no longer listed under disabled_sinks by /readyz (as in the metrics); a configured one still is', async () => {
    const h = await startHarness({ sinks: [{ name: 'kept', type: 'stdout' }] });
    try {
      const at = new Date(h.clock.now()).toISOString();
      const disabled = h.r.app.database.ingestSqlite.prepare(
        "INSERT INTO sink_state (sink, disabled_at, disabled_reason, disabled_status, disabled_target, updated_at) VALUES (?, ?, 'HTTP 410 Gone', 410, 'stdout', ?)",
      );
      for (const sink of ['gone', 'kept']) disabled.run(sink, at, at);
      const res = await h.r.app.app.request('/readyz');
      expect(res.status).toBe(200);
      expect(((await res.json()) as { disabled_sinks: unknown }).disabled_sinks).toEqual([{ sink: 'kept', disabled_at: at }]);
    } finally {
      await h.close();
    }
  });
});
