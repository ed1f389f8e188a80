import { beforeEach, describe, expect, it } from 'vitest';
import type { OpenDatabase } from '../../src/db/openDatabase.js';
import { enqueue, JobQueue } from '../../src/queue/JobQueue.js';
import { Worker, type JobHandler } from '../../src/queue/Worker.js';
import { SourcePauses } from '../../src/processing/SourcePauses.js';
import { createLogger } from '../../src/observability/logger.js';
import { ManualClock } from '../../src/util/clock.js';
import { scratchDatabase } from '../helpers/database.js';

let database: OpenDatabase;
const clock = new ManualClock(Date.parse('2026-11-01T00:00:00Z'));
beforeEach(() => {
  database = scratchDatabase();
  clock.set(Date.parse('2026-11-01T00:00:00Z'));
});

const job = async (id: number) => database.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();

describe('a handler failing with something that is not an Error, or an Error without a message', () => {
  const make = (handler: JobHandler, maxAttempts = 2) => {
    const q = new JobQueue(database.db, clock);
    const w = new Worker({ queue: q, clock, logger: createLogger('silent'), gate: new SourcePauses(database.db, clock), handlers: { k: handler }, backoff: { baseMs: 1000, capMs: 8000, jitter: 0 } });
    return { w, add: () => enqueue(database.db, { kind: 'k', payload: {}, maxAttempts }, clock.now()) };
  };

  for (const [name, thrown] of [
    ['null', null],
    ['undefined', undefined],
    ['a string', 'boom'],
    ['a number', 42],
    ['an Error with no message', new Error()],
    ['an object with a non-string message', { message: { code: 7 } }],
  ] as const) {
    it(`${name}: backed off with a last_error that says something, then dead-lettered with it (never left running)`, async () => {
      const { w, add } = make(async () => {
        throw thrown;
      });
      const id = await add();
      expect(await w.runUntilIdle()).toBe(1);
      const first = await job(id);
      expect(first).toMatchObject({ state: 'pending', attempts: 1, lease_token: null });
      expect(Date.parse(first.run_at) - clock.now()).toBe(1000);
      expect(typeof first.last_error).toBe('string');
      expect(first.last_error!.length).toBeGreaterThan(0);
      clock.set(Date.parse(first.run_at));
      expect(await w.runUntilIdle()).toBe(1);
      const last = await job(id);
      expect(last).toMatchObject({ state: 'dead', attempts: 2 });
      expect(typeof last.last_error).toBe('string');
      expect(last.last_error!.length).toBeGreaterThan(0);
    });
  }
});
