import { request } from 'node:http';
import type BetterSqlite3 from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { envelope, newSecret, postSigned, signDelivery } from '../helpers/signing.js';
import { startReceiverBesideOtherConnection, type TestReceiver } from '../helpers/receiver.js';
import { waitFor } from '../helpers/waitFor.js';

// The processing pacer frees processing while the deliveries' handlers take under 8% of the event
// loop (src/processing/IngestFirst.ts). What it is told must be their time on the loop: a
// delivery's wait for its body or for the write lock is not, and counted, a few slow senders or
// another process's lock would look like a flood and hold processing back for nothing.

const secret = newSecret();
let r: TestReceiver;
let other: BetterSqlite3.Database;
let close: () => Promise<void>;
beforeEach(async () => {
  ({ r, other, close } = await startReceiverBesideOtherConnection({ WEBHOOK_SECRET: secret, WRITE_TIMEOUT_MS: '5000' }, new ManualClock(Date.now())));
});
afterEach(() => close());

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `booked` was told one time on the loop: some, and under half of the `waitedMs` the delivery took. */
function expectOneBookingUnderHalf(booked: { mock: { calls: unknown[][] } }, waitedMs: number): void {
  expect(waitedMs).toBeGreaterThanOrEqual(250);
  expect(booked.mock.calls).toHaveLength(1);
  const ms = booked.mock.calls[0]![0] as number;
  expect(ms).toBeGreaterThan(0);
  expect(ms).toBeLessThan(waitedMs / 2);
}

/**
 * Each answer (its `webhook delivery` count, in the handler's last stretch, refusals too) made to
 * take `ms` of the loop: what a booking must then hold at least.
 */
function slowAnswers(ms: number, receiver: TestReceiver = r): void {
  const counted = receiver.app.metrics.deliveriesReceived;
  const inc = counted.inc.bind(counted);
  vi.spyOn(counted, 'inc').mockImplementation((...args: Parameters<typeof inc>) => {
    const until = performance.now() + ms;
    for (let i = 0; i < 1e9 && performance.now() < until; i++);
    return inc(...args);
  });
}

describe('ingest tells the processing pacer its time on the event loop', () => {
  it('a delivery waiting 250 ms for the write lock books its handler\'s time, not the wait', async () => {
    const handlers = vi.spyOn(r.app.pacer, 'noteDeliveryWork');
    other.exec('BEGIN IMMEDIATE');
    const started = performance.now();
    const answer = postSigned(r.url, secret, JSON.stringify(envelope()));
    await waitFor(() => r.logs.lines.some((l) => l.msg === 'ingest write lock busy; retrying'), 'the delivery finds the lock held');
    await pause(250);
    other.exec('ROLLBACK');
    expect((await answer).status).toBe(200);
    const waitedMs = performance.now() - started;
    expectOneBookingUnderHalf(handlers, waitedMs);
  });

  it('a body sent in two parts 250 ms apart books the handler\'s time, not the wait for the rest', async () => {
    const handlers = vi.spyOn(r.app.pacer, 'noteDeliveryWork');
    const { body, headers } = signDelivery(secret, JSON.stringify(envelope()));
    const bytes = Buffer.from(body);
    const started = performance.now();
    const status = await new Promise<number>((resolve, reject) => {
      const req = request(`${r.url}/webhooks`, { method: 'POST', headers: { ...headers, 'content-length': String(bytes.length) } }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.write(bytes.subarray(0, 100));
      setTimeout(() => req.end(bytes.subarray(100)), 250);
    });
    expect(status).toBe(200);
    expectOneBookingUnderHalf(handlers, performance.now() - started);
  });

  it('a refused delivery\'s time is ingest\'s too: a flood of forgeries is deliveries to answer', async () => {
    const handlers = vi.spyOn(r.app.pacer, 'noteDeliveryWork');
    // Refused after its body is read: the stretch from the body's end to the answer is booked too.
    slowAnswers(25);
    const res = await postSigned(r.url, newSecret(), JSON.stringify(envelope()));
    expect(res.status).toBe(401);
    expect(handlers).toHaveBeenCalledTimes(1);
    expect(handlers.mock.calls[0]![0]).toBeGreaterThanOrEqual(25);
  });
});

describe('deliveries answered from one commit', () => {
  it('each books its own time, not the time of the deliveries of its batch answered after it', async () => {
    // Eight deliveries wait for the write lock, then commit in one batch: their handlers resume one
    // after another in the same turn of the loop. Each handler's answer is made to take 25 ms (its
    // `webhook delivery` count). Booked at the wrapper's `await` instead of when the handler
    // returned, the first one's booking took in the seven answered after it (200 ms), the
    // next one six, and so on: the batch booked 900 ms of loop for 200 ms of handlers.
    const n = 8;
    const answerMs = 25;
    const handlers = vi.spyOn(r.app.pacer, 'noteDeliveryWork');
    slowAnswers(answerMs);
    other.exec('BEGIN IMMEDIATE');
    const answers = Array.from({ length: n }, () => postSigned(r.url, secret, JSON.stringify(envelope())));
    await waitFor(() => r.logs.lines.some((l) => l.msg === 'ingest write lock busy; retrying' && l.batch === n), 'the eight deliveries wait in one batch');
    other.exec('ROLLBACK');
    expect((await Promise.all(answers)).map((a) => a.status)).toEqual(Array(n).fill(200));
    const booked = handlers.mock.calls.map((call) => call[0] as number);
    expect(booked).toHaveLength(n);
    // Each: its own 25 ms and what it did before the commit (well under 75 ms, even on a slow host).
    for (const ms of booked) {
      expect(ms).toBeGreaterThanOrEqual(answerMs);
      expect(ms).toBeLessThan(4 * answerMs);
    }
  });
});

describe('refused deliveries book once', () => {
  it('one refused before its body is read (no signature) and one over MAX_BODY_BYTES each book their time once, the answer\'s included', async () => {
    const handlers = vi.spyOn(r.app.pacer, 'noteDeliveryWork');
    slowAnswers(25);
    const unsigned = await fetch(`${r.url}/webhooks`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(envelope()) });
    expect(unsigned.status).toBe(400); // missing_headers, from the headers alone
    expect(handlers).toHaveBeenCalledTimes(1);
    const { headers } = signDelivery(secret, '{}');
    const tooLarge = await fetch(`${r.url}/webhooks`, { method: 'POST', headers, body: 'x'.repeat(2 * 1024 * 1024) }).catch(() => null);
    // The receiver answers 413 and closes the connection; a client still sending may see the reset instead.
    if (tooLarge) expect(tooLarge.status).toBe(413);
    await waitFor(() => handlers.mock.calls.length === 2, 'the oversized delivery is booked');
    expect(handlers.mock.calls.every(([ms]) => (ms as number) >= 25)).toBe(true);
  });

  it('one answered 503 after waiting its WRITE_TIMEOUT_MS for the lock books its answer, not the wait', async () => {
    const short = await startReceiverBesideOtherConnection({ WEBHOOK_SECRET: secret, WRITE_TIMEOUT_MS: '300' }, new ManualClock(Date.now()));
    try {
      const handlers = vi.spyOn(short.r.app.pacer, 'noteDeliveryWork');
      slowAnswers(25, short.r);
      short.other.exec('BEGIN IMMEDIATE');
      const res = await postSigned(short.r.url, secret, JSON.stringify(envelope()));
      expect(res.status).toBe(503);
      expect(handlers).toHaveBeenCalledTimes(1);
      const ms = handlers.mock.calls[0]![0] as number;
      expect(ms).toBeGreaterThanOrEqual(25);
      expect(ms).toBeLessThan(150); // not the 300 ms wait
    } finally {
      await short.close();
    }
  });
});
