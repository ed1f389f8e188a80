import type BetterSqlite3 from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Clock } from '../../src/util/clock.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startReceiverBesideOtherConnection, type TestReceiver } from '../helpers/receiver.js';

// The receiver's wall clock is set an hour back or forward (NTP stepping a clock that drifted, a
// VM resumed) while a delivery waits for a write lock another connection holds. WRITE_TIMEOUT_MS
// bounds that wait however the wall clock moves: told by the wall clock, a step back held the
// delivery an hour more (the service gave up on it after its 10 s), and a step forward answered
// 503 at once a delivery whose lock came free a moment later.

const HOUR = 3_600_000;
const WRITE_TIMEOUT_MS = 300;

/** The real time, shifted by whatever `offset` is set to: a wall clock NTP steps. */
class SteppedClock implements Clock {
  offset = 0;
  now(): number {
    return Date.now() + this.offset;
  }
}

const secret = newSecret();
let r: TestReceiver;
let clock: SteppedClock;
let other: BetterSqlite3.Database;
let close: () => Promise<void>;
beforeEach(async () => {
  clock = new SteppedClock();
  ({ r, other, close } = await startReceiverBesideOtherConnection({ WEBHOOK_SECRET: secret, WRITE_TIMEOUT_MS: String(WRITE_TIMEOUT_MS) }, clock));
});
afterEach(() => close());

const stored = (id: unknown) => r.app.database.ingestSqlite.prepare('SELECT COUNT(*) FROM events WHERE id = ?').pluck().get(id);

/** Posts `env` while the lock is held elsewhere; resolves (with its answer to come) once the committer found it held. */
async function postWhileLocked(env: Record<string, unknown>): Promise<{ answer: Promise<Response> }> {
  const answer = postSigned(r.url, secret, JSON.stringify(env));
  for (let i = 0; i < 500 && !r.logs.lines.some((l) => l.msg === 'ingest write lock busy; retrying'); i++) {
    await new Promise((ok) => setTimeout(ok, 5));
  }
  expect(r.logs.lines.some((l) => l.msg === 'ingest write lock busy; retrying')).toBe(true);
  return { answer };
}

/** The answer's status, or 'none' if none came within `ms`. */
const within = (answer: Promise<Response>, ms: number) =>
  Promise.race([answer.then((res) => res.status), new Promise<'none'>((ok) => setTimeout(() => ok('none'), ms))]);

describe('a delivery waiting for the write lock while the wall clock steps', () => {
  it('stepped an hour back: still answered 503 after WRITE_TIMEOUT_MS, not an hour later', async () => {
    other.exec('BEGIN IMMEDIATE');
    const env = envelope();
    const { answer } = await postWhileLocked(env);
    clock.offset = -HOUR;
    // 300 ms of lock wait; 3 s is room for a slow machine, and far short of the hour.
    expect(await within(answer, 3_000)).toBe(503);
    other.exec('ROLLBACK');
    expect(stored(env.id)).toBe(0);
  });

  it('stepped an hour forward: the delivery still waits out its WRITE_TIMEOUT_MS, and is stored when the lock comes free within it', async () => {
    other.exec('BEGIN IMMEDIATE');
    const env = envelope();
    const { answer } = await postWhileLocked(env);
    clock.offset = HOUR;
    // The committer retries every 1-4 ms: it meets the stepped clock before the lock comes free.
    await new Promise((ok) => setTimeout(ok, 50));
    other.exec('ROLLBACK');
    expect(await within(answer, 3_000)).toBe(200);
    expect(stored(env.id)).toBe(1);
  });
});
