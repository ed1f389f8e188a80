import BetterSqlite3 from 'better-sqlite3';
import { Kysely, SqliteDialect, type CompiledQuery } from 'kysely';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Database } from '../../src/db/schema.js';
import { JobQueue } from '../../src/queue/JobQueue.js';
import { ManualClock } from '../../src/util/clock.js';
import { markRetried } from '../../src/cli/commands/deadLetters.js';
import type { SinkConfig } from '../../src/sinks/sinkConfig.js';
import { cli } from '../cli/helpers.js';
import { scratchDatabase } from '../helpers/database.js';
import { SinkGate } from '../../src/sinks/SinkGate.js';
import { disableSink } from '../../src/sinks/deliveryRecords.js';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';

// A sink's consumer down for longer than its retries (about 14 h): every delivery of that time is
// a dead letter, and `dead-letters retry --kind sink:<name>` sends them all once it is back. Next
// to a running receiver, whose deliveries wait WRITE_TIMEOUT_MS for the write lock.

/** Dead letters per transaction (RETRY_BATCH), and a number of them that needs three. */
const BATCH = 500;
const N = 2 * BATCH + 200;
const T = '2026-11-01T00:00:00.000Z';

/** `n` dead-lettered deliveries to sink `crm`: their jobs and their `deliveries` rows. */
function deadLetters(sqlite: BetterSqlite3.Database, n: number): void {
  const job = jobSeeder(sqlite);
  const delivery = sqlite.prepare(
    "INSERT INTO deliveries (event_id, sink, message_id, state, attempts, last_status_code, last_error, last_attempt_at, queued_at, created_at, updated_at) VALUES (?, 'crm', ?, 'dead', 25, 503, 'HTTP 503', ?, ?, ?, ?)",
  );
  sqlite.transaction(() => {
    for (let i = 0; i < n; i++) {
      const e = `evt_${String(i).padStart(6, '0')}`;
      job({ kind: 'sink:crm', payload: JSON.stringify({ event_id: e }), event_id: e, state: 'dead', run_at: T, attempts: 25, last_error: 'HTTP 503', finished_at: T });
      delivery.run(e, `msg_${i}`, T, T, T, T);
    }
  })();
}

const states = (sqlite: BetterSqlite3.Database, table: 'jobs' | 'deliveries') =>
  Object.fromEntries((sqlite.prepare(`SELECT state, COUNT(*) AS n FROM ${table} GROUP BY state`).all() as { state: string; n: number }[]).map((r) => [r.state, r.n]));

describe('dead-letters retry of many dead letters', () => {
  it('runs them again in short transactions: another connection gets the write lock between two, and sees each one committed', async () => {
    const database = scratchDatabase();
    deadLetters(database.sqlite, N);
    const other = new BetterSqlite3(database.sqlite.name);
    other.pragma('busy_timeout = 0');
    const seen: number[] = [];
    try {
      const queue = new JobQueue(database.db, new ManualClock(Date.parse(T) + 3_600_000));
      const retried = await queue.retryDeadLetters(
        { kind: 'sink:crm' },
        {
          pause: async () => {
            // A delivery's commit here would not wait for the whole retry (throws SQLITE_BUSY if the lock is held).
            other.exec('BEGIN IMMEDIATE');
            seen.push(other.prepare("SELECT COUNT(*) FROM jobs WHERE state = 'pending'").pluck().get() as number);
            other.exec('ROLLBACK');
          },
          withEach: async (trx, ids) => {
            await trx.updateTable('deliveries').set({ state: 'pending' }).where('state', '=', 'dead').where('event_id', 'in', trx.selectFrom('jobs').select('event_id').where('id', 'in', ids)).execute();
          },
        },
      );
      expect(retried).toBe(N);
      expect(seen).toEqual([BATCH, 2 * BATCH]);
      expect(states(database.sqlite, 'jobs')).toEqual({ pending: N });
      expect(states(database.sqlite, 'deliveries')).toEqual({ pending: N });
    } finally {
      other.close();
    }
  });

  it('the CLI sends every one of them again with one command, each delivery pending at once', async () => {
    const database = scratchDatabase();
    deadLetters(database.sqlite, N);
    const retry = await cli(['dead-letters', 'retry', '--kind', 'sink:crm'], { DATABASE_PATH: database.sqlite.name });
    expect({ code: retry.code, stderr: retry.stderr, stdout: retry.stdout }).toEqual({
      code: 0,
      stderr: '',
      stdout: `${N} dead-lettered jobs queued again (pending now; the receiver's workers run them)\n`,
    });
    expect(states(database.sqlite, 'jobs')).toEqual({ pending: N });
    expect(states(database.sqlite, 'deliveries')).toEqual({ pending: N });
    expect(database.sqlite.prepare('SELECT COUNT(*) FROM deliveries WHERE attempts <> 0 OR last_error IS NOT NULL').pluck().get()).toBe(0);
  });

  it("gives the retried deliveries, and the sink's others waiting, its max_attempts as configured now", async () => {
    const database = scratchDatabase();
    deadLetters(database.sqlite, N);
    // A delivery waiting (not a dead letter) takes it too, as README says (in batches as well: one
    // statement over all of them held the write lock 0.6 s after a retry of 200,000).
    const waiting = jobSeeder(database.sqlite)({ kind: 'sink:crm', event_id: 'evt_waiting', state: 'pending', run_at: T, attempts: 2 });
    const t = tempDir();
    try {
      const config = join(t.dir, 'config.json');
      writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'file', path: join(t.dir, 'out.ndjson'), max_attempts: 40 }] }));
      const retry = await cli(['dead-letters', 'retry', '--kind', 'sink:crm', '--json'], { DATABASE_PATH: database.sqlite.name, CONFIG_FILE: config });
      expect({ code: retry.code, stderr: retry.stderr, stdout: JSON.parse(retry.stdout) }).toEqual({ code: 0, stderr: '', stdout: { dry_run: false, retried: N } });
      expect(database.sqlite.prepare("SELECT max_attempts, COUNT(*) AS n FROM jobs WHERE state = 'pending' GROUP BY max_attempts").all()).toEqual([{ max_attempts: 40, n: N + 1 }]);
      expect(database.sqlite.prepare('SELECT attempts, max_attempts FROM jobs WHERE id = ?').get(waiting)).toEqual({ attempts: 2, max_attempts: 40 });
    } finally {
      t.cleanup();
    }
  });

  it('each transaction gives its jobs the max_attempts configured now: a worker that runs one between two sees it', async () => {
    const database = scratchDatabase();
    deadLetters(database.sqlite, N);
    const other = new BetterSqlite3(database.sqlite.name);
    const unmarked: number[] = [];
    try {
      const queue = new JobQueue(database.db, new ManualClock(Date.parse(T) + 3_600_000));
      const sink = { name: 'crm', maxAttempts: 40 } as SinkConfig;
      await queue.retryDeadLetters(
        { kind: 'sink:crm' },
        {
          pause: async () => void unmarked.push(other.prepare("SELECT COUNT(*) FROM jobs WHERE state = 'pending' AND max_attempts <> 40").pluck().get() as number),
          withEach: (trx, ids) => markRetried(trx, ids, [sink], T),
        },
      );
      expect(unmarked).toEqual([0, 0]);
      expect(states(database.sqlite, 'deliveries')).toEqual({ pending: N });
    } finally {
      other.close();
    }
  });
});

describe('what each transaction of a dead-letter retry reads', () => {
  it('finds the jobs it marks by their ids, not through an index on state over every pending job', async () => {
    // A retry next to a backlog (a sink's consumer down: 600,000 deliveries backing off): reading
    // every pending job in each transaction held the write lock about 190 ms per 500 dead letters,
    // 39 s for 100,000 (3 s by id), and more with each batch, as the retried jobs are pending too.
    const database = scratchDatabase();
    deadLetters(database.sqlite, 3);
    const ids = database.sqlite.prepare('SELECT id FROM jobs').pluck().all() as number[];
    const statements: CompiledQuery[] = [];
    const logged = new Kysely<Database>({ dialect: new SqliteDialect({ database: database.sqlite }), log: (e) => void statements.push(e.query) });
    await logged.transaction().execute((trx) => markRetried(trx, ids, [{ name: 'crm', maxAttempts: 40 } as SinkConfig], T));
    const plans = statements.filter((q) => /^\s*(update|insert)/i.test(q.sql)).map((q) => ({
      sql: q.sql,
      jobs: (database.sqlite.prepare(`EXPLAIN QUERY PLAN ${q.sql}`).all(...q.parameters) as { detail: string }[]).map((p) => p.detail).filter((d) => / jobs /.test(d)),
    }));
    expect(plans.length).toBe(3);
    for (const p of plans) expect(p).toEqual({ sql: p.sql, jobs: ['SEARCH jobs USING INTEGER PRIMARY KEY (rowid=?)'] });
  });
});

describe("dead-letters retry and a running sink worker's view of sink_state", () => {
  it("stamps the sink once per retry: the worker ends its Retry-After wait once, and a 410 to an attempt sent after the retry began still disables the sink", async () => {
    const database = scratchDatabase();
    deadLetters(database.sqlite, N);
    const clock = new ManualClock(Date.now());
    const gate = new SinkGate(database.db, clock, 'crm', 'http://127.0.0.1:1/crm');
    // The worker's first claim: the stamp it compares the next ones with.
    await gate.blockedSources();
    const released: boolean[] = [];
    let sentAt: number | null = null;
    const queue = new JobQueue(database.db, clock);
    await queue.retryDeadLetters(
      { kind: 'sink:crm' },
      {
        pause: async () => {
          // The worker claims between two transactions of the retry (a few ms apart).
          await new Promise((ok) => setTimeout(ok, 5));
          released.push((await gate.blockedSources()).released !== undefined);
          // An attempt sent now, after the retry began (and the worker's wait ended).
          sentAt ??= Date.now();
          await new Promise((ok) => setTimeout(ok, 5));
        },
        withEach: (trx, ids) => markRetried(trx, ids, [], new Date(clock.now()).toISOString()),
      },
    );
    released.push((await gate.blockedSources()).released !== undefined);
    // The consumer is gone for good: its 410 to that attempt disables the sink.
    const disabled = await disableSink(database.db, 'crm', { reason: 'HTTP 410 Gone', status: 410, target: 'http://127.0.0.1:1/crm' }, Date.now(), sentAt!);
    expect({ released, disabled }).toEqual({ released: [true, false, false], disabled: true });
  });
});
