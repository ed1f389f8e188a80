import { afterEach, describe, expect, it } from 'vitest';
import { preparedDeliveryWrites } from '../../src/sinks/enqueueDeliveries.js';
import { envelope, newSecret } from '../helpers/signing.js';
import { startConsumer, startHarness, type Consumer, type Harness } from './helpers.js';

let h: Harness | undefined;
let consumer: Consumer | undefined;
afterEach(async () => {
  await h?.close();
  await consumer?.close();
  h = undefined;
  consumer = undefined;
});

const SECRET = newSecret();
/** A receiver with sink `a` (http, `maxAttempts`) posting to a consumer that answers `reply`; one event posted and its first attempt made. */
async function firstAttemptRefused(maxAttempts: number, reply: Parameters<Consumer['reply']>[0]) {
  consumer = await startConsumer({ '/a': SECRET });
  consumer.reply(reply);
  h = await startHarness({ sinks: [{ name: 'a', type: 'http', url: `${consumer.url}/a`, secret: SECRET, max_attempts: maxAttempts }] });
  const e = envelope();
  await h.post(e);
  await h.settle(); // attempt 1 of the job: refused, backing off 1 s
  expect(h.deliveries('a')[0]).toMatchObject({ state: 'retrying', attempts: 1 });
  h.clock.advance(1000);
  return { h, consumer, eventId: e.id as string };
}

const jobsOf = (h: Harness) => h.r.app.database.ingestSqlite.prepare("SELECT id, state, attempts FROM jobs WHERE kind = 'sink:a' ORDER BY id").all() as { id: number; state: string; attempts: number }[];

describe("deliveries.attempts counts the current cycle's attempts, a crash's cut attempt included", () => {
  it("a replay during an attempt: the attempts the older job spent before the replay do not move into the new cycle", async () => {
    // Every attempt is refused; the second hangs a moment, long enough for a replay to come in.
    const { h, consumer, eventId } = await firstAttemptRefused(3, (_r, n) => (n === 2 ? { status: 500, hangMs: 400 } : { status: 500 }));
    const sqlite = h.r.app.database.ingestSqlite;
    const settling = h.settle();
    for (let i = 0; i < 500 && consumer.on('/a').length < 2; i++) await new Promise((r) => setTimeout(r, 10));
    expect(jobsOf(h)).toEqual([expect.objectContaining({ state: 'running', attempts: 2 })]);
    // `replay --id <e> --sink a` (the CLI's path) while attempt 2 is in flight: a new cycle, with a job of its own.
    sqlite.exec('BEGIN IMMEDIATE');
    await h.r.app.fanOut.enqueueDeliveries(preparedDeliveryWrites(sqlite), eventId, { sinks: ['a'] });
    sqlite.exec('COMMIT');
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'pending', attempts: 0 });
    await settling; // the attempt in flight is refused; then the new cycle's job sends once, refused too
    expect(consumer.on('/a')).toHaveLength(3);
    const [older, newer] = jobsOf(h);
    expect(newer).toMatchObject({ state: 'pending', attempts: 1 });
    expect(older).toMatchObject({ attempts: 2 });
    // Since the replay: the attempt that was in flight and the new job's first. Carried over, the
    // older job's count read 3 of the sink's 3 on a delivery with two attempts still to come.
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'retrying', attempts: 2, last_status_code: 500 });
  });

  it('a last attempt cut by a crash, dead-lettered unrun at the next claim: the row counts it, as the job does', async () => {
    const { h } = await firstAttemptRefused(2, () => ({ status: 500 }));
    // Attempt 2, the last, claimed by a worker of a process that then died (SIGKILL during the POST).
    const [claimed] = await h.r.app.queue.claim('died', 1, [], ['sink:a']);
    expect(claimed).toMatchObject({ attempts: 2 });
    h.clock.advance(60_001); // its lease runs out
    await h.settle();
    expect(jobsOf(h)).toEqual([expect.objectContaining({ state: 'dead', attempts: 3 })]);
    // Two attempts spent of the sink's 2 (the third claim ran nothing), as for its job: not "dead after 1".
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'dead', attempts: 2, last_error: expect.stringMatching(/^its last attempt never finished/) });
  });

  it("a replay's cycle is not marked dead when the older job, its last attempt cut by a crash, is dead-lettered unrun", async () => {
    const { h, eventId } = await firstAttemptRefused(2, () => ({ status: 500 }));
    const sqlite = h.r.app.database.ingestSqlite;
    // Attempt 2, the last, claimed by a worker of a process that then died (SIGKILL during the POST).
    const [claimed] = await h.r.app.queue.claim('died', 1, [], ['sink:a']);
    expect(claimed).toMatchObject({ attempts: 2 });
    // `replay --id <e> --sink a` meanwhile: a new cycle with a job of its own, not due yet here (a
    // sink held by a Retry-After, say), so the dead letter below is all that happens to the pair.
    sqlite.exec('BEGIN IMMEDIATE');
    await h.r.app.fanOut.enqueueDeliveries(preparedDeliveryWrites(sqlite), eventId, { sinks: ['a'] });
    sqlite.exec('COMMIT');
    sqlite.prepare("UPDATE jobs SET run_at = '2099-01-01T00:00:00.000Z' WHERE kind = 'sink:a' AND state = 'pending'").run();
    h.clock.advance(60_001); // the dead worker's lease runs out
    await h.settle();
    const [older, newer] = jobsOf(h);
    expect(older).toMatchObject({ state: 'dead', attempts: 3 });
    expect(newer).toMatchObject({ state: 'pending', attempts: 0 });
    // The pair's cycle is the newer job's, still to run: its record says pending, not dead.
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'pending', attempts: 0 });
  });
});
