import Database from 'better-sqlite3';
import { writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startPair } from '../helpers/pair.js';
import { waitFor } from '../helpers/waitFor.js';

let r: TestReceiver | undefined;
let holder: Database.Database | undefined;
let consumer: Server | undefined;
const { dir, cleanup } = tempDir('repeated-');
afterEach(async () => {
  if (holder?.inTransaction) holder.exec('ROLLBACK');
  holder?.close();
  await r?.close();
  consumer?.close();
});
afterAll(cleanup);

/** Bounded wait for a condition the receiver's own loop brings about (its 250 ms polls). */
const until = (what: string, cond: () => boolean, ms = 15_000): Promise<void> => waitFor(cond, what, ms);

/**
 * A write from another connection, once the receiver's connections let it: its busy wait would
 * block this process's event loop, and with it the receiver's transaction it waits for.
 */
async function writeBeside(db: Database.Database, sql: string, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    try {
      return void db.exec(sql);
    } catch (err) {
      if ((err as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() > deadline) throw err;
      await new Promise((ok) => setTimeout(ok, 20));
    }
  }
}

describe('a failure the workers meet at every poll', () => {
  it('is logged once, then once a minute with a count, and its end at info, while another process holds the write lock', async () => {
    const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
    const secret = newSecret();
    // The result read fails (nothing listens on port 9) and waits for its retry.
    r = await startReceiver({ WEBHOOK_SECRET: secret }, { clock });
    const body = JSON.stringify(envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() }));
    expect((await postSigned(r.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
    const logs = r.logs.lines;
    await until('the read to fail', () => logs.some((l) => l.msg === 'job failed; will retry'));

    // Another process takes the write lock and keeps it; the read is due again.
    holder = new Database(r.dbPath);
    holder.exec('BEGIN IMMEDIATE');
    clock.advance(3_600_000);
    const claims = (level?: number) => logs.filter((l) => l.msg === 'job claim failed; will retry' && (level === undefined || l.level === level));
    await until('several refused claims', () => claims().length >= 4);
    expect(claims(40)).toHaveLength(1);
    expect(claims(40)[0]).toMatchObject({ code: 'SQLITE_BUSY', hint: expect.stringMatching(/another process holds the database write lock/) });

    // A minute later (the receiver's clock) it is said again, with how many failed meanwhile.
    clock.advance(61_000);
    await until('the line a minute later', () => claims(40).length === 2);
    expect(claims(40)[1]!.failed_since_last_line).toBeGreaterThanOrEqual(3);

    holder.exec('COMMIT');
    await until('the claims to work again', () => logs.some((l) => l.msg === 'job claims work again'));
    expect(logs.find((l) => l.msg === 'job claims work again')).toMatchObject({ level: 30 });
    expect(claims(40)).toHaveLength(2);
  });
});

describe('processing new events failing at every turn', () => {
  /** A receiver on `clock` whose folds of new events all fail (a trigger another process made), once the first has. */
  async function foldsFailing(clock: ManualClock) {
    const secret = newSecret();
    r = await startReceiver({ WEBHOOK_SECRET: secret }, { clock });
    // Another process makes moving the processing cursor fail: every fold of new events rolls back.
    holder = new Database(r.dbPath, { timeout: 0 });
    await writeBeside(holder, "CREATE TRIGGER cursor_refused BEFORE UPDATE ON processing_cursor BEGIN SELECT RAISE(ABORT, 'cursor refused'); END");
    const body = JSON.stringify(envelope({ created_at: new Date(clock.now()).toISOString() }));
    expect((await postSigned(r.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
    const logs = r.logs.lines;
    const failed = (level?: number) => logs.filter((l) => l.msg === 'processing new events failed; will retry' && (level === undefined || l.level === level));
    await until('the first failure', () => failed().length === 1);
    expect(failed(50)).toHaveLength(1);
    return { holder, logs, failed };
  }

  it('is logged once, then once a minute with a count, and its end at info', async () => {
    const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
    const { holder, logs, failed } = await foldsFailing(clock);
    expect(failed(50)[0]).toMatchObject({ err: 'cursor refused', code: 'SQLITE_CONSTRAINT_TRIGGER' });

    // Tried again a second later (the receiver's clock), each time alike: at debug.
    for (let n = 2; n <= 4; n++) {
      clock.advance(1_100);
      await until(`failure ${n}`, () => failed().length === n);
    }
    expect(failed(50)).toHaveLength(1);
    // A minute after its line, said again with how many failed meanwhile.
    clock.advance(60_000);
    await until('the line a minute later', () => failed(50).length === 2);
    expect(failed(50)[1]!.failed_since_last_line).toBe(3);

    // Another failure with the same code, about something else: said at once, with its own count
    // (none) and the one of the failure before it apart.
    clock.advance(1_100);
    await until('failure 6', () => failed().length === 6);
    await writeBeside(holder, "DROP TRIGGER cursor_refused; CREATE TRIGGER cursor_refused BEFORE UPDATE ON processing_cursor BEGIN SELECT RAISE(ABORT, 'cursor refused for another reason'); END");
    clock.advance(1_100);
    await until('failure 7', () => failed().length === 7);
    expect(failed(50)).toHaveLength(3);
    expect(failed(50)[2]).toMatchObject({ err: 'cursor refused for another reason', code: 'SQLITE_CONSTRAINT_TRIGGER', previous_error_failed_since_last_line: 1 });
    expect(failed(50)[2]).not.toHaveProperty('failed_since_last_line');

    // It works again: said at info, with the run's count; the event is folded.
    await writeBeside(holder, 'DROP TRIGGER cursor_refused');
    clock.advance(1_100);
    await until('processing to work again', () => logs.some((l) => l.msg === 'processing new events works again'));
    expect(logs.find((l) => l.msg === 'processing new events works again')).toMatchObject({ level: 30, failures: 7 });
    expect(failed()).toHaveLength(7);
  });

  it('is said at its level again after the wall clock stepped back, not at debug until the clock is past its last line', async () => {
    const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
    const { failed } = await foldsFailing(clock);
    // The clock steps back an hour (NTP). The fold is tried again a second on (the receiver's clock):
    // how long since the last line cannot be told from a clock that went back, so it is said at its
    // level, not at debug for the hour until the clock is past that line's time again.
    clock.set(clock.now() - 3_600_000);
    for (let i = 0; i < 10 && failed().length < 2; i++) {
      clock.advance(1_100);
      await until('the next failure', () => failed().length >= 2, 1_000).catch(() => undefined);
    }
    expect(failed(50)).toHaveLength(2);
  });
});

/**
 * A receiver whose only sink is an HTTP consumer answering `reply(n)` to its n-th request (from 0),
 * with its own loops stopped: the test drains them. `post` takes one event in.
 */
async function sinkReceiver(reply: (n: number) => { status: number; headers?: Record<string, string> }, sinkOptions: Record<string, unknown> = {}) {
  const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
  let n = 0;
  consumer = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const a = reply(n++);
      res.writeHead(a.status, a.headers).end();
    });
  });
  await new Promise<void>((ok) => consumer!.listen(0, '127.0.0.1', () => ok()));
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: `http://127.0.0.1:${(consumer.address() as AddressInfo).port}/hook`, secret: newSecret(), ...sinkOptions }] }));
  const secret = newSecret();
  r = await startReceiver({ WEBHOOK_SECRET: secret, CONFIG_FILE: config }, { clock });
  await r.app.worker.stop();
  await r.app.fanOut.stop();
  const post = async () => {
    const body = JSON.stringify(envelope({ created_at: new Date(clock.now()).toISOString() }));
    expect((await postSigned(r!.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
  };
  return { clock, post, requests: () => n, rec: r };
}

describe('a sink whose consumer is down', () => {
  it('logs its deliveries failing alike once, then once a minute with a count, not one warn line per message', async () => {
    let answer = 500;
    const { clock, post, rec } = await sinkReceiver(() => ({ status: answer }));
    for (let i = 0; i < 6; i++) await post();
    await rec.app.worker.runUntilIdle();
    await rec.app.fanOut.runUntilIdle();
    const failed = (level: number) => rec.logs.lines.filter((l) => l.msg === 'job failed; will retry' && l.sink === 'crm' && l.level === level);
    expect(failed(40)).toHaveLength(1);
    expect(failed(40)[0]).toMatchObject({ err: 'HTTP 500', event_id: expect.any(String) });
    expect(failed(20)).toHaveLength(5);

    // Their retries, over a minute later: one line more, with how many were not said at warn.
    clock.advance(2 * 60_000);
    await rec.app.fanOut.runUntilIdle();
    expect(failed(40)).toHaveLength(2);
    expect(failed(40)[1]!.failed_since_last_line).toBe(5);

    // A delivery that goes through ends the run: the next failure is said at once.
    answer = 200;
    await post();
    await rec.app.worker.runUntilIdle();
    await rec.app.fanOut.runUntilIdle();
    answer = 500;
    await post();
    await rec.app.worker.runUntilIdle();
    await rec.app.fanOut.runUntilIdle();
    expect(failed(40)).toHaveLength(3);
  });
});

describe('a sink whose consumer is down past its retries', () => {
  it('logs its deliveries dead-lettered alike once, then once a minute with a count, and the count left at the end, not one error line each', async () => {
    let answer = 500;
    const { clock, post, rec } = await sinkReceiver(() => ({ status: answer }), { max_attempts: 1 });
    const drain = async () => {
      await rec.app.worker.runUntilIdle();
      await rec.app.fanOut.runUntilIdle();
    };
    const dead = (level: number) => rec.logs.lines.filter((l) => l.msg === 'job dead-lettered' && l.sink === 'crm' && l.level === level);
    const more = () => rec.logs.lines.filter((l) => l.msg === 'more jobs dead-lettered alike (each is in dead-letters list)');
    for (let i = 0; i < 6; i++) await post();
    await drain();
    expect(dead(50)).toEqual([expect.objectContaining({ err: 'HTTP 500', event_id: expect.any(String), kind: 'sink:crm' })]);
    expect(dead(20)).toHaveLength(5);

    // Another error: said at once, with the count of the one before it.
    answer = 503;
    await post();
    await drain();
    expect(dead(50)).toHaveLength(2);
    expect(dead(50)[1]).toMatchObject({ err: 'HTTP 503', previous_error_failed_since_last_line: 5 });

    // The burst ends: a minute after its last line, its count, though no dead letter follows.
    answer = 500;
    for (let i = 0; i < 3; i++) await post();
    await drain();
    expect(dead(50)).toHaveLength(3);
    expect(more()).toHaveLength(0);
    clock.advance(61_000);
    await drain();
    expect(more()).toEqual([expect.objectContaining({ level: 50, sink: 'crm', kind: 'sink:crm', err: 'HTTP 500', dead_lettered_since_last_line: 2, dead_lettered_in_run: 10 })]);

    // The ones not said yet when the receiver stops: counted in its last line.
    await post();
    await post();
    await drain();
    // Each one is a dead letter all the same, its delivery dead.
    const db = new Database(rec.dbPath, { readonly: true });
    try {
      expect(db.prepare("SELECT count(*) FROM jobs WHERE kind = 'sink:crm' AND state = 'dead'").pluck().get()).toBe(12);
      expect(db.prepare("SELECT count(*) FROM deliveries WHERE sink = 'crm' AND state = 'dead'").pluck().get()).toBe(12);
    } finally {
      db.close();
    }
    const receiver = r!;
    r = undefined;
    await receiver.close();
    expect(dead(50)).toHaveLength(3);
    expect(more()).toHaveLength(2);
    expect(more()[1]).toMatchObject({ dead_lettered_since_last_line: 2, dead_lettered_in_run: 12 });
  });
});

describe('a burst of dead letters when the wall clock steps back', () => {
  it('has its count said after the step (its last line\'s age cannot be told), not an hour later when the clock is past that line again', async () => {
    const { clock, post, rec } = await sinkReceiver(() => ({ status: 500 }), { max_attempts: 1 });
    const more = () => rec.logs.lines.filter((l) => l.msg === 'more jobs dead-lettered alike (each is in dead-letters list)');
    for (let i = 0; i < 3; i++) await post();
    await rec.app.worker.runUntilIdle();
    await rec.app.fanOut.runUntilIdle();
    expect(more()).toHaveLength(0);
    // NTP steps the clock back an hour.
    clock.set(clock.now() - 3_600_000);
    await rec.app.fanOut.runUntilIdle();
    expect(more()).toEqual([expect.objectContaining({ level: 50, sink: 'crm', dead_lettered_since_last_line: 2 })]);
  });
});

describe('a sink whose consumer keeps asking to slow down', () => {
  it('logs its deliveries failing alike once a minute, though each answer counts its Retry-After down', async () => {
    // A rate limiter's 429: the seconds left of its window, a different number at each request.
    const { clock, post, requests, rec } = await sinkReceiver((n) => ({ status: 429, headers: { 'retry-after': String(9 - (n % 8)) } }));
    for (let i = 0; i < 4; i++) await post();
    await rec.app.worker.runUntilIdle();
    await rec.app.fanOut.runUntilIdle();
    // Tries within the minute, each told another wait.
    for (let s = 0; s < 55; s += 5) {
      clock.advance(5_000);
      await rec.app.fanOut.runUntilIdle();
    }
    const failed = (level: number) => rec.logs.lines.filter((l) => l.msg === 'job failed; will retry' && l.sink === 'crm' && l.level === level);
    expect(requests()).toBeGreaterThanOrEqual(4);
    expect(failed(20)).toHaveLength(requests() - 1);
    expect(new Set(failed(20).map((l) => l.err)).size).toBeGreaterThanOrEqual(3);
    expect(failed(40)).toEqual([expect.objectContaining({ err: 'HTTP 429; Retry-After 9 s' })]);
  });
});

describe('folds of events failing alike', () => {
  it('are logged at warn again once a fold went through: a success ends the run, for folds too', async () => {
    const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
    const secret = newSecret();
    r = await startReceiver({ WEBHOOK_SECRET: secret }, { clock });
    await r.app.worker.stop();
    // Another process makes every fold fail: each event becomes a process_event job, retried.
    holder = new Database(r.dbPath, { timeout: 0 });
    const refuse = () => writeBeside(holder!, "CREATE TRIGGER app_refused BEFORE INSERT ON applications BEGIN SELECT RAISE(ABORT, 'applications refused'); END");
    await refuse();
    const post = async () => {
      const body = JSON.stringify(envelope({ created_at: new Date(clock.now()).toISOString() }));
      expect((await postSigned(r!.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
    };
    const retried = (level: number) => r!.logs.lines.filter((l) => l.msg === 'job failed; will retry' && l.kind === 'process_event' && l.attempt !== 1 && l.level === level);
    await post();
    await r.app.worker.runUntilIdle();
    clock.advance(6_000);
    await r.app.worker.runUntilIdle();
    expect(retried(40)).toHaveLength(1);

    // Its next retry goes through.
    await writeBeside(holder, 'DROP TRIGGER app_refused');
    clock.advance(11_000);
    await r.app.worker.runUntilIdle();
    expect(r.logs.lines.filter((l) => l.msg === 'job failed; will retry' && l.kind === 'process_event')).toHaveLength(2);

    // A new failure, well within the minute: a new run, said at warn.
    await refuse();
    await post();
    await r.app.worker.runUntilIdle();
    clock.advance(6_000);
    await r.app.worker.runUntilIdle();
    expect(retried(20)).toHaveLength(0);
    expect(retried(40)).toHaveLength(2);
  });
});

describe('result reads of one source failing alike during an outage of the hiring API', () => {
  it('are one run whatever resource each read asks for: the first at warn, the others at debug', async () => {
    const pair = await startPair();
    try {
      // The service answers every scoring read 503: interview, cv_evaluation and insights alike.
      pair.sandbox.control.injectFault({ target: '*', status: 503, times: 1_000 });
      pair.sandbox.control.runScenario('lifecycle');
      await pair.settle();
      const lines = pair.receiver.logs.lines;
      const failed = (level: number) => lines.filter((l) => l.msg === 'job failed; will retry' && l.kind === 'fetch_result' && l.level === level);
      // The three resources failed, each read once: one line at warn, the two others at debug.
      expect(new Set([...failed(40), ...failed(20)].map((l) => String(l.err).split(':')[0]))).toEqual(new Set(['interview', 'cv_evaluation', 'insights']));
      expect(failed(40)).toHaveLength(1);
      expect(failed(40)[0]).toMatchObject({ err: expect.stringContaining('HTTP 503 server_error'), event_id: expect.any(String) });
      expect(failed(20)).toHaveLength(2);

      // Their retries, over a minute later: one line more, counting those said at debug.
      pair.clock.advance(2 * 60_000);
      await pair.receiver.app.worker.runUntilIdle();
      expect(failed(40)).toHaveLength(2);
      expect(failed(40)[1]!.failed_since_last_line).toBe(2);
    } finally {
      await pair.close();
    }
  });
});
