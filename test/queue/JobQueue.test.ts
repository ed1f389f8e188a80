import { beforeEach, describe, expect, it } from 'vitest';
import type { OpenDatabase } from '../../src/db/openDatabase.js';
import { PauseSourceError, PermanentError, RetryableError, RetryAfterError } from '../../src/hiring/errors.js';
import { backoffDelay } from '../../src/queue/backoff.js';
import { deadLetterIds, enqueue, JobQueue } from '../../src/queue/JobQueue.js';
import { OUTAGE_HOLD_AFTER, OUTAGE_HOLD_FIRST_MS, UNFINISHED_LAST_ATTEMPT, Worker, type BatchJobHandler, type JobHandler } from '../../src/queue/Worker.js';
import { SourcePauses } from '../../src/processing/SourcePauses.js';
import { createLogger } from '../../src/observability/logger.js';
import { ManualClock } from '../../src/util/clock.js';
import { scratchDatabase } from '../helpers/database.js';
import BetterSqlite3 from 'better-sqlite3';

let database: OpenDatabase;
const clock = new ManualClock(Date.parse('2026-11-01T00:00:00Z'));
const T0 = clock.now();
beforeEach(() => {
  database = scratchDatabase();
  clock.set(T0);
});

const job = async (id: number) => database.db.selectFrom('jobs').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
const logger = createLogger('silent');

describe('backoffDelay', () => {
  it('grows exponentially, is capped, and jitters within bounds', () => {
    const o = { baseMs: 1000, capMs: 10_000, jitter: 0.5 };
    expect(backoffDelay(1, { ...o, random: () => 1 })).toBe(1000);
    expect(backoffDelay(3, { ...o, random: () => 1 })).toBe(4000);
    expect(backoffDelay(10, { ...o, random: () => 1 })).toBe(10_000);
    expect(backoffDelay(3, { ...o, random: () => 0 })).toBe(2000);
  });
});

describe('JobQueue', () => {
  it('claims atomically: two claimers never get the same job', async () => {
    const q = new JobQueue(database.db, clock);
    for (let i = 0; i < 10; i++) await enqueue(database.db, { kind: 'k', payload: { i } }, clock.now());
    const [a, b] = await Promise.all([q.claim('a', 6), q.claim('b', 6)]);
    const ids = [...a, ...b].map((j) => j.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toHaveLength(10);
  });

  it('does not claim a job before run_at', async () => {
    const q = new JobQueue(database.db, clock);
    await enqueue(database.db, { kind: 'k', payload: {}, runAt: T0 + 1000 }, T0);
    expect(await q.claim('w', 5)).toHaveLength(0);
    clock.advance(1000);
    expect(await q.claim('w', 5)).toHaveLength(1);
  });

  it('reclaims a job whose lease expired, and the stale worker cannot overwrite the newer attempt', async () => {
    const q = new JobQueue(database.db, clock, 30_000);
    const id = await enqueue(database.db, { kind: 'k', payload: {} }, T0);
    const [first] = await q.claim('crashed', 1);
    expect(await q.claim('other', 1)).toHaveLength(0);
    clock.advance(30_001);
    const [second] = await q.claim('other', 1);
    expect(second!.id).toBe(id);
    expect(second!.attempts).toBe(2);
    expect(await q.complete(first!)).toBe(false);
    expect(await q.deadLetter(first!, 'stale')).toBe(false);
    expect((await job(id)).state).toBe('running');
    expect(await q.complete(second!)).toBe(true);
    expect((await job(id)).state).toBe('done');
  });

  it('a lease ends at lease_expires_at: not claimable a millisecond before, claimable at that instant (mutation audit)', async () => {
    const q = new JobQueue(database.db, clock, 1_000);
    const id = await enqueue(database.db, { kind: 'k', payload: {} }, T0);
    await q.claim('hung', 1);
    clock.advance(999);
    expect(await q.claim('w', 1)).toEqual([]);
    clock.advance(1);
    expect((await q.claim('w', 1)).map((j) => j.id)).toEqual([id]);
  });

  it('a claim takes at most its limit, however many kinds and expired leases it looks through (mutation audit)', async () => {
    const q = new JobQueue(database.db, clock, 1_000);
    const hung = await enqueue(database.db, { kind: 'a', payload: {} }, T0);
    await q.claim('hung', 1, [], ['a']);
    for (const kind of ['a', 'a', 'b', 'b', 'b']) await enqueue(database.db, { kind, payload: {} }, T0);
    clock.advance(1_000);
    const claimed = await q.claim('w', 2, [], ['a', 'b']);
    expect(claimed).toHaveLength(2);
    expect(claimed.map((j) => j.id)).toContain(hung);
    // Only those two are running for it: the rest stay pending, for other workers' slots.
    const running = await database.db.selectFrom('jobs').select('id').where('state', '=', 'running').execute();
    expect(running.map((j) => j.id).sort()).toEqual(claimed.map((j) => j.id).sort());
  });

  it('a worker that lost its lease cannot put the newer attempt back in the queue either (mutation audit)', async () => {
    const q = new JobQueue(database.db, clock, 30_000);
    const id = await enqueue(database.db, { kind: 'k', payload: {} }, T0);
    const [stale] = await q.claim('slow', 1);
    clock.advance(30_000);
    const [newer] = await q.claim('other', 1);
    expect(await q.reschedule(stale!, clock.now() + 5_000, { error: 'stale failure', refund: true })).toBe(false);
    expect(await job(id)).toMatchObject({ state: 'running', lease_owner: 'other', attempts: 2, last_error: null });
    expect(await q.complete(newer!)).toBe(true);
  });

  it('releases jobs a dead process left running, keeping the attempt they used', async () => {
    const q = new JobQueue(database.db, clock, 60_000);
    const id = await enqueue(database.db, { kind: 'k', payload: {} }, T0);
    await q.claim('process-that-died', 1);
    expect(await q.releaseOrphans()).toBe(1);
    expect(await job(id)).toMatchObject({ state: 'pending', attempts: 1, lease_token: null });
    expect(await q.claim('new-process', 1)).toHaveLength(1);
  });

  it('a job whose lease expired is claimed before the due backlog of its kind, which would otherwise hold it until it drains', async () => {
    const q = new JobQueue(database.db, clock, 1_000);
    const stuck = await enqueue(database.db, { kind: 'k', payload: {} }, T0);
    await q.claim('hung', 1);
    for (let i = 0; i < 8; i++) await enqueue(database.db, { kind: 'k', payload: { i } }, T0);
    clock.advance(1_001);
    const claimed = await q.claim('w', 4, [], ['k']);
    expect(claimed.map((j) => j.id)).toContain(stuck);
  });

  it('a job whose lease expired is not claimed while its source is paused or throttled (gated kinds)', async () => {
    const q = new JobQueue(database.db, clock, 1_000);
    await enqueue(database.db, { kind: 'fetch_result', payload: {}, source: 'acme' }, T0);
    await q.claim('hung', 1);
    clock.advance(1_001);
    expect(await q.claim('w', 4, ['acme'], ['fetch_result'], ['fetch_result'])).toEqual([]);
    expect(await q.claim('w', 4, [], ['fetch_result'], ['fetch_result'])).toHaveLength(1);
  });

  it('a probe claims one job of its source (an expired lease first), of a gated kind only; other sources and kinds as usual', async () => {
    const q = new JobQueue(database.db, clock, 1_000);
    const add = (kind: string, source: string) => enqueue(database.db, { kind, payload: {}, source }, clock.now());
    const hung = await add('fetch_result', 'acme');
    await q.claim('hung', 1);
    clock.advance(1_001);
    const held = [await add('fetch_result', 'acme'), await add('fetch_result', 'acme'), await add('fetch_result', 'acme')];
    const others = [await add('fetch_result', 'globex'), await add('fold', 'acme')];
    const kinds = ['fetch_result', 'fold'];
    const claimed = await q.claim('w', 10, [], kinds, ['fetch_result'], { probes: ['acme'] });
    expect(claimed.map((j) => j.id).sort()).toEqual([hung, ...others].sort());
    // The next probe takes the oldest due job; the check-first read sees it too.
    const next = await q.claim('w', 10, [], kinds, ['fetch_result'], { probes: ['acme'], checkFirst: true });
    expect(next.map((j) => j.id)).toEqual([held[0]]);
  });

  it('a claim compiled once for its shape binds its own time, limit, owner and lease at each run, and each shape keeps its held sources', async () => {
    const q = new JobQueue(database.db, clock, 30_000);
    const add = (source: string) => enqueue(database.db, { kind: 'fetch_result', payload: {}, source }, clock.now());
    const kinds = ['fetch_result'];
    const acme = [await add('acme'), await add('acme'), await add('acme')];
    const globex = [await add('globex'), await add('globex')];
    // Two shapes in turn on one queue: each claim leaves out its own held source.
    const first = await q.claim('w1', 1, ['globex'], kinds, kinds, { checkFirst: true });
    const second = await q.claim('w2', 5, ['acme'], kinds, kinds, { checkFirst: true });
    expect(first.map((j) => j.id)).toEqual([acme[0]]);
    expect(second.map((j) => j.id)).toEqual(globex);
    // The first shape again, later, by another owner and with another limit.
    clock.advance(5_000);
    const late = await add('acme');
    const third = await q.claim('w3', 2, ['globex'], kinds, kinds, { checkFirst: true });
    expect(third.map((j) => j.id)).toEqual([acme[1], acme[2]]);
    const stored = await Promise.all([...first, ...second, ...third].map((j) => job(j.id)));
    expect(stored.map((j) => [j.lease_owner, j.lease_expires_at, j.updated_at])).toEqual([
      ['w1', new Date(T0 + 30_000).toISOString(), new Date(T0).toISOString()],
      ['w2', new Date(T0 + 30_000).toISOString(), new Date(T0).toISOString()],
      ['w2', new Date(T0 + 30_000).toISOString(), new Date(T0).toISOString()],
      ['w3', new Date(T0 + 35_000).toISOString(), new Date(T0 + 5_000).toISOString()],
      ['w3', new Date(T0 + 35_000).toISOString(), new Date(T0 + 5_000).toISOString()],
    ]);
    // One token a claim, each claim its own.
    expect(new Set(stored.map((j) => j.lease_token))).toEqual(new Set([first[0]!.lease_token, second[0]!.lease_token, third[0]!.lease_token]));
    expect(new Set([first[0]!.lease_token, second[0]!.lease_token, third[0]!.lease_token]).size).toBe(3);
    expect(second[1]!.lease_token).toBe(second[0]!.lease_token);
    // The job added last is due now, not at the time the shape was first compiled at.
    clock.set(T0 + 4_999);
    expect(await q.claim('w4', 5, ['globex'], kinds, kinds, { checkFirst: true })).toEqual([]);
    clock.set(T0 + 5_000);
    expect((await q.claim('w4', 5, ['globex'], kinds, kinds)).map((j) => j.id)).toEqual([late]);
  });

  it('a claim compiled for one shape is not reused for another that differs only in its kinds, gated kinds, probes, oneEach, or where a source is held', async () => {
    // One queue per pair: the first claim compiles its shape, the second must not run it.
    const add = (kind: string, source: string) => enqueue(database.db, { kind, payload: {}, source }, clock.now());
    const ids = (jobs: { id: number }[]) => jobs.map((j) => j.id);
    // Kinds.
    let q = new JobQueue(database.db, clock);
    const [ka, kb] = [await add('ka', 'acme'), await add('kb', 'acme')];
    expect(ids(await q.claim('w', 5, [], ['ka']))).toEqual([ka]);
    expect(ids(await q.claim('w', 5, [], ['kb']))).toEqual([kb]);
    // Gated kinds: acme is held for ga, then for gb.
    q = new JobQueue(database.db, clock);
    const [ga, gb] = [await add('ga', 'acme'), await add('gb', 'acme')];
    expect(ids(await q.claim('w', 5, ['acme'], ['ga', 'gb'], ['ga']))).toEqual([gb]);
    expect(ids(await q.claim('w', 5, ['acme'], ['ga', 'gb'], ['gb']))).toEqual([ga]);
    // Probes: acme not held, then probed (one job); then held outright (none), the same names in another place.
    q = new JobQueue(database.db, clock);
    const p = [await add('pa', 'acme'), await add('pa', 'acme'), await add('pa', 'acme')];
    expect(ids(await q.claim('w', 1, [], ['pa'], ['pa']))).toEqual([p[0]]);
    expect(ids(await q.claim('w', 5, [], ['pa'], ['pa'], { probes: ['acme'] }))).toEqual([p[1]]);
    expect(await q.claim('w', 5, ['acme'], ['pa'], ['pa'])).toEqual([]);
    // oneEach: acme not held, then one job of it in its turn.
    q = new JobQueue(database.db, clock);
    const o = [await add('oa', 'acme'), await add('oa', 'acme'), await add('oa', 'acme')];
    expect(ids(await q.claim('w', 1, [], ['oa'], ['oa']))).toEqual([o[0]]);
    expect(ids(await q.claim('w', 5, [], ['oa'], ['oa'], { oneEach: ['acme'] }))).toEqual([o[1]]);
  });

  it('dead-letters with the last error, never deletes, and the operator can retry', async () => {
    const q = new JobQueue(database.db, clock);
    const id = await enqueue(database.db, { kind: 'k', payload: {}, maxAttempts: 1 }, T0);
    const [j] = await q.claim('w', 1);
    await q.deadLetter(j!, 'boom');
    expect(await job(id)).toMatchObject({ state: 'dead', last_error: 'boom' });
    expect((await q.listDeadLetters()).map((d) => d.id)).toEqual([id]);
    expect(await q.retryDeadLetters({})).toBe(0);
    expect(await q.retryDeadLetters({ ids: [id] })).toBe(1);
    expect(await job(id)).toMatchObject({ state: 'pending', attempts: 0 });
  });

  it('retries the dead letters of one event, its process_event job and the others alike', async () => {
    const q = new JobQueue(database.db, clock);
    const ids = [];
    for (const kind of ['process_event', 'sink:archive', 'fetch_result']) {
      ids.push(await enqueue(database.db, { kind, payload: {}, eventId: 'evt_dead', maxAttempts: 1 }, T0));
    }
    const other = await enqueue(database.db, { kind: 'sink:archive', payload: {}, eventId: 'evt_other', maxAttempts: 1 }, T0);
    for (const j of await q.claim('w', 4)) await q.deadLetter(j, 'boom');
    expect(await q.retryDeadLetters({ eventId: 'evt_dead' })).toBe(3);
    for (const id of ids) expect(await job(id)).toMatchObject({ state: 'pending', attempts: 0 });
    expect(await job(other)).toMatchObject({ state: 'dead' });
    expect(await q.retryDeadLetters({ eventId: 'evt_dead', kind: 'sink:archive' })).toBe(0);
  });

  it('dead letters by source reach a sink job\'s event through the events primary key, not a scan of every event', async () => {
    const q = deadLetterIds(database.db, { source: 'acme' }).compile();
    const plan = (database.sqlite.prepare(`EXPLAIN QUERY PLAN ${q.sql}`).all(...q.parameters) as { detail: string }[]).map((p) => p.detail);
    expect(plan.some((d) => /SEARCH events USING INDEX sqlite_autoindex_events_1 \(id=\?\)/.test(d))).toBe(true);
    expect(plan.filter((d) => /SCAN events/.test(d))).toEqual([]);
  });

  it('completeMany: a stale batch completes only the jobs whose lease it still holds, with their records in the same transaction', async () => {
    const q = new JobQueue(database.db, clock, 30_000);
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await enqueue(database.db, { kind: 'k', payload: { i } }, T0));
    const stale = await q.claim('slow', 3);
    clock.advance(30_001);
    // Another worker took over the first job after the lease expired.
    const [taken] = await q.claim('other', 1);
    expect(taken!.id).toBe(ids[0]);
    const recorded: number[] = [];
    const done = await q.completeMany(stale, async (trx, completed) => {
      recorded.push(...completed.map((j) => j.id));
      // A write in the same transaction: visible only if the completion commits.
      await trx.updateTable('jobs').set({ last_error: 'recorded with completion' }).where('id', 'in', completed.map((j) => j.id)).execute();
    });
    expect(done.map((j) => j.id)).toEqual(ids.slice(1));
    expect(recorded).toEqual(ids.slice(1));
    expect(await job(ids[0]!)).toMatchObject({ state: 'running', lease_owner: 'other', last_error: null });
    // Finished now, and due "now" too (run_at = finished_at): the prune's index range is exact.
    const at = new Date(clock.now()).toISOString();
    for (const id of ids.slice(1)) expect(await job(id)).toMatchObject({ state: 'done', lease_token: null, last_error: 'recorded with completion', finished_at: at, run_at: at });
    expect(await q.complete(taken!)).toBe(true);
  });

  it('completeMany: when the records fail, no job of the batch is completed (they run again after their lease)', async () => {
    const q = new JobQueue(database.db, clock, 30_000);
    for (let i = 0; i < 3; i++) await enqueue(database.db, { kind: 'k', payload: { i } }, T0);
    const claimed = await q.claim('w', 3);
    await expect(
      q.completeMany(claimed, async (trx) => {
        await trx.updateTable('jobs').set({ last_error: 'half written' }).execute();
        throw new Error('disk I/O error');
      }),
    ).rejects.toThrow('disk I/O error');
    for (const j of claimed) expect(await job(j.id)).toMatchObject({ state: 'running', last_error: null });
    clock.advance(30_001);
    expect((await q.claim('w2', 5)).map((j) => j.id)).toEqual(claimed.map((j) => j.id));
  });

  it('an idle claim that looks first claims the same jobs once something is due', async () => {
    const q = new JobQueue(database.db, clock, 30_000);
    expect(await q.claim('w', 5, [], ['k'], undefined, { checkFirst: true })).toEqual([]);
    const id = await enqueue(database.db, { kind: 'k', payload: {} }, T0);
    await enqueue(database.db, { kind: 'other', payload: {} }, T0);
    expect((await q.claim('w', 5, [], ['k'], undefined, { checkFirst: true })).map((j) => j.id)).toEqual([id]);
    clock.advance(30_001);
    // An expired lease counts as due too.
    expect((await q.claim('w2', 5, [], ['k'], undefined, { checkFirst: true })).map((j) => j.id)).toEqual([id]);
  });
});

describe('Worker', () => {
  const make = (handler: JobHandler, maxAttempts = 3, random: () => number = () => 0) => {
    const q = new JobQueue(database.db, clock);
    const gate = new SourcePauses(database.db, clock);
    const w = new Worker({ queue: q, clock, logger, gate, handlers: { k: handler }, backoff: { baseMs: 1000, capMs: 8000, jitter: 0, random } });
    return { q, w, gate, add: (source: string | null = null) => enqueue(database.db, { kind: 'k', payload: {}, source, maxAttempts }, clock.now()) };
  };

  it('a job whose last attempt never finished (its process died, twice) is dead-lettered at its next claim without running', async () => {
    let runs = 0;
    const { q, w, add } = make(async () => {
      runs++;
    }, 2);
    const id = await add();
    // Two lives end during the job (a crash it may cause), each released at the next start.
    for (const owner of ['died-1', 'died-2']) {
      await q.claim(owner, 1);
      expect(await q.releaseOrphans()).toBe(1);
    }
    expect(await w.runUntilIdle()).toBe(1);
    expect(runs).toBe(0);
    expect(await job(id)).toMatchObject({ state: 'dead', attempts: 3, last_error: UNFINISHED_LAST_ATTEMPT });
  });

  it('a job whose last attempt hung past its lease is dead-lettered at its next claim without running', async () => {
    let runs = 0;
    const { q, w, add } = make(async () => {
      runs++;
    }, 1);
    const id = await add();
    await q.claim('hung', 1);
    clock.advance(60_001);
    expect(await w.runUntilIdle()).toBe(1);
    expect(runs).toBe(0);
    expect(await job(id)).toMatchObject({ state: 'dead', last_error: UNFINISHED_LAST_ATTEMPT });
  });

  it('backs off exponentially on failures, then dead-letters after max_attempts', async () => {
    const { w, add } = make(async () => {
      throw new Error('flaky');
    });
    const id = await add();
    const runs: string[] = [];
    for (let i = 0; i < 3; i++) {
      expect(await w.runUntilIdle()).toBe(1);
      const row = await job(id);
      runs.push(`${row.state}@${Date.parse(row.run_at) - clock.now()}`);
      clock.set(Date.parse(row.run_at));
    }
    expect(runs).toEqual(['pending@1000', 'pending@2000', 'dead@0']);
    expect((await job(id)).last_error).toBe('flaky');
  });

  it('honours RetryAfterError and dead-letters PermanentError at once', async () => {
    const after = make(async () => {
      throw new RetryAfterError('slow down', 45_000);
    });
    const a = await after.add();
    await after.w.runUntilIdle();
    expect(Date.parse((await job(a)).run_at) - clock.now()).toBe(45_000);

    const perm = make(async () => {
      throw new PermanentError('never');
    });
    const p = await perm.add();
    await perm.w.runUntilIdle();
    expect(await job(p)).toMatchObject({ state: 'dead', last_error: 'never', attempts: 1 });
  });

  it('a Retry-After is spread by up to a quarter (at most a minute) and never shortened; one past a day is cut to a day', async () => {
    const told = make(async () => {
      throw new RetryAfterError('slow down', 45_000);
    }, 3, () => 1);
    const a = await told.add();
    await told.w.runUntilIdle();
    expect(Date.parse((await job(a)).run_at) - clock.now()).toBe(45_000 + 11_250);
    // Milliseconds sent as seconds: 3e12 ms is about 95 years, past any date run_at can hold.
    const huge = make(async () => {
      throw new RetryAfterError('slow down', 3e12);
    }, 3, () => 1);
    const h = await huge.add();
    await huge.w.runUntilIdle();
    expect(await job(h)).toMatchObject({ state: 'pending', last_error: 'slow down' });
    expect(Date.parse((await job(h)).run_at) - clock.now()).toBe(24 * 3_600_000 + 60_000);
  });

  it('an outage outlasts max_attempts: the job is retried at its longest backoff for as long as it lasts; other failures still end it', async () => {
    const outage = make(async () => {
      throw Object.assign(new RetryableError('HTTP 503 server_error'), { outage: true });
    }, 3);
    const id = await outage.add('acme');
    const runs: string[] = [];
    for (let i = 0; i < 5; i++) {
      expect(await outage.w.runUntilIdle()).toBe(1);
      const row = await job(id);
      runs.push(`${row.state}/${row.attempts}@${Date.parse(row.run_at) - clock.now()}`);
      clock.set(Date.parse(row.run_at));
    }
    // From the attempt before its last it goes back one more: every run is then the attempt
    // before its last, so a crash during one is never its last.
    expect(runs).toEqual(['pending/1@1000', 'pending/1@2000', 'pending/1@2000', 'pending/1@2000', 'pending/1@2000']);
    await outage.q.claim('dies', 1);
    expect(await outage.q.releaseOrphans()).toBe(1);
    clock.advance(1);
    expect(await outage.w.runUntilIdle()).toBe(1);
    expect(await job(id)).toMatchObject({ state: 'pending' });

    const broken = make(async () => {
      throw new RetryableError('HTTP 502 (not marked as an outage)');
    }, 2);
    const other = await broken.add('acme');
    await broken.w.runUntilIdle();
    clock.advance(1000);
    await broken.w.runUntilIdle();
    expect(await job(other)).toMatchObject({ state: 'dead', attempts: 2 });
  });

  it('a restart mid-outage: the first failure the new process sees continues the outage (its streak before is not remembered)', async () => {
    const failing = () =>
      make(async () => {
        throw Object.assign(new RetryableError('HTTP 503 server_error'), { outage: true });
      }, 3);
    const before = failing();
    const id = await before.add('acme');
    for (let i = 0; i < 3; i++) {
      await before.w.runUntilIdle();
      clock.set(Date.parse((await job(id)).run_at));
    }
    // Left at the attempt before its last (as a version that reset only at the last one left it).
    await database.db.updateTable('jobs').set({ attempts: 2 }).where('id', '=', id).execute();
    const after = failing(); // the process restarted; the service is still down
    await after.w.runUntilIdle();
    expect(await job(id)).toMatchObject({ state: 'pending', attempts: 1 });
  });

  it('a read the service keeps failing while its other reads go through is no outage: it ends at max_attempts, seen', async () => {
    let bad = -1;
    const { w, add } = make(async (j) => {
      if (j.id === bad) throw Object.assign(new RetryableError('HTTP 500 for this application only'), { outage: true });
    }, 2);
    await add('acme'); // the source answers in this process
    await w.runUntilIdle();
    bad = await add('acme');
    for (let i = 0; i < 2; i++) {
      await add('acme'); // another read of the source, answered
      await w.runUntilIdle();
      clock.set(Date.parse((await job(bad)).run_at));
    }
    expect(await job(bad)).toMatchObject({ state: 'dead', attempts: 2 });
  });

  it('outage failures piling up hold the source (a circuit breaker), longer each time; the first job through ends the hold', async () => {
    const reads: number[] = [];
    let down = true;
    const q = new JobQueue(database.db, clock);
    const w = new Worker({
      queue: q, clock, logger, gate: new SourcePauses(database.db, clock), concurrency: 1,
      backoff: { baseMs: 1000, capMs: 1000, jitter: 0, random: () => 0 },
      handlers: {
        k: async (j) => {
          reads.push(j.id);
          if (down && j.source === 'acme') throw Object.assign(new RetryableError('connect ECONNREFUSED'), { outage: true });
        },
      },
    });
    for (let i = 0; i < 12; i++) await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme', maxAttempts: 100 }, clock.now());
    const globex = await enqueue(database.db, { kind: 'k', payload: {}, source: 'globex' }, clock.now());
    // 8 failures in a row hold acme's jobs; globex's still runs.
    await w.runUntilIdle();
    expect(reads.filter((id) => id !== globex)).toHaveLength(OUTAGE_HOLD_AFTER);
    expect(await job(globex)).toMatchObject({ state: 'done' });
    clock.advance(OUTAGE_HOLD_FIRST_MS - 1);
    expect(await w.runUntilIdle()).toBe(0);
    // After the hold, one probe; it fails, and the source is held again.
    clock.advance(1);
    expect(await w.runUntilIdle()).toBe(1);
    expect(await w.runUntilIdle()).toBe(0);
    // Each 4 failures double the hold: 4 probes at 15 s, the next after 30 s.
    for (let i = 0; i < 3; i++) {
      clock.advance(OUTAGE_HOLD_FIRST_MS);
      expect(await w.runUntilIdle()).toBe(1);
    }
    clock.advance(OUTAGE_HOLD_FIRST_MS);
    expect(await w.runUntilIdle()).toBe(0);
    // The service is back: the next probe goes through, and the rest run at once.
    down = false;
    clock.advance(OUTAGE_HOLD_FIRST_MS);
    expect(await w.runUntilIdle()).toBe(12);
    const left = await database.db.selectFrom('jobs').select('state').where('source', '=', 'acme').where('state', '<>', 'done').execute();
    expect(left).toEqual([]);
  });

  it('the breaker\'s hold ends with the first read that goes through; a probe that fails holds the source again, one probe at a time (the service coming back)', async () => {
    let failNext = Number.POSITIVE_INFINITY;
    const q = new JobQueue(database.db, clock);
    const w = new Worker({
      queue: q, clock, logger, gate: new SourcePauses(database.db, clock), concurrency: 2,
      backoff: { baseMs: 1000, capMs: 1000, jitter: 0, random: () => 0 },
      handlers: {
        k: async () => {
          if (failNext-- > 0) throw Object.assign(new RetryableError('HTTP 503'), { outage: true });
        },
      },
    });
    for (let i = 0; i < 40; i++) await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme', maxAttempts: 100 }, clock.now());
    for (let i = 0; i < 30 && (await w.runUntilIdle()) > 0; i++) clock.advance(5 * 60_000);
    // Held now. The service comes back as the next two probes run: the first fails, the second is answered.
    failNext = 1;
    let tried = 0;
    const left = () => database.db.selectFrom('jobs').select('id').where('state', '<>', 'done').execute();
    clock.advance(5 * 60_000);
    // A failing source runs one read at a time (Worker.claim): the probe fails alone, and holds it again.
    const ranAfterHold = await w.runUntilIdle();
    tried += ranAfterHold;
    expect(ranAfterHold).toBe(1);
    expect((await left()).length).toBe(40);
    clock.advance(5 * 60_000); // the longest hold; the next probe is answered and ends it
    tried += await w.runUntilIdle();
    expect(await left()).toEqual([]);
    expect(tried).toBe(41);
  });

  it('a steady stream of kicks while a source is held does not put off the poll: another source\'s read is claimed within a poll or two', async () => {
    const q = new JobQueue(database.db, clock);
    const ran: string[] = [];
    const w = new Worker({
      queue: q, clock, logger, gate: new SourcePauses(database.db, clock), concurrency: 1, pollIntervalMs: 100,
      handlers: {
        k: async (j) => {
          ran.push(j.source!);
          if (j.source === 'acme') throw new RetryAfterError('HTTP 429 rate_limited', 120_000, { throttlesSource: true });
        },
      },
    });
    await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme' }, clock.now());
    await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme' }, clock.now());
    w.start();
    try {
      const started = Date.now();
      while (Date.now() - started < 5000 && (ran.length === 0 || Date.now() - started < 400)) await new Promise((r) => setTimeout(r, 20));
      expect(ran).toEqual(['acme']);
      // A fold queues beta's read; folds of other events keep kicking every 20 ms (the poll is every 100 ms).
      await enqueue(database.db, { kind: 'k', payload: {}, source: 'beta' }, clock.now());
      const kicking = Date.now();
      while (Date.now() - kicking < 2000 && !ran.includes('beta')) {
        w.kick();
        await new Promise((r) => setTimeout(r, 20));
      }
      expect(ran).toContain('beta');
      expect(Date.now() - kicking).toBeLessThan(1000);
    } finally {
      await w.stop();
    }
  });

  it('runUntilIdle claims as a poll: a kick\'s skip does not stop a drain', async () => {
    const q = new JobQueue(database.db, clock);
    const ran: string[] = [];
    const w = new Worker({
      queue: q, clock, logger, gate: new SourcePauses(database.db, clock), concurrency: 1,
      handlers: {
        k: async (j) => {
          ran.push(j.source!);
          if (j.source === 'acme') throw new RetryAfterError('HTTP 429', 120_000, { throttlesSource: true });
        },
      },
    });
    await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme' }, clock.now());
    await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme' }, clock.now());
    await w.runUntilIdle();
    await enqueue(database.db, { kind: 'k', payload: {}, source: 'beta' }, clock.now());
    expect(await w.runUntilIdle()).toBe(1);
    expect(ran).toEqual(['acme', 'beta']);
  });

  it('while the last claim found nothing but held work, kicks (one per fold) do not claim again until the next poll', async () => {
    const q = new JobQueue(database.db, clock);
    let claims = 0;
    const claim = q.claim.bind(q);
    q.claim = (...args: Parameters<JobQueue['claim']>) => {
      claims++;
      return claim(...args);
    };
    const w = new Worker({
      queue: q, clock, logger, gate: new SourcePauses(database.db, clock), concurrency: 1, pollIntervalMs: 60_000,
      handlers: { k: async () => { throw new RetryAfterError('HTTP 429 rate_limited', 120_000, { throttlesSource: true }); } },
    });
    for (let i = 0; i < 3; i++) await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme' }, clock.now());
    const turns = async (n: number) => {
      for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
    };
    w.start();
    try {
      // The first read is told to wait; a claim then finds only acme's held reads.
      for (let i = 0; i < 200 && (await database.db.selectFrom('jobs').select('id').where('attempts', '=', 1).execute()).length === 0; i++) await turns(5);
      await turns(20);
      const before = claims;
      for (let i = 0; i < 10; i++) {
        w.kick();
        await turns(5);
      }
      expect(claims - before).toBe(0);
    } finally {
      await w.stop();
    }
  });

  it('a wait that throttles the source (a 429) holds its other jobs too, not other sources\' jobs, until it has passed', async () => {
    const reads: string[] = [];
    let limited = true;
    const q = new JobQueue(database.db, clock);
    // One job per claim (WORKER_CONCURRENCY=1): reads already in flight when the 429 comes finish as they may.
    const w = new Worker({
      queue: q, clock, logger, gate: new SourcePauses(database.db, clock), concurrency: 1,
      backoff: { baseMs: 1000, capMs: 8000, jitter: 0, random: () => 0 },
      handlers: {
        k: async (j) => {
          reads.push(`${j.source}:${j.id}`);
          if (limited && j.source === 'acme') throw new RetryAfterError('HTTP 429 rate_limited', 120_000, { throttlesSource: true });
        },
      },
    });
    const add = (source: string) => enqueue(database.db, { kind: 'k', payload: {}, source }, clock.now());
    const first = await add('acme');
    const second = await add('acme');
    const other = await add('globex');
    // The first acme read is told to wait; the second is then not claimed, globex's is.
    expect(await w.runUntilIdle()).toBe(2);
    expect(reads).toEqual([`acme:${first}`, `globex:${other}`]);
    expect(await job(second)).toMatchObject({ state: 'pending', attempts: 0 });
    clock.advance(119_000);
    expect(await w.runUntilIdle()).toBe(0);
    limited = false;
    clock.advance(1_000);
    expect(await w.runUntilIdle()).toBe(2);
    expect(await job(second)).toMatchObject({ state: 'done' });
  });

  it('a throttle holds the source even when the job it came with is dead-lettered (its last attempt)', async () => {
    const reads: number[] = [];
    const w = new Worker({
      queue: new JobQueue(database.db, clock), clock, logger, gate: new SourcePauses(database.db, clock), concurrency: 1,
      handlers: {
        k: async (j) => {
          reads.push(j.id);
          throw new RetryAfterError('HTTP 429 rate_limited', 60_000, { throttlesSource: true });
        },
      },
    });
    const last = await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme', maxAttempts: 1 }, clock.now());
    const next = await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme' }, clock.now());
    expect(await w.runUntilIdle()).toBe(1);
    expect(await job(last)).toMatchObject({ state: 'dead' });
    expect(await job(next)).toMatchObject({ state: 'pending', attempts: 0 });
    clock.advance(60_000);
    expect(await w.runUntilIdle()).toBe(1);
    expect(reads).toEqual([last, next]);
  });

  it('a paused source that is also throttled keeps its probe for a claim that can use it', async () => {
    const gate = new SourcePauses(database.db, clock);
    await enqueue(database.db, { kind: 'k', payload: {}, source: 'acme' }, clock.now() + 5 * 60_000); // the read the pause holds
    await gate.pause('acme', 401, 'authentication_failed');
    const probeAt = (await gate.list())[0]!.probe_after;
    clock.advance(5 * 60_000 + 1); // the probe is due
    expect(await gate.blockedSources(clock.now(), ['acme'])).toEqual({ blocked: ['acme'], probes: [] });
    expect((await gate.list())[0]!.probe_after).toBe(probeAt);
    // Not throttled: this claim is the probe, and the next one is 5 minutes on.
    expect(await gate.blockedSources(clock.now())).toEqual({ blocked: [], probes: ['acme'] });
    expect(Date.parse((await gate.list())[0]!.probe_after)).toBe(clock.now() + 5 * 60_000);
  });

  it('pauses the source on PauseSourceError without burning attempts, and resumes on success', async () => {
    let keyWorks = false;
    const { w, gate, add } = make(async () => {
      if (!keyWorks) throw new PauseSourceError('HTTP 401 authentication_failed');
    });
    const id = await add('acme');
    await w.runUntilIdle();
    expect(await job(id)).toMatchObject({ state: 'pending', attempts: 0 });
    expect((await gate.list()).map((p) => p.source)).toEqual(['acme']);
    // While paused, even a due job of the source is not claimed.
    await database.db.updateTable('jobs').set({ run_at: new Date(clock.now()).toISOString() }).execute();
    expect(await w.runUntilIdle()).toBe(0);
    keyWorks = true;
    clock.advance(5 * 60_000 + 1); // the probe period
    expect(await w.runUntilIdle()).toBe(1);
    expect((await job(id)).state).toBe('done');
    expect(await gate.list()).toEqual([]);
  });

  it('a job that sent no request (untested: a wait for the poll spacing, a stored result reused) does not lift the pause; one that did, does', async () => {
    const answers: ({ untested: true } | { rescheduleAt: number; untested: true } | undefined)[] = [
      { rescheduleAt: T0 + 10 * 60_000, untested: true },
      { untested: true },
      undefined,
    ];
    const { w, gate, add } = make(async () => answers.shift());
    await gate.pause('acme', 401, 'authentication_failed');
    const [pausedAt] = (await gate.list()).map((p) => p.paused_at);
    clock.advance(5 * 60_000 + 1); // the probe period: the source's jobs are let through
    const waiting = await add('acme');
    const reused = await add('acme');
    expect(await w.runUntilIdle()).toBe(2);
    expect(await job(waiting)).toMatchObject({ state: 'pending', attempts: 0 });
    expect(await job(reused)).toMatchObject({ state: 'done' });
    // Neither proved the key: still paused, since the same moment.
    expect((await gate.list()).map((p) => [p.source, p.paused_at])).toEqual([['acme', pausedAt]]);
    // The waiting job, due again at the next probe, reads this time: the pause is lifted.
    clock.advance(5 * 60_000 + 1);
    expect(await w.runUntilIdle()).toBe(1);
    expect(await job(waiting)).toMatchObject({ state: 'done' });
    expect(await gate.list()).toEqual([]);
  });

  it('a success with nothing paused takes no write lock: it does not wait for another process holding it', async () => {
    const gate = new SourcePauses(database.db, clock);
    const other = new BetterSqlite3(database.sqlite.name);
    try {
      other.exec('BEGIN IMMEDIATE');
      // A DELETE would wait for the lock on timers for the connection's busy timeout (200 ms by
      // default) and then fail with SQLITE_BUSY, since the lock is held throughout; a read answers.
      // (No bound on the elapsed time: 100 ms of a loaded CI machine is no proof of a wait.)
      await expect(gate.resume('acme')).resolves.toBeUndefined();
      other.exec('COMMIT');
      // A paused source is still resumed (the lock is free now).
      await gate.pause('acme', 401, 'authentication_failed');
      await gate.resume('acme');
      expect(await gate.list()).toEqual([]);
    } finally {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
    }
  });

  it('a batch handler: done jobs complete together with their records; a failed one backs off, a permanent one is dead, on its own', async () => {
    const q = new JobQueue(database.db, clock);
    const gate = new SourcePauses(database.db, clock);
    const batches: number[][] = [];
    const handler: BatchJobHandler = {
      maxJobs: 3,
      async run(jobs) {
        batches.push(jobs.map((j) => j.id));
        return {
          results: jobs.map((j) => {
            const { i } = JSON.parse(j.payload) as { i: number };
            if (i === 1) return { error: new Error('flaky') };
            if (i === 4) return { error: new PermanentError('never') };
            if (i === 5) return { rescheduleAt: clock.now() + 60_000 };
            return undefined;
          }),
          onComplete: async (trx, completed) => {
            await trx.updateTable('jobs').set({ last_error: 'record' }).where('id', 'in', completed.map((j) => j.id)).execute();
          },
        };
      },
    };
    const settled: string[] = [];
    const w = new Worker({
      queue: q, clock, logger, gate, concurrency: 6, handlers: { b: handler }, backoff: { baseMs: 1000, capMs: 8000, jitter: 0 },
      onJobSettled: (j, o) => settled.push(`${JSON.parse(j.payload).i}:${o}`),
    });
    const ids = [];
    for (let i = 0; i < 6; i++) ids.push(await enqueue(database.db, { kind: 'b', payload: { i }, maxAttempts: 3 }, clock.now()));
    expect(await w.runUntilIdle()).toBe(6);
    expect(batches).toEqual([ids.slice(0, 3), ids.slice(3)]);
    const rows = await Promise.all(ids.map(job));
    expect(rows.map((r) => r.state)).toEqual(['done', 'pending', 'done', 'done', 'dead', 'pending']);
    expect(rows.map((r) => r.last_error)).toEqual(['record', 'flaky', 'record', 'record', 'never', null]);
    expect(Date.parse(rows[1]!.run_at) - clock.now()).toBe(1000);
    expect(rows[1]!.attempts).toBe(1);
    // Asked to run later: the attempt is given back.
    expect(rows[5]!.attempts).toBe(0);
    expect(settled.sort()).toEqual(['0:done', '1:retry', '2:done', '3:done', '4:dead', '5:rescheduled']);
  });

  it('a batch whose handler throws fails every job of it, each backed off on its own', async () => {
    const q = new JobQueue(database.db, clock);
    const gate = new SourcePauses(database.db, clock);
    const w = new Worker({
      queue: q, clock, logger, gate, concurrency: 4, backoff: { baseMs: 1000, capMs: 8000, jitter: 0 },
      handlers: { b: { maxJobs: 4, run: async () => { throw new Error('database is locked'); } } },
    });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await enqueue(database.db, { kind: 'b', payload: {}, maxAttempts: 3 }, clock.now()));
    expect(await w.runUntilIdle()).toBe(3);
    for (const id of ids) expect(await job(id)).toMatchObject({ state: 'pending', attempts: 1, last_error: 'database is locked' });
  });

  it('a paced worker waits its turn before every claim and books each claim and run', async () => {
    const q = new JobQueue(database.db, clock);
    const gate = new SourcePauses(database.db, clock);
    const events: string[] = [];
    let turns = 0;
    const pacer = {
      turn: async () => {
        turns++;
        events.push('turn');
        return false;
      },
      charge: (ms: number) => {
        expect(ms).toBeGreaterThanOrEqual(0);
        events.push('charge');
      },
    };
    const ran: number[] = [];
    const w = new Worker({ queue: q, clock, logger, gate, concurrency: 1, pacer, pollIntervalMs: 5, handlers: { k: async (j) => void ran.push(j.id) } });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push(await enqueue(database.db, { kind: 'k', payload: {} }, clock.now()));
    w.start();
    for (let i = 0; i < 200 && ran.length < 3; i++) await new Promise((r) => setTimeout(r, 5));
    await w.stop();
    expect(ran).toEqual(ids);
    // Every claim came after a turn; every claim and every run was charged.
    expect(turns).toBeGreaterThanOrEqual(3);
    expect(events[0]).toBe('turn');
    expect(events.filter((e) => e === 'charge').length).toBeGreaterThanOrEqual(turns + 3 - 1);
  });

  it('while its pacer holds processing back, a worker keeps one job in flight, and up to its concurrency otherwise', async () => {
    const q = new JobQueue(database.db, clock);
    const gate = new SourcePauses(database.db, clock);
    for (const held of [true, false]) {
      let running = 0;
      let most = 0;
      const ran: number[] = [];
      const pacer = { turn: async () => held, charge: () => {} };
      const handler = async (j: { id: number }) => {
        most = Math.max(most, ++running);
        for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
        running--;
        ran.push(j.id);
      };
      const w = new Worker({ queue: q, clock, logger, gate, concurrency: 4, pacer, pollIntervalMs: 5, handlers: { k: handler } });
      const ids = [];
      for (let i = 0; i < 6; i++) ids.push(await enqueue(database.db, { kind: 'k', payload: {} }, clock.now()));
      w.start();
      for (let i = 0; i < 400 && ran.length < 6; i++) await new Promise((r) => setTimeout(r, 5));
      await w.stop();
      expect(ran.sort((a, b) => a - b)).toEqual(ids);
      expect(most).toBe(held ? 1 : 4);
    }
  });

  it('held back with a slow job in flight, a worker asks its pacer again meanwhile and fills its slots once the loop is free', async () => {
    const q = new JobQueue(database.db, clock);
    const gate = new SourcePauses(database.db, clock);
    // A burst of deliveries: the first turns say "held back"; then the loop is free.
    let held = true;
    const pacer = { turn: async () => held, charge: () => {} };
    let running = 0;
    let most = 0;
    let release!: () => void;
    const slow = new Promise<void>((r) => (release = r));
    // Each job is a read the service answers late: none ends before the test releases them.
    const handler = async () => {
      most = Math.max(most, ++running);
      await slow;
      running--;
    };
    const w = new Worker({ queue: q, clock, logger, gate, concurrency: 4, pacer, pollIntervalMs: 5, handlers: { k: handler } });
    for (let i = 0; i < 4; i++) await enqueue(database.db, { kind: 'k', payload: {} }, clock.now());
    w.start();
    try {
      for (let i = 0; i < 200 && running === 0; i++) await new Promise((r) => setTimeout(r, 5));
      // Held back: one job in flight, and it stays so while the pacer says so.
      for (let i = 0; i < 10; i++) await new Promise((r) => setTimeout(r, 5));
      expect(running).toBe(1);
      held = false;
      for (let i = 0; i < 200 && running < 4; i++) await new Promise((r) => setTimeout(r, 5));
      // All four run before the first one ended.
      expect(most).toBe(4);
    } finally {
      release();
      await w.stop();
    }
    expect(running).toBe(0);
  });

  it('stop() waits for a tick held in its pacer turn, and that tick claims nothing', async () => {
    const q = new JobQueue(database.db, clock);
    const gate = new SourcePauses(database.db, clock);
    let release!: () => void;
    const held = new Promise<boolean>((r) => (release = () => r(false)));
    let turns = 0;
    const pacer = { turn: () => (++turns === 1 ? held : Promise.resolve(false)), charge: () => {} };
    const ran: number[] = [];
    const w = new Worker({ queue: q, clock, logger, gate, concurrency: 1, pacer, handlers: { k: async (j) => void ran.push(j.id) } });
    const id = await enqueue(database.db, { kind: 'k', payload: {} }, clock.now());
    w.start();
    for (let i = 0; i < 100 && turns === 0; i++) await new Promise((r) => setImmediate(r));
    expect(turns).toBe(1);
    let stopped = false;
    const stopping = w.stop().then(() => (stopped = true));
    await new Promise((r) => setImmediate(r));
    expect(stopped).toBe(false); // still waiting for the held tick
    release();
    await stopping;
    expect(ran).toEqual([]);
    expect(await job(id)).toMatchObject({ state: 'pending', attempts: 0 });
  });

  it('reschedules without counting an attempt when the handler asks to poll later', async () => {
    const { w, add } = make(async () => ({ rescheduleAt: clock.now() + 30_000 }));
    const id = await add();
    for (let i = 0; i < 5; i++) {
      await w.runUntilIdle();
      clock.advance(30_000);
    }
    expect(await job(id)).toMatchObject({ state: 'pending', attempts: 0 });
  });
});
