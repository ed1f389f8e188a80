import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { PRUNE_BATCH, pruneBatch, pruneFinishedJobs } from '../../src/queue/pruneJobs.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { until } from '../cli/helpers.js';

let r: TestReceiver | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

const DAY = 86_400_000;

/** Jobs of every state, finished (or not) at the given ages before `now`. */
function seed(r: TestReceiver, now: number): void {
  const insert = r.app.database.ingestSqlite.prepare(
    `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, last_error, created_at, updated_at, finished_at)
     VALUES (?, '{}', ?, 'default', ?, ?, 1, 3, NULL, ?, ?, ?)`,
  );
  const at = (ageMs: number) => new Date(now - ageMs).toISOString();
  for (let i = 0; i < 1_203; i++) insert.run('fetch_result', `old-done-${i}`, 'done', at(40 * DAY), at(40 * DAY), at(40 * DAY), at(40 * DAY));
  insert.run('fetch_result', 'recent-done', 'done', at(2 * DAY), at(2 * DAY), at(2 * DAY), at(2 * DAY));
  insert.run('fetch_result', 'old-dead', 'dead', at(40 * DAY), at(40 * DAY), at(40 * DAY), at(40 * DAY));
  // Created long ago, still to run (backing off until tomorrow).
  insert.run('fetch_result', 'old-pending', 'pending', at(-DAY), at(40 * DAY), at(40 * DAY), null);
}

const left = (r: TestReceiver) => r.app.database.ingestSqlite.prepare('SELECT event_id, state FROM jobs ORDER BY id').all() as { event_id: string; state: string }[];

describe('JOB_RETENTION_DAYS: finished jobs are deleted by the workers', () => {
  it('a batch reads only the finished jobs due before the cutoff (the index range), not every finished job', async () => {
    r = await startReceiver({ WEBHOOK_SECRET: newSecret() }, { listen: false });
    const q = pruneBatch(r.app.database.db, '2026-10-27T08:00:00.000Z', PRUNE_BATCH).compile();
    const plan = (r.app.database.ingestSqlite.prepare(`EXPLAIN QUERY PLAN ${q.sql}`).all(...q.parameters) as { detail: string }[]).map((p) => p.detail);
    expect(plan).toContain('SEARCH jobs USING INDEX jobs_ready (state=? AND run_at<?)');
  });

  it('deletes finished jobs past the retention (in several short transactions), never dead letters or jobs still to run', async () => {
    const clock = new ManualClock(Date.parse('2026-11-26T08:00:00Z'));
    r = await startReceiver({ WEBHOOK_SECRET: newSecret(), JOB_RETENTION_DAYS: '30' }, { clock, listen: false });
    seed(r, clock.now());
    await r.app.startWorkers();
    await until(() => left(r!).length === 3, 'the prune');
    expect(left(r)).toEqual([
      { event_id: 'recent-done', state: 'done' },
      { event_id: 'old-dead', state: 'dead' },
      { event_id: 'old-pending', state: 'pending' },
    ]);
    expect(r.logs.lines).toContainEqual(expect.objectContaining({ msg: 'finished jobs past JOB_RETENTION_DAYS deleted', jobs: 1_203, finished_before: '2026-10-27T08:00:00.000Z' }));
  });

  it('JOB_RETENTION_DAYS=0 keeps them', async () => {
    const clock = new ManualClock(Date.parse('2026-11-26T08:00:00Z'));
    r = await startReceiver({ WEBHOOK_SECRET: newSecret(), JOB_RETENTION_DAYS: '0' }, { clock, listen: false });
    seed(r, clock.now());
    await r.app.startWorkers();
    // A stop waits for a prune in progress: after it, any prune of the start has finished.
    await r.app.stop();
    const sqlite = new BetterSqlite3(r.dbPath, { readonly: true });
    try {
      expect(sqlite.prepare("SELECT count(*) FROM jobs WHERE state = 'done'").pluck().get()).toBe(1_204);
    } finally {
      sqlite.close();
    }
  });
});

describe('pruneFinishedJobs stopped by a signal', () => {
  const cutoff = '2026-10-27T08:00:00.000Z';

  it('a signal aborted before it began reads nothing: the receiver\'s sweep that began as it stopped, after its database was closed', async () => {
    r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '0' }, { listen: false });
    // stop() aborts the prune's signal, then closes the database; a sweep still in flight calls
    // pruneHistory after that (it logged "deleting finished jobs ... failed" after "receiver stopped").
    await r.app.stop();
    const stop = new AbortController();
    stop.abort();
    await expect(pruneFinishedJobs(r.app.database.db, cutoff, { signal: stop.signal })).resolves.toEqual({ written: 0, stopped: true });
  });

  it('a look for jobs left that fails leaves it stopped, with the count of the batches committed (not an error without it)', async () => {
    const clock = new ManualClock(Date.parse('2026-11-26T08:00:00Z'));
    r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '0' }, { clock, listen: false });
    seed(r, clock.now());
    const stop = new AbortController();
    const app = r.app;
    // The signal comes in the pause after the first (full) batch, and the look that follows fails
    // (here: the database closed meanwhile; on the CLI, an I/O error, say).
    const pause = async () => {
      stop.abort();
      await app.stop();
    };
    await expect(pruneFinishedJobs(app.database.db, cutoff, { signal: stop.signal, pause })).resolves.toEqual({ written: PRUNE_BATCH, stopped: true });
  });
});
