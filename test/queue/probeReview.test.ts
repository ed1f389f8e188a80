import { beforeEach, describe, expect, it } from 'vitest';
import type { OpenDatabase } from '../../src/db/openDatabase.js';
import { createFetchResultHandler } from '../../src/handlers/fetchResult.js';
import { DEFAULT_PROCESSING } from '../../src/handlers/ProcessingContext.js';
import { PauseSourceError } from '../../src/hiring/errors.js';
import { enqueue, JobQueue } from '../../src/queue/JobQueue.js';
import { JobKind } from '../../src/queue/jobKinds.js';
import { Worker, type JobHandler } from '../../src/queue/Worker.js';
import { SourcePauses } from '../../src/processing/SourcePauses.js';
import { createLogger } from '../../src/observability/logger.js';
import { ManualClock } from '../../src/util/clock.js';
import { scratchDatabase } from '../helpers/database.js';

let database: OpenDatabase;
const clock = new ManualClock(Date.parse('2026-11-01T00:00:00Z'));
const T0 = clock.now();
beforeEach(() => {
  database = scratchDatabase();
  clock.set(T0);
});
const logger = createLogger('silent');
const job = async (id: number) => database.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

describe('probe review', () => {
  it('several paused sources and fewer free slots than probes: every paused source is still probed in turn', async () => {
    const requests: string[] = [];
    // a's key stays refused; b's pause was a transient refusal: its key works now.
    const handler: JobHandler = async (j) => {
      requests.push(j.source!);
      if (j.source === 'a') throw new PauseSourceError('HTTP 401 authentication_failed');
    };
    const gate = new SourcePauses(database.db, clock);
    // concurrency 1: as WORKER_CONCURRENCY=1, or any worker whose pacer holds it to one group per claim.
    const w = new Worker({ queue: new JobQueue(database.db, clock), clock, logger, gate, concurrency: 1, handlers: { k: handler } });
    await gate.pause('a', 401, 'refused');
    await gate.pause('b', 401, 'refused');
    await enqueue(database.db, { kind: 'k', payload: {}, source: 'a' }, clock.now());
    const b = await enqueue(database.db, { kind: 'k', payload: {}, source: 'b' }, clock.now());
    for (let period = 1; period <= 4; period++) {
      clock.advance(5 * 60_000 + 1);
      await w.runUntilIdle(20);
    }
    expect(requests.filter((s) => s === 'b'), `requests: ${requests.join(',')}`).not.toEqual([]);
    expect(await job(b)).toMatchObject({ state: 'done' });
  });

  it('a probe spent on a job dead-lettered unrun (its last attempt never finished) probes again at once', async () => {
    const requests: number[] = [];
    const gate = new SourcePauses(database.db, clock);
    const w = new Worker({ queue: new JobQueue(database.db, clock), clock, logger, gate, concurrency: 4, handlers: { k: async (j) => void requests.push(j.id) } });
    await gate.pause('acme', 401, 'refused');
    // Left pending past its last attempt (as releaseOrphans leaves a job whose last attempt never finished).
    const orphan = await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme', maxAttempts: 1 }, clock.now());
    await database.db.updateTable('jobs').set({ attempts: 1 }).where('id', '=', orphan).execute();
    const read = await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme' }, clock.now());
    clock.advance(5 * 60_000 + 1);
    await w.runUntilIdle(20);
    expect(await job(orphan)).toMatchObject({ state: 'dead' });
    expect({ requests, paused: (await gate.list()).map((p) => p.source), read: (await job(read)).state }).toEqual({ requests: [read], paused: [], read: 'done' });
  });

  it('a probe spent on a result read that fails for good before any request (nothing to read, an id no request can name) probes again at once', async () => {
    const requests: number[] = [];
    const gate = new SourcePauses(database.db, clock);
    const fetch = createFetchResultHandler({
      ...DEFAULT_PROCESSING,
      db: database.db,
      sqlite: database.sqlite,
      clock,
      clients: new Map(),
      onSettled: async () => {},
      logger,
    });
    const w = new Worker({ queue: new JobQueue(database.db, clock), clock, logger, gate, concurrency: 1, handlers: { [JobKind.fetchResult]: fetch, k: async (j) => void requests.push(j.id) } });
    await gate.pause('acme', 401, 'refused');
    // Each of the source's periods first probes a read whose event is gone (a pruned or hand-edited database).
    const gone = await enqueue(database.db, { kind: JobKind.fetchResult, payload: { event_id: 'evt_gone', application_id: 'app_1', resource: 'interview' }, eventId: 'evt_gone', source: 'acme' }, clock.now());
    const read = await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme' }, clock.now());
    clock.advance(5 * 60_000 + 1);
    await w.runUntilIdle(20);
    expect(await job(gone)).toMatchObject({ state: 'dead', last_error: 'nothing to fetch for event evt_gone: result row or event missing' });
    // The read beside it is the next probe, in the same period: its request proves the key works.
    expect({ requests, paused: (await gate.list()).map((p) => p.source), read: (await job(read)).state }).toEqual({ requests: [read], paused: [], read: 'done' });
  });
});
