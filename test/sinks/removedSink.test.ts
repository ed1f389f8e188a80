import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase, type OpenDatabase } from '../../src/db/openDatabase.js';
import { createLogger } from '../../src/observability/logger.js';
import { enqueue, JobQueue } from '../../src/queue/JobQueue.js';
import { FanOut } from '../../src/sinks/FanOut.js';
import { ManualClock } from '../../src/util/clock.js';
import { tempDir } from '../helpers/receiver.js';

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
