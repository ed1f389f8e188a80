import BetterSqlite3 from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openDatabase } from '../../src/db/openDatabase.js';
import { RETRY_BATCH } from '../../src/queue/JobQueue.js';
import { UNFINISHED_LAST_ATTEMPT } from '../../src/queue/Worker.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, signDelivery } from '../helpers/signing.js';
import { runTs } from '../helpers/childServer.js';
import { LineSink } from './helpers.js';

const T = '2026-11-02T00:00:00.000Z';
/** Per sink: several batches of the start-up housekeeping. */
const N = 4 * RETRY_BATCH + 7;

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

/**
 * A new database in `dir`, and writers of a (sink, event) pair's job and deliveries row (by default
 * attempts 1 of 25, the row's last_error 'HTTP 503'), as a crash or an earlier version left them.
 */
function pairsDatabase(dir: string) {
  const dbPath = join(dir, 'receiver.db');
  const database = openDatabase(dbPath);
  const jobs = database.sqlite.prepare(
    "INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, last_error, created_at, updated_at) VALUES (?, '{}', ?, ?, ?, ?, ?, ?, ?, ?, ?)",
  );
  const deliveries = database.sqlite.prepare(
    'INSERT INTO deliveries (event_id, sink, message_id, state, attempts, last_error, queued_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)',
  );
  type Job = { runAt?: string; attempts?: number; maxAttempts?: number };
  return {
    dbPath,
    database,
    job: (sink: string, eventId: string, state: string, error: string | null, o: Job = {}) =>
      jobs.run(`sink:${sink}`, eventId, `sink:${sink}`, state, o.runAt ?? T, o.attempts ?? 1, o.maxAttempts ?? 25, error, T, T),
    delivery: (sink: string, eventId: string, state: string, o: { attempts?: number; error?: string | null } = {}) =>
      deliveries.run(eventId, sink, `msg_${eventId}`, state, o.attempts ?? 1, o.error === undefined ? 'HTTP 503' : o.error, T, T, T),
  };
}

/** A receiver on `dbPath` whose only sink is the stdout sink `crm`, its workers started (the start's housekeeping done). */
async function startWorkersWithStdoutSink(dir: string, dbPath: string): Promise<TestReceiver> {
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'stdout' }] }));
  const r = await startReceiver(
    { DATABASE_PATH: dbPath, CONFIG_FILE: config, WEBHOOK_SECRET: newSecret(), LOG_LEVEL: 'info' },
    { listen: false, sinks: { stdout: new LineSink() } },
  );
  cleanups.push(() => r.close());
  await r.app.startWorkers();
  return r;
}

/** A database whose queue holds `n` deliveries waiting for `crm` (queued with max_attempts 3) and `n` for `gone`. */
function databaseWithWaitingDeliveries(dir: string, n = N): string {
  const { dbPath, database, job, delivery } = pairsDatabase(dir);
  database.sqlite.transaction(() => {
    for (const sink of ['crm', 'gone']) {
      for (let i = 0; i < n; i++) {
        const eventId = `evt_${sink}_${i}`;
        job(sink, eventId, 'pending', null, { attempts: i % 3, maxAttempts: 3 });
        delivery(sink, eventId, i % 3 ? 'retrying' : 'pending', { attempts: i % 3, error: null });
      }
    }
  })();
  database.sqlite.close();
  return dbPath;
}

describe("the sink housekeeping at the workers' start", () => {
  it("lets deliveries commit between its batches, each batch's jobs and deliveries rows changed together, and ends with every waiting delivery on the sink's max_attempts and the removed sink's dead", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const dbPath = databaseWithWaitingDeliveries(t.dir);
    const config = join(t.dir, 'config.json');
    // `gone` was removed from the configuration; crm's max_attempts raised from 3 to 50.
    writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'stdout', max_attempts: 50 }] }));
    const secret = newSecret();
    const r: TestReceiver = await startReceiver(
      { DATABASE_PATH: dbPath, CONFIG_FILE: config, WEBHOOK_SECRET: secret, LOG_LEVEL: 'info' },
      { listen: false, sinks: { stdout: new LineSink() } },
    );
    cleanups.push(() => r.close());
    const other = new BetterSqlite3(dbPath, { readonly: true });
    cleanups.push(() => void other.close());
    const seen = other.prepare(`SELECT
        (SELECT COUNT(*) FROM jobs WHERE kind = 'sink:crm' AND state = 'pending' AND max_attempts = 3) AS crm_unchanged,
        (SELECT COUNT(*) FROM jobs WHERE kind = 'sink:gone' AND state = 'pending') AS gone_pending,
        (SELECT COUNT(*) FROM jobs j JOIN deliveries d ON d.event_id = j.event_id AND d.sink = 'gone'
          WHERE j.kind = 'sink:gone' AND (j.state = 'dead') <> (d.state = 'dead')) AS out_of_step`);

    // Deliveries keep arriving while the receiver starts (it listens before its workers start).
    const observed: { crm_unchanged: number; gone_pending: number; out_of_step: number }[] = [];
    let started = false;
    const starting = r.app.start().finally(() => (started = true));
    let posted = 0;
    while (!started && posted < 10_000) {
      const d = signDelivery(secret, JSON.stringify(envelope()));
      const res = await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body });
      expect(res.status).toBe(200);
      posted++;
      observed.push(seen.get() as (typeof observed)[number]);
    }
    await starting;

    // Deliveries were committed while the housekeeping was part-way through each step.
    expect(observed.some((o) => o.gone_pending > 0 && o.gone_pending < N)).toBe(true);
    expect(observed.some((o) => o.gone_pending === 0 && o.crm_unchanged > 0 && o.crm_unchanged < N)).toBe(true);
    // Never a dead job whose deliveries row still says it waits (or the reverse).
    expect(observed.filter((o) => o.out_of_step > 0)).toEqual([]);

    const sqlite = r.app.database.ingestSqlite;
    // (The events posted meanwhile were processed and queued to crm too, with 50; crm's worker runs now.)
    expect(sqlite.prepare("SELECT max_attempts, COUNT(*) AS n FROM jobs WHERE kind = 'sink:crm' AND event_id LIKE 'evt_crm_%' GROUP BY 1").all()).toEqual([{ max_attempts: 50, n: N }]);
    expect(sqlite.prepare("SELECT state, last_error, COUNT(*) AS n FROM jobs WHERE kind = 'sink:gone' GROUP BY 1, 2").all()).toEqual([
      { state: 'dead', last_error: 'sink is no longer configured', n: N },
    ]);
    expect(sqlite.prepare("SELECT state, last_error, COUNT(*) AS n FROM deliveries WHERE sink = 'gone' GROUP BY 1, 2").all()).toEqual([
      { state: 'dead', last_error: 'sink is no longer configured', n: N },
    ]);
    const line = (msg: string) => r.logs.lines.filter((l) => l.msg === msg);
    expect(line('deliveries of sinks no longer configured are now dead letters')).toEqual([expect.objectContaining({ deliveries: N })]);
    expect(line("queued deliveries take the sink's max_attempts as configured now")).toEqual([expect.objectContaining({ sink: 'crm', deliveries: N, max_attempts: 50 })]);
  });

  it('marks dead the rows of a removed sink an earlier version left saying pending with their jobs dead (a stop between its two steps)', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const { dbPath, database, job, delivery } = pairsDatabase(t.dir);
    const row = (sink: string, eventId: string, jobState: string | null, jobError: string | null, state: string) => {
      if (jobState) job(sink, eventId, jobState, jobError);
      delivery(sink, eventId, state);
    };
    // What the earlier version's interrupted start left: the jobs dead, their rows not.
    row('gone', 'e1', 'dead', 'sink is no longer configured', 'retrying');
    row('gone', 'e2', 'dead', 'sink is no longer configured', 'pending');
    // Its dead letter since discarded (or pruned): the row alone.
    row('gone', 'e3', null, null, 'retrying');
    // Still delivered, and one a configured sink's worker will send: left alone.
    row('gone', 'e4', 'done', null, 'delivered');
    row('crm', 'e1', 'pending', null, 'retrying');
    database.sqlite.close();
    const r = await startWorkersWithStdoutSink(t.dir, dbPath);
    const rows = r.app.database.ingestSqlite.prepare("SELECT event_id, state, last_error FROM deliveries WHERE sink = 'gone' ORDER BY event_id").all();
    expect(rows).toEqual([
      { event_id: 'e1', state: 'dead', last_error: 'sink is no longer configured' },
      { event_id: 'e2', state: 'dead', last_error: 'sink is no longer configured' },
      { event_id: 'e3', state: 'dead', last_error: 'sink is no longer configured' },
      { event_id: 'e4', state: 'delivered', last_error: 'HTTP 503' },
    ]);
    // (crm's worker runs it now: whatever it records, not this.)
    expect(r.app.database.ingestSqlite.prepare("SELECT COUNT(*) FROM deliveries WHERE sink = 'crm' AND last_error = 'sink is no longer configured'").pluck().get()).toBe(0);
    expect(r.logs.lines.filter((l) => l.msg === 'deliveries of sinks no longer configured that still said pending, with no job left to send them, now say dead')).toEqual([
      expect.objectContaining({ deliveries: 3 }),
    ]);
  });

  it("marks dead the rows of a configured sink whose job was dead-lettered while the row's own record of it never committed (a crash or a refused write between the two)", async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    const { dbPath, database, job, delivery } = pairsDatabase(t.dir);
    const LATER = '2099-01-01T00:00:00.000Z';
    // The runner's dead letter committed, FanOut's onDeadLetter (the row's record of it) did not:
    // claimed past its last attempt (2 of 1 here), never run.
    job('crm', 'e1', 'dead', UNFINISHED_LAST_ATTEMPT, { attempts: 2 });
    delivery('crm', 'e1', 'retrying');
    // Sound: a dead letter recorded on its row; a delivery waiting for its next attempt; a dead
    // letter whose pair a replay queued again (its new job pending).
    job('crm', 'e2', 'dead', 'HTTP 500');
    delivery('crm', 'e2', 'dead');
    job('crm', 'e3', 'pending', null, { runAt: LATER });
    delivery('crm', 'e3', 'retrying');
    job('crm', 'e4', 'dead', 'HTTP 500');
    job('crm', 'e4', 'pending', null, { runAt: LATER });
    delivery('crm', 'e4', 'pending');
    database.sqlite.close();
    const r = await startWorkersWithStdoutSink(t.dir, dbPath);
    const rows = r.app.database.ingestSqlite.prepare("SELECT event_id, state, last_error FROM deliveries WHERE sink = 'crm' ORDER BY event_id").all();
    expect(rows).toEqual([
      { event_id: 'e1', state: 'dead', last_error: UNFINISHED_LAST_ATTEMPT },
      { event_id: 'e2', state: 'dead', last_error: 'HTTP 503' },
      { event_id: 'e3', state: 'retrying', last_error: 'HTTP 503' },
      { event_id: 'e4', state: 'pending', last_error: 'HTTP 503' },
    ]);
    expect(r.logs.lines.filter((l) => l.msg === "deliveries whose dead letter was never recorded on them (a crash or a refused write between the two) now say dead")).toEqual([
      expect.objectContaining({ deliveries: 1 }),
    ]);
  });

  it('ends part-way at a SIGTERM (each batch whole, the sink lanes not started), exits 0, and the next start finishes it', async () => {
    const t = tempDir();
    cleanups.push(t.cleanup);
    // Many batches of each step, so the signal lands while they are under way.
    const n = 40 * RETRY_BATCH;
    const dbPath = databaseWithWaitingDeliveries(t.dir, n);
    const config = join(t.dir, 'config.json');
    writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'file', path: join(t.dir, 'crm.ndjson'), max_attempts: 50 }] }));
    const env = { DATABASE_PATH: dbPath, CONFIG_FILE: config, WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused' };
    const child = runTs('src/main.ts', [], { ...env, PORT: '0', HOST: '127.0.0.1' });
    const kill = setTimeout(() => child.proc.kill('SIGKILL'), 60_000);
    cleanups.push(() => clearTimeout(kill));
    const other = new BetterSqlite3(dbPath, { readonly: true });
    cleanups.push(() => void other.close());
    const goneDead = other.prepare("SELECT COUNT(*) FROM jobs WHERE kind = 'sink:gone' AND state = 'dead'").pluck();
    // Signalled once its first batch committed (bounded: the child's own deadline above).
    let exitedEarly = false;
    void child.exited.then(() => (exitedEarly = true));
    while ((goneDead.get() as number) === 0 && !exitedEarly) await new Promise((r) => setTimeout(r, 2));
    child.proc.kill('SIGTERM');
    expect(await child.exited).toEqual({ code: 0, signal: null });
    // Not finished: the signal waited for none of the remaining batches.
    const left = other.prepare(`SELECT
        (SELECT COUNT(*) FROM jobs WHERE kind = 'sink:gone' AND state = 'pending') + (SELECT COUNT(*) FROM jobs WHERE kind = 'sink:crm' AND max_attempts = 3) AS n`).pluck();
    expect(left.get()).toBeGreaterThan(0);
    const msgs = child.stdout.join('').trim().split('\n').map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(msgs).toContain("the stop came during the start's sink housekeeping: ended part-way, the next start finishes it");
    // Not 'workers started' (its line lists crm, whose lane never started).
    expect(msgs).toContain('the stop came during the start: the sink lanes were not started, and processing stops with the receiver');
    expect(msgs).not.toContain('workers started');
    expect(msgs.at(-1)).toBe('receiver stopped');
    // What was done is whole: no dead job of `gone` with its row still waiting, or the reverse.
    const outOfStep = other.prepare(`SELECT COUNT(*) FROM jobs j JOIN deliveries d ON d.event_id = j.event_id AND d.sink = 'gone'
        WHERE j.kind = 'sink:gone' AND (j.state = 'dead') <> (d.state = 'dead')`).pluck();
    expect(outOfStep.get()).toBe(0);
    // No crm delivery was sent: its lane did not start.
    expect(other.prepare("SELECT COUNT(*) FROM jobs WHERE kind = 'sink:crm' AND state <> 'pending'").pluck().get()).toBe(0);

    const r = await startReceiver({ ...env, LOG_LEVEL: 'info' }, { listen: false });
    cleanups.push(() => r.close());
    await r.app.startWorkers();
    expect(left.get()).toBe(0);
    expect(outOfStep.get()).toBe(0);
    expect(r.logs.lines.some((l) => l.msg === "the stop came during the start's sink housekeeping: ended part-way, the next start finishes it")).toBe(false);
  });
});
