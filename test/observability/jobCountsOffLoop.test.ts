import { statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { describe, expect, it, onTestFinished } from 'vitest';
import { createApp } from '../../src/app.js';
import type { CheckpointerOptions } from '../../src/db/checkpointer.js';
import { loadConfig } from '../../src/config/loadConfig.js';
import { openDatabase } from '../../src/db/openDatabase.js';
import { createLogger } from '../../src/observability/logger.js';
import { cli } from '../cli/helpers.js';
import { jobSeeder } from '../helpers/jobs.js';
import { LogCapture, tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { waitFor } from '../helpers/waitFor.js';

const PAST = '2025-01-01T00:00:00.000Z';
const KINDS = ['process_event', 'fetch_result', 'sink:hook'];

/** A database file of the test's own, migrated, with a sink `hook` in its CONFIG_FILE. */
function scratch() {
  const t = tempDir('job-counts-');
  const path = join(t.dir, 'r.db');
  const configFile = join(t.dir, 'config.json');
  writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'hook', type: 'file', path: join(t.dir, 'hook.ndjson') }] }));
  onTestFinished(t.cleanup);
  return { path, configFile };
}

/**
 * A real receiver (no workers: the test makes every job change) listening on 127.0.0.1, on the
 * database at `path`, opened with the checkpointer thread or without (`false`). `countsOnLoop`
 * records each run of the job-count or quarantine-count statement on the receiver's own two
 * connections (the loop).
 */
async function receiver(path: string, configFile: string, checkpointer: CheckpointerOptions | false, env: Record<string, string> = {}) {
  const config = loadConfig({
    DATABASE_PATH: path,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'error',
    HIRING_API_URL: 'http://127.0.0.1:9',
    HIRING_API_KEY: 'sk-test.unused',
    WORKER_CONCURRENCY: '0',
    CONFIG_FILE: configFile,
    WEBHOOK_SECRET: newSecret(),
    ...env,
  });
  const database = openDatabase(path, { checkpointer });
  const countsOnLoop: string[] = [];
  for (const conn of [database.sqlite, database.ingestSqlite]) {
    const prepare = conn.prepare.bind(conn);
    conn.prepare = ((source: string) => {
      const st = prepare(source);
      if (/GROUP BY state, kind|FROM quarantine$/.test(source)) {
        const [all, get] = [st.all.bind(st), st.get.bind(st)];
        st.all = ((...args: unknown[]) => {
          countsOnLoop.push(source);
          return all(...args);
        }) as typeof st.all;
        st.get = ((...args: unknown[]) => {
          countsOnLoop.push(source);
          return get(...args);
        }) as typeof st.get;
      }
      return st;
    }) as typeof conn.prepare;
  }
  const logs = new LogCapture();
  const app = createApp({ config, database, logger: createLogger('error', logs) });
  const { metricsUrl } = await app.start();
  let stopped = false;
  const stop = async () => {
    if (!stopped) await app.stop();
    stopped = true;
  };
  onTestFinished(stop);
  /** receiver_jobs of one GET /metrics, as `state kind` -> n, and receiver_quarantined. */
  const scrape = async () => {
    const text = await (await fetch(metricsUrl)).text();
    const out: Record<string, number> = {};
    for (const m of text.matchAll(/^receiver_jobs\{state="(\w+)",kind="([^"]+)"\} (\S+)$/gm)) out[`${m[1]} ${m[2]}`] = Number(m[3]);
    out.quarantined = Number(/^receiver_quarantined (\S+)$/m.exec(text)?.[1]);
    return out;
  };
  return { app, database, logs, metricsUrl, countsOnLoop, scrape, stop };
}

/** What receiver_jobs must say (every kind's pending, running and dead series, from a GROUP BY of the jobs now), and receiver_quarantined. */
function expected(w: BetterSqlite3.Database): Record<string, number> {
  const out: Record<string, number> = {};
  for (const kind of KINDS) for (const state of ['pending', 'running', 'dead']) out[`${state} ${kind}`] = 0;
  const rows = w.prepare("SELECT state, kind, COUNT(*) AS n FROM jobs WHERE state IN ('pending', 'running', 'dead') GROUP BY state, kind").all() as { state: string; kind: string; n: number }[];
  for (const r of rows) out[`${r.state} ${r.kind}`] = r.n;
  out.quarantined = w.prepare('SELECT COUNT(*) FROM quarantine').pluck().get() as number;
  return out;
}

/** Migrated by the CLI, with jobs of every state seeded through a connection of the test's own. */
async function seeded(path: string) {
  expect((await cli(['migrate'], { DATABASE_PATH: path })).code).toBe(0);
  const w = new BetterSqlite3(path);
  onTestFinished(() => {
    w.close();
  });
  const seed = jobSeeder(w);
  w.transaction(() => {
    for (let i = 0; i < 3; i++) seed({ kind: 'process_event', event_id: `evt_p${i}`, state: 'pending', run_at: PAST });
    for (let i = 0; i < 2; i++) seed({ kind: 'fetch_result', event_id: `evt_f${i}`, state: 'pending', run_at: PAST });
    for (let i = 0; i < 4; i++) seed({ kind: 'sink:hook', event_id: `evt_d${i}`, state: 'dead', run_at: PAST, attempts: 8, last_error: 'HTTP 500' });
    for (let i = 0; i < 5; i++) seed({ kind: 'process_event', event_id: `evt_x${i}`, state: 'done', run_at: PAST, finished_at: PAST });
  })();
  return w;
}

describe('receiver_jobs and receiver_quarantined (the counts of a scrape) read on the checkpointer thread', () => {
  it('is exact after every job change (the receiver\'s and the CLI\'s), and the count never runs on the receiver\'s connections', { timeout: 60_000 }, async () => {
    const { path, configFile } = scratch();
    const w = await seeded(path);
    const r = await receiver(path, configFile, { intervalMs: 20 });
    const env = { DATABASE_PATH: path, CONFIG_FILE: configFile };
    expect(await r.scrape()).toEqual(expected(w));
    expect(expected(w)['pending process_event']).toBe(3);

    w.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', x'00')").run();
    expect(await r.scrape()).toMatchObject({ quarantined: 1 });

    // Inserted by another connection, claimed, finished and dead-lettered by the receiver's queue.
    jobSeeder(w)({ kind: 'fetch_result', event_id: 'evt_f9', state: 'pending', run_at: PAST });
    expect(await r.scrape()).toEqual(expected(w));
    const claimed = await r.app.queue.claim('test', 3, [], ['process_event']);
    expect(claimed).toHaveLength(3);
    expect(await r.scrape()).toMatchObject({ 'running process_event': 3, 'pending process_event': 0 });
    expect(await r.scrape()).toEqual(expected(w));
    expect(await r.app.queue.complete(claimed[0]!)).toBe(true);
    expect(await r.app.queue.deadLetter(claimed[1]!, 'boom')).toBe(true);
    expect(await r.scrape()).toEqual(expected(w));
    expect(expected(w)).toMatchObject({ 'running process_event': 1, 'dead process_event': 1 });

    // The CLI as a child process: retry, discard, prune.
    expect((await cli(['dead-letters', 'retry', '--kind', 'sink:hook'], env)).code).toBe(0);
    expect(await r.scrape()).toEqual(expected(w));
    expect(expected(w)).toMatchObject({ 'pending sink:hook': 4, 'dead sink:hook': 0 });
    const dead = jobSeeder(w)({ kind: 'sink:hook', event_id: 'evt_d9', state: 'dead', run_at: PAST, attempts: 8 });
    expect(await r.scrape()).toMatchObject({ 'dead sink:hook': 1 });
    expect((await cli(['dead-letters', 'discard', '--id', String(dead)], env)).code).toBe(0);
    expect(await r.scrape()).toEqual(expected(w));
    expect(expected(w)['dead sink:hook']).toBe(0);
    const pruned = await cli(['prune', '--older-than', '1h', '--json'], env);
    expect(pruned.code).toBe(0);
    // The five seeded long ago; the one finished above stays.
    expect(w.prepare("SELECT COUNT(*) FROM jobs WHERE state = 'done'").pluck().get()).toBe(1);
    expect(await r.scrape()).toEqual(expected(w));

    // Every one of those counts was read off the loop.
    expect(expected(w).quarantined).toBe(1);
    expect(r.countsOnLoop).toEqual([]);
  });

  it('counts on the loop, exact, while the thread cannot answer in time, and on the thread again once it can; and without a thread', { timeout: 60_000 }, async () => {
    const { path, configFile } = scratch();
    const w = await seeded(path);
    // A RESTART checkpoint waits up to restartWaitMs for the write lock: with the test holding it,
    // the thread is held for 10 s at a time, past readAnswerMs.
    const r = await receiver(path, configFile, { intervalMs: 20, maxWalBytes: 64 * 1024, restartWaitMs: 10_000, readAnswerMs: 300 });
    expect(await r.scrape()).toEqual(expected(w));
    expect(r.countsOnLoop).toEqual([]);

    // Past maxWalBytes (2 KB pages: each 4 KB body is three frames), then the write lock held.
    const fill = w.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)");
    w.transaction(() => {
      for (let i = 0; i < 60; i++) fill.run(Buffer.alloc(4096, i));
    })();
    jobSeeder(w)({ kind: 'sink:hook', event_id: 'evt_h1', state: 'pending', run_at: PAST });
    w.exec('BEGIN IMMEDIATE');
    let held: Record<string, number> | undefined;
    for (let i = 0; i < 50 && r.countsOnLoop.length === 0; i++) held = await r.scrape();
    expect(r.countsOnLoop.length).toBeGreaterThan(0);
    w.exec('COMMIT');
    expect(held).toEqual(expected(w));
    expect(held).toMatchObject({ 'pending sink:hook': 1, quarantined: 60 });

    // Released: the thread answers the read it was late with, then the next ones.
    let onThread = false;
    for (let i = 0; i < 50 && !onThread; i++) {
      const n = r.countsOnLoop.length;
      expect(await r.scrape()).toEqual(expected(w));
      onThread = r.countsOnLoop.length === n;
    }
    expect(onThread).toBe(true);
    await r.stop();

    // No thread at all (the database opened without the checkpointer): on the loop, exact.
    const bare = await receiver(path, configFile, false);
    expect(await bare.scrape()).toEqual(expected(w));
    expect(bare.countsOnLoop).toHaveLength(2);
  });

  it('a scrape whose counts the thread answers as the receiver stops ends without touching the closed connections', { timeout: 60_000 }, async () => {
    const { path, configFile } = scratch();
    const w = await seeded(path);
    // The thread held in a RESTART (as above), and reads that wait for it rather than time out.
    const r = await receiver(path, configFile, { intervalMs: 20, maxWalBytes: 64 * 1024, restartWaitMs: 10_000, readAnswerMs: 20_000 }, { METRICS_PORT: '0' });
    const asked: string[] = [];
    const all = r.database.offLoop.all.bind(r.database.offLoop);
    r.database.offLoop.all = (sql: string) => {
      asked.push(sql);
      return all(sql);
    };
    let closing = false;
    const close = r.database.close.bind(r.database);
    r.database.close = () => {
      closing = true;
      return close();
    };

    const fill = w.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)");
    w.transaction(() => {
      for (let i = 0; i < 60; i++) fill.run(Buffer.alloc(4096, i));
    })();
    w.exec('BEGIN IMMEDIATE');
    // Another connection's checkpoint finds the thread's under way (log -1): the thread is in its RESTART.
    const probe = new BetterSqlite3(path);
    onTestFinished(() => {
      probe.close();
    });
    await waitFor(() => (probe.pragma('wal_checkpoint(PASSIVE)') as { log: number }[])[0]!.log === -1, 'the thread in its RESTART');

    const scraping = fetch(r.metricsUrl).then(
      (res) => res.status,
      () => 'cut',
    );
    await waitFor(() => asked.length === 2, 'both counts asked of the thread');
    // The stop cuts the scrape's connection (METRICS_PORT), then closes the database: `stop` is
    // posted to the thread behind the two reads.
    const stopping = r.stop();
    await waitFor(() => closing, 'the database closing');
    w.exec('COMMIT');
    // The loop held while the thread answers both reads and exits: the answers and the exit
    // reach it together, as they do when the loop is busy at that moment.
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 1000);
    await stopping;
    expect(await scraping).toBe('cut');
    expect(r.logs.lines.filter((l) => l.msg === 'unhandled error')).toEqual([]);
  });

  it('the thread runs only queries that write nothing: a DELETE ... RETURNING or a PRAGMA asked of it is refused (null)', { timeout: 60_000 }, async () => {
    const { path } = scratch();
    const w = await seeded(path);
    w.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', x'00')").run();
    const database = openDatabase(path, { checkpointer: { intervalMs: 20 } });
    onTestFinished(() => database.close());
    expect(await database.offLoop.all('SELECT COUNT(*) AS n FROM quarantine')).toEqual([{ n: 1 }]);
    // Each returns rows, as a query does (better-sqlite3's `reader`).
    expect(await database.offLoop.all('DELETE FROM quarantine RETURNING id')).toBeNull();
    expect(await database.offLoop.all('PRAGMA busy_timeout = 0')).toBeNull();
    expect(await database.offLoop.all('PRAGMA journal_mode = DELETE')).toBeNull();
    expect(w.prepare('SELECT COUNT(*) FROM quarantine').pluck().get()).toBe(1);
    // The thread's own lock wait is the one it was given (restartWaitMs, 10 by default).
    expect(await database.offLoop.all('SELECT * FROM pragma_busy_timeout')).toEqual([{ timeout: 10 }]);
  });

  it('keeps checkpointing while scrapes keep the thread reading: the WAL stays near its bound', { timeout: 90_000 }, async () => {
    const { path, configFile } = scratch();
    const w = await seeded(path);
    // Enough dead letters that each count takes the thread tens of ms.
    const seed = jobSeeder(w);
    w.transaction(() => {
      for (let i = 0; i < 120_000; i++) seed({ kind: 'sink:hook', event_id: `evt_b${i}`, state: 'dead', run_at: PAST, attempts: 8 });
    })();
    w.pragma('wal_checkpoint(TRUNCATE)');
    // Like the receiver's own connections: only the checkpointer checkpoints.
    w.pragma('wal_autocheckpoint = 0');
    const maxWalBytes = 1024 * 1024;
    const r = await receiver(path, configFile, { intervalMs: 50, maxWalBytes });
    expect(await r.scrape()).toEqual(expected(w));

    // Eight scrapers back to back (two Prometheus replicas and a few curl loops, or anyone who
    // reaches /metrics): the thread always has a count waiting.
    let writing = true;
    let scrapes = 0;
    let scraped = () => {};
    const scrapers = Array.from({ length: 8 }, async () => {
      for (let i = 0; i < 2000 && writing; i++) {
        await r.scrape();
        scrapes++;
        scraped();
      }
    });
    // 24 MB written by another connection in 20 KB commits, ten between two scrapes' ends, the
    // WAL's size watched after each.
    const fill = w.prepare("INSERT INTO quarantine (received_at, source, delivery_id, reason, headers, body) VALUES ('t', 's', 'd', 'r', '{}', ?)");
    const body = Buffer.alloc(20_000, 1);
    const until = performance.now() + 45_000;
    let largest = 0;
    for (let i = 0; i < 1200 && performance.now() < until; i++) {
      fill.run(body);
      largest = Math.max(largest, statSync(`${path}-wal`).size);
      if (i % 10 === 9) await new Promise<void>((done) => (scraped = done));
    }
    writing = false;
    await Promise.all(scrapers);
    expect(scrapes).toBeGreaterThanOrEqual(120);
    expect(r.countsOnLoop).toEqual([]);
    // The bound, and what arrives between two ticks with a count between them; without a tick
    // while reads were queued, 20 MB and more.
    expect(largest / maxWalBytes).toBeLessThan(6);
  });
});
