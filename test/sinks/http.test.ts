import { rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { enableSink } from '../../src/sinks/deliveryRecords.js';
import { FanOut } from '../../src/sinks/FanOut.js';
import { preparedDeliveryWrites } from '../../src/sinks/enqueueDeliveries.js';
import { httpTarget } from '../../src/util/httpTarget.js';
import { messageIdFor } from '../../src/sinks/messageId.js';
import { startReceiver, tempDir } from '../helpers/receiver.js';
import { startSilentServer } from '../helpers/silentServer.js';
import { collectGarbage } from '../helpers/gc.js';
import { envelope, newSecret, signDelivery } from '../helpers/signing.js';
import { startServer } from '../hiring/testServer.js';
import { startConsumer, startHarness, type Consumer, type Harness } from './helpers.js';

let h: Harness | undefined;
let consumer: Consumer | undefined;
const extra: { close(): Promise<void> }[] = [];
afterEach(async () => {
  await h?.close();
  await consumer?.close();
  for (const c of extra.splice(0)) await c.close();
  h = undefined;
  consumer = undefined;
});

const SECRET_A = newSecret();
const SECRET_B = newSecret();

async function setup(sinkA: Record<string, unknown> = {}, withB = false) {
  consumer = await startConsumer({ '/a': SECRET_A, '/b': SECRET_B, '/moved': SECRET_A });
  const sinks: Record<string, unknown>[] = [{ name: 'a', type: 'http', url: `${consumer.url}/a`, secret: SECRET_A, ...sinkA }];
  if (withB) sinks.push({ name: 'b', type: 'http', url: `${consumer.url}/b`, secret: { env: 'B_SECRET' } });
  h = await startHarness({ sinks }, { env: { B_SECRET: SECRET_B, GATEWAY_AUTH: 'Bearer gw-token-5f1e9a' } });
  return { h, consumer };
}

const jobOf = (h: Harness, sink: string) =>
  h.r.app.database.ingestSqlite.prepare('SELECT * FROM jobs WHERE kind = ? ORDER BY id').all(`sink:${sink}`) as Record<string, any>[];

describe('http sink: signed, retried, never redirected (issue 5)', () => {
  it('posts every message signed with the sink secret, verified by standardwebhooks', async () => {
    const { h, consumer } = await setup();
    const e = envelope({ event_type: 'application.created' });
    await h.post(e);
    await h.settle();
    expect(consumer.received).toHaveLength(1);
    const got = consumer.received[0]!;
    expect(got.message).toMatchObject({ id: e.id, event_type: 'application.created', source: 'default' });
    expect(got.headers['content-type']).toBe('application/json');
    expect(got.headers['webhook-id']).toBe(messageIdFor(e.id as string, 'a'));
    // Pinned, not only as messageIdFor computes it: a consumer dedupes by it across the receiver's
    // upgrades, so the first revision's id is sha256(event id, NUL, sink name), 32 hex digits.
    const { createHash } = await import('node:crypto');
    expect(got.headers['webhook-id']).toBe(`msg_${createHash('sha256').update(`${e.id as string}\0a`).digest('hex').slice(0, 32)}`);
    // A consumer with another secret must reject it: the signature is real.
    const { Webhook } = await import('standardwebhooks');
    expect(() => new Webhook(newSecret()).verify(got.body, got.headers)).toThrow();
    expect(h.deliveries('a')).toEqual([
      expect.objectContaining({ event_id: e.id, state: 'delivered', attempts: 1, last_status_code: 204, last_error: null, message_id: got.headers['webhook-id'] }),
    ]);
    expect(h.deliveries('a')[0]!.delivered_at).toBe(new Date(h.clock.now()).toISOString());
  });

  it('a consumer that answers 200 and then cuts its body has the message: delivered once, not retried', async () => {
    const cutting = await startServer((req, res) => {
      req.resume();
      res.writeHead(200, { 'content-length': '100', 'content-encoding': 'gzip' });
      res.write('not even gzip');
      setTimeout(() => res.socket?.destroy(), 10);
    });
    extra.push(cutting);
    const { h } = await setup({ url: `${cutting.url}/cut` });
    await h.post(envelope());
    await h.settle();
    expect(cutting.requests).toHaveLength(1);
    expect(h.deliveries('a')).toEqual([expect.objectContaining({ state: 'delivered', attempts: 1, last_status_code: 200, last_error: null })]);
  });

  it('500 then success: retried after backoff with the same webhook-id and one message id', async () => {
    const { h, consumer } = await setup();
    consumer.reply((_r, n) => ({ status: n === 1 ? 500 : 200 }));
    const e = envelope();
    await h.post(e);
    await h.settle();
    expect(consumer.received).toHaveLength(1);
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'retrying', attempts: 1, last_status_code: 500, last_error: 'HTTP 500' });
    expect(Date.parse(jobOf(h, 'a')[0]!.run_at)).toBe(h.clock.now() + 1000);
    h.clock.advance(999);
    await h.settle();
    expect(consumer.received).toHaveLength(1); // not before its backoff
    h.clock.advance(1);
    await h.settle();
    expect(consumer.received).toHaveLength(2);
    const [first, second] = consumer.received;
    expect(first!.message).not.toBeNull();
    expect(second!.message).not.toBeNull();
    expect(second!.headers['webhook-id']).toBe(first!.headers['webhook-id']);
    expect(second!.message!.id).toBe(e.id);
    expect(second!.body).toBe(first!.body);
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'delivered', attempts: 2, last_status_code: 200, last_error: null });
  });

  it('a consumer that keeps failing is retried on a growing schedule: about 10 s, 30 s, 90 s, 270 s (each up to half less, for jitter)', async () => {
    consumer = await startConsumer({ '/a': SECRET_A });
    h = await startHarness({ sinks: [{ name: 'a', type: 'http', url: `${consumer.url}/a`, secret: SECRET_A }] }, { retryMs: null });
    consumer.reply(() => ({ status: 500 }));
    await h.post(envelope());
    const waits: number[] = [];
    for (let i = 0; i < 4; i++) {
      await h.settle();
      const runAt = Date.parse(jobOf(h, 'a')[0]!.run_at as string);
      waits.push(runAt - h.clock.now());
      h.clock.set(runAt);
    }
    await h.settle();
    expect(consumer.received).toHaveLength(5);
    waits.forEach((wait, i) => {
      const full = 10_000 * 3 ** i;
      expect(wait).toBeGreaterThanOrEqual(full / 2);
      expect(wait).toBeLessThanOrEqual(full);
    });
  });

  it('a timeout is a failed attempt, retried', async () => {
    const { h, consumer } = await setup({ timeout_ms: 150 });
    consumer.reply((_r, n) => (n === 1 ? { status: 200, hangMs: 1500 } : { status: 200 }));
    await h.post(envelope());
    await h.settle();
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'retrying', last_status_code: null, last_error: 'no response within 150 ms' });
    h.clock.advance(1000);
    await h.settle();
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'delivered', attempts: 2 });
  });

  it('the timeout holds through a garbage collection: a consumer that never answers is timed out, not waited for until the shutdown', async () => {
    // AbortSignal.any over AbortSignal.timeout loses the timeout at the first collection on Node 20
    // (nodejs/node#57736): the delivery then stayed in flight, holding one of the sink's slots.
    const { h, consumer } = await setup({ timeout_ms: 400 });
    consumer.reply(() => ({ status: 200, hangMs: 20_000 }));
    await h.post(envelope());
    const settling = h.settle();
    for (let i = 0; i < 500 && consumer.received.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(consumer.received).toHaveLength(1);
    collectGarbage();
    const outcome = await Promise.race([
      settling.then(() => 'settled'),
      new Promise((r) => setTimeout(() => r('still waiting after 5 s'), 5000).unref()),
    ]);
    expect(outcome).toBe('settled');
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'retrying', last_status_code: null, last_error: 'no response within 400 ms' });
  });

  it('a 3xx is a failure and the redirect is not followed', async () => {
    const target = await startConsumer({});
    extra.push(target);
    const { h, consumer } = await setup();
    // The Location repeats a token (as an http -> https redirect of a hook URL does): never echoed.
    consumer.reply(() => ({ status: 307, headers: { location: `${target.url}/elsewhere/tok-LOCATIONSECRET` } }));
    await h.post(envelope());
    await h.settle();
    expect(target.received).toEqual([]);
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'retrying', last_status_code: 307 });
    expect(h.deliveries('a')[0]!.last_error).toBe(`HTTP 307 redirect to ${httpTarget(`${target.url}/elsewhere/tok-LOCATIONSECRET`)} not followed`);
    const everything = [...h.r.logs.raw, JSON.stringify(h.deliveries('a')), JSON.stringify(jobOf(h, 'a'))].join('\n');
    expect(everything).not.toContain('tok-LOCATIONSECRET');
  });

  it('a replay to the sink while its delivery is backing off after a failure sends at once, with fresh attempts', async () => {
    consumer = await startConsumer({ '/a': SECRET_A });
    consumer.reply((_r, n) => ({ status: n === 1 ? 500 : 200 }));
    h = await startHarness({ sinks: [{ name: 'a', type: 'http', url: `${consumer.url}/a`, secret: SECRET_A }] }, { retryMs: 60_000 });
    const e = envelope();
    await h.post(e);
    await h.settle(); // the first attempt fails: the job backs off for a minute
    expect(jobOf(h, 'a')[0]).toMatchObject({ state: 'pending', attempts: 1 });
    const fanOut = h.r.app.fanOut;
    await h.r.app.database.db.transaction().execute((trx) => fanOut.enqueueDeliveries(trx, e.id as string, { sinks: ['a'] }));
    expect(jobOf(h, 'a')).toEqual([expect.objectContaining({ state: 'pending', attempts: 0, run_at: new Date(h.clock.now()).toISOString() })]);
    await h.settle(); // no clock advance: the replay is due now
    expect(consumer.on('/a')).toHaveLength(2);
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'delivered', attempts: 1 });
  });

  it('a replay of a dead-lettered delivery runs that job again: no dead letter is left listed once it is delivered, and a retry cannot send it twice', async () => {
    const { h, consumer } = await setup({ max_attempts: 1 });
    consumer.reply((_r, n) => ({ status: n === 1 ? 500 : 200 }));
    const e = envelope();
    await h.post(e);
    await h.settle();
    expect(jobOf(h, 'a')).toEqual([expect.objectContaining({ state: 'dead' })]);
    const deadId = jobOf(h, 'a')[0]!.id as number;
    // A second dead job of the same pair, as an earlier version's replays left them: superseded too.
    const sqlite = h.r.app.database.ingestSqlite;
    sqlite.prepare("INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, last_error, created_at, updated_at, finished_at) SELECT kind, payload, event_id, source, 'dead', run_at, 1, 1, 'older', created_at, updated_at, finished_at FROM jobs WHERE id = ?").run(deadId);
    // The replay CLI's path (prepared statements in its own transaction), a while later.
    h.clock.advance(3_600_000);
    sqlite.exec('BEGIN IMMEDIATE');
    const queued = await h.r.app.fanOut.enqueueDeliveries(preparedDeliveryWrites(sqlite), e.id as string, { sinks: ['a'] });
    sqlite.exec('COMMIT');
    expect(queued).toEqual(['a']);
    // Queued anew: `status` must not call it queued an hour ago.
    const now = new Date(h.clock.now()).toISOString();
    expect(jobOf(h, 'a')).toEqual([expect.objectContaining({ state: 'pending', attempts: 0, last_error: null, finished_at: null, created_at: now, run_at: now })]);
    await h.settle();
    expect(consumer.on('/a')).toHaveLength(2);
    expect(jobOf(h, 'a')).toEqual([expect.objectContaining({ state: 'done' })]);
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'delivered' });
    // Through the processing layer's path (kysely) too: a dead pair is revived, not doubled.
    consumer.reply(() => ({ status: 500 }));
    const second = envelope();
    await h.post(second);
    await h.settle();
    const fanOut = h.r.app.fanOut;
    h.clock.advance(60_000);
    await h.r.app.database.db.transaction().execute((trx) => fanOut.enqueueDeliveries(trx, second.id as string, { sinks: ['a'] }));
    expect(jobOf(h, 'a').filter((j) => j.event_id === second.id)).toEqual([expect.objectContaining({ state: 'pending', attempts: 0, created_at: new Date(h.clock.now()).toISOString() })]);
  });

  it('a replay while the pair\'s last attempt is running: once the new cycle is delivered, the attempt that died is no dead letter any more', async () => {
    consumer = await startConsumer({ '/a': SECRET_A });
    // The first request hangs a moment and fails (the job's only attempt); later ones succeed.
    consumer.reply((_r, n) => (n === 1 ? { status: 500, hangMs: 400 } : { status: 200 }));
    h = await startHarness({ sinks: [{ name: 'a', type: 'http', url: `${consumer.url}/a`, secret: SECRET_A, max_attempts: 1 }] });
    const sqlite = h.r.app.database.ingestSqlite;
    const e = envelope();
    await h.post(e);
    const settling = h.settle();
    for (let i = 0; i < 500 && consumer.on('/a').length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    expect(jobOf(h, 'a')).toEqual([expect.objectContaining({ state: 'running' })]);
    // `replay --id <e> --sink a` (the CLI's path) while that attempt is in flight: a job of its own.
    sqlite.exec('BEGIN IMMEDIATE');
    await h.r.app.fanOut.enqueueDeliveries(preparedDeliveryWrites(sqlite), e.id as string, { sinks: ['a'] });
    sqlite.exec('COMMIT');
    await settling;
    await h.settle();
    expect(h.deliveries('a').map((d) => d.state)).toEqual(['delivered']);
    expect(jobOf(h, 'a').map((j) => j.state)).toEqual(['done']);
    // Nothing left for a retry to send a third time.
    expect(await h.r.app.queue.retryDeadLetters({ all: true })).toBe(0);
    expect(consumer.on('/a')).toHaveLength(2);
  });

  it('a new cycle of a pair with a pending job and a dead one restarts the pending one (never a second pending job), on both paths', async () => {
    const { h, consumer } = await setup({ max_attempts: 1 });
    consumer.reply(() => ({ status: 500 }));
    const e = envelope();
    await h.post(e);
    await h.settle();
    const sqlite = h.r.app.database.ingestSqlite;
    const [dead] = jobOf(h, 'a');
    expect(dead).toMatchObject({ state: 'dead' });
    // A pending job of the pair beside it (as a replay queued while the dead one's last attempt ran).
    sqlite.prepare("INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at) SELECT kind, payload, event_id, source, 'pending', '2999-01-01T00:00:00.000Z', 1, 1, created_at, updated_at FROM jobs WHERE id = ?").run(dead!.id);
    const pendingId = jobOf(h, 'a').find((j) => j.state === 'pending')!.id as number;
    sqlite.exec('BEGIN IMMEDIATE');
    await h.r.app.fanOut.enqueueDeliveries(preparedDeliveryWrites(sqlite), e.id as string, { sinks: ['a'] });
    sqlite.exec('COMMIT');
    await h.r.app.database.db.transaction().execute((trx) => h.r.app.fanOut.enqueueDeliveries(trx, e.id as string, { sinks: ['a'] }));
    const now = new Date(h.clock.now()).toISOString();
    expect(jobOf(h, 'a').map((j) => ({ id: j.id, state: j.state, run_at: j.run_at }))).toEqual([
      { id: dead!.id, state: 'dead', run_at: dead!.run_at },
      { id: pendingId, state: 'pending', run_at: now },
    ]);
  });

  it('429 honours Retry-After over the shorter backoff (spread by up to a quarter, never sooner)', async () => {
    const { h, consumer } = await setup();
    consumer.reply((_r, n) => (n === 1 ? { status: 429, headers: { 'retry-after': '7' } } : { status: 200 }));
    await h.post(envelope());
    await h.settle();
    const runAt = Date.parse(jobOf(h, 'a')[0]!.run_at);
    expect(runAt - h.clock.now()).toBeGreaterThanOrEqual(7000);
    expect(runAt - h.clock.now()).toBeLessThanOrEqual(7000 + 1750);
    h.clock.advance(6999);
    await h.settle();
    expect(consumer.received).toHaveLength(1);
    h.clock.set(runAt);
    await h.settle();
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'delivered', attempts: 2 });
  });

  it('a Retry-After holds the whole sink: its other deliveries wait too instead of each spending an attempt', async () => {
    const { h, consumer } = await setup({ concurrency: 1 });
    consumer.reply((_r, n) => (n === 1 ? { status: 503, headers: { 'retry-after': '120' } } : { status: 200 }));
    for (let i = 0; i < 4; i++) await h.post(envelope({ event_type: 'application.created' }));
    await h.settle();
    // One request, answered 503: the three others were not sent.
    expect(consumer.on('/a')).toHaveLength(1);
    expect(h.deliveries('a').map((d) => [d.state, d.attempts])).toEqual(
      expect.arrayContaining([['retrying', 1], ['pending', 0], ['pending', 0], ['pending', 0]]),
    );
    h.clock.advance(119_000);
    await h.settle();
    expect(consumer.on('/a')).toHaveLength(1);
    // Past the wait (and the retried one's spread of up to a quarter), all four go out.
    h.clock.advance(31_000);
    await h.settle();
    expect(consumer.on('/a')).toHaveLength(5);
    expect(h.deliveries('a').map((d) => d.state)).toEqual(['delivered', 'delivered', 'delivered', 'delivered']);
  });

  it('sends the configured extra headers (a gateway\'s credential from the environment) and never logs their values, even when the consumer refuses', async () => {
    const token = 'Bearer gw-token-5f1e9a';
    const { h, consumer } = await setup({ headers: { Authorization: { env: 'GATEWAY_AUTH' }, 'X-Tenant': 'acme' } });
    consumer.reply((_r, n) => (n === 1 ? { status: 401 } : { status: 204 }));
    await h.post(envelope({ event_type: 'application.created' }));
    await h.settle();
    h.clock.advance(1000);
    await h.settle();
    expect(consumer.on('/a')).toHaveLength(2);
    for (const got of consumer.on('/a')) {
      expect(got.headers).toMatchObject({ authorization: token, 'x-tenant': 'acme' });
      expect(got.message).not.toBeNull(); // still signed, verified by standardwebhooks
    }
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'delivered', attempts: 2 });
    const everything = [...h.r.logs.raw, JSON.stringify(h.deliveries('a')), JSON.stringify(jobOf(h, 'a'))].join('\n');
    expect(everything).not.toContain('gw-token-5f1e9a');
  });

  it('a delivery whose last attempt never finished (its worker died) is dead-lettered at its next claim, its delivery record too, without being sent', async () => {
    const { h, consumer } = await setup({ max_attempts: 1 });
    await h.post(envelope({ event_type: 'application.created' }));
    // Processed, not yet sent: a worker of another (now dead) process claims the delivery.
    await h.r.app.worker.runUntilIdle();
    const [claimed] = await h.r.app.queue.claim('died', 1, [], ['sink:a']);
    expect(claimed).toBeDefined();
    h.clock.advance(60_001);
    await h.settle();
    expect(consumer.on('/a')).toHaveLength(0);
    expect(jobOf(h, 'a')[0]).toMatchObject({ state: 'dead', last_error: expect.stringMatching(/^its last attempt never finished/) });
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'dead', last_error: expect.stringMatching(/^its last attempt never finished/) });
  });

  it('dead-letters after max_attempts, visibly, and keeps the job', async () => {
    const { h, consumer } = await setup({ max_attempts: 3 });
    consumer.reply(() => ({ status: 502 }));
    await h.post(envelope());
    for (let i = 0; i < 5; i++) {
      await h.settle();
      h.clock.advance(1000);
    }
    expect(consumer.received).toHaveLength(3);
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'dead', attempts: 3, last_status_code: 502 });
    expect(jobOf(h, 'a')[0]).toMatchObject({ state: 'dead', last_error: 'HTTP 502' });
    expect((await h.r.app.fanOut.status())[0]).toMatchObject({ name: 'a', dead: 1, failing: 0, pending: 0 });
  });

  it('413 (the consumer refuses the size) is a dead letter at its first attempt, naming the size; not 25 attempts sending it again', async () => {
    const { h, consumer } = await setup();
    consumer.reply(() => ({ status: 413 }));
    await h.post(envelope({ payload: { notes: 'n'.repeat(200_000) } }));
    for (let i = 0; i < 5; i++) {
      await h.settle();
      h.clock.advance(60_000);
    }
    expect(consumer.received).toHaveLength(1);
    const bytes = Buffer.byteLength(consumer.received[0]!.body);
    const error = `HTTP 413: the consumer refuses a message of ${bytes} bytes (raise its body size limit, then dead-letters retry)`;
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'dead', attempts: 1, last_status_code: 413, last_error: error });
    expect(jobOf(h, 'a')[0]).toMatchObject({ state: 'dead', attempts: 1, last_error: error });
  });

  it('413 with Retry-After (a limit the consumer says is passing) is retried', async () => {
    const { h, consumer } = await setup();
    consumer.reply((_r, n) => (n === 1 ? { status: 413, headers: { 'retry-after': '1' } } : { status: 200 }));
    await h.post(envelope());
    for (let i = 0; i < 5; i++) {
      await h.settle();
      h.clock.advance(60_000);
    }
    expect(consumer.received).toHaveLength(2);
    expect(h.deliveries('a')[0]).toMatchObject({ state: 'delivered', attempts: 2 });
  });

  it('413 with Retry-After is retried no sooner than it says (not on the 10 s backoff, sending the whole message again each time), and holds only that message', async () => {
    const { h, consumer } = await setup({ concurrency: 1 });
    consumer.reply((r) => (r.message?.payload?.notes ? { status: 413, headers: { 'retry-after': '3600' } } : { status: 200 }));
    const big = envelope({ payload: { notes: 'n'.repeat(50_000) } });
    await h.post(big);
    await h.settle();
    expect(consumer.received).toHaveLength(1);
    const bigJob = jobOf(h, 'a').find((j) => j.event_id === big.id)!;
    expect(Date.parse(bigJob.run_at) - h.clock.now()).toBeGreaterThanOrEqual(3_600_000);
    // Another message of the sink is not held by it: a 413 is about that message's size.
    await h.post(envelope({ event_type: 'application.created' }));
    await h.settle();
    expect(consumer.received).toHaveLength(2);
    expect(consumer.received[1]!.message?.payload?.notes).toBeUndefined();
    for (let i = 0; i < 59; i++) {
      h.clock.advance(60_000);
      await h.settle();
    }
    expect(consumer.received).toHaveLength(2);
    expect(h.deliveries('a').find((d) => d.event_id === big.id)).toMatchObject({ state: 'retrying', attempts: 1, last_status_code: 413 });
  });

  it('a token in the sink URL (path or query) never reaches the logs or sink_state, and a new token is a new target', async () => {
    const hookPath = '/hooks/T0123/tok-PATHSECRET?token=tok-QUERYSECRET';
    consumer = await startConsumer({ [hookPath]: SECRET_A });
    consumer.reply(() => ({ status: 410 }));
    h = await startHarness({ sinks: [{ name: 'a', type: 'http', url: `${consumer.url}${hookPath}`, secret: SECRET_A }] });
    await h.post(envelope());
    await h.settle();
    const [state] = h.r.app.database.ingestSqlite.prepare('SELECT disabled_target FROM sink_state').all() as { disabled_target: string }[];
    expect(state!.disabled_target).toMatch(new RegExp(`^${consumer.url.replace(/\./g, '\\.')}/… \\(url sha256 [0-9a-f]{12}\\)$`));
    expect(h.r.logs.lines.some((l) => l.level === 50 && String(l.msg).startsWith('SINK DISABLED'))).toBe(true);
    const everything = [...h.r.logs.raw, JSON.stringify(h.r.app.database.ingestSqlite.prepare('SELECT * FROM sink_state').all()), JSON.stringify(h.deliveries('a'))].join('\n');
    expect(everything).not.toContain('tok-PATHSECRET');
    expect(everything).not.toContain('tok-QUERYSECRET');
    // Only the token changes: still another target, so the sink is re-enabled at the next start.
    expect(httpTarget(`${consumer.url}/hooks/T0123/tok-PATHSECRET?token=tok-NEW`)).not.toBe(state!.disabled_target);
    expect(httpTarget(`${consumer.url}${hookPath}`)).toBe(state!.disabled_target);
  });

  it('410 disables the sink loudly and persistently; its deliveries wait, another sink flows, nothing is lost', async () => {
    // Concurrency 1: with more, the attempts already in flight would also see the 410.
    const { h, consumer } = await setup({ concurrency: 1 }, true);
    consumer.reply((r) => ({ status: r.path === '/a' ? 410 : 200 }));
    const events = [envelope(), envelope(), envelope()];
    for (const e of events) await h.post(e);
    await h.settle();
    expect(consumer.on('/a')).toHaveLength(1); // one 410, then nothing more is claimed
    expect(consumer.on('/b')).toHaveLength(3);
    const state = h.r.app.database.ingestSqlite.prepare('SELECT * FROM sink_state').all();
    expect(state).toEqual([expect.objectContaining({ sink: 'a', disabled_status: 410, disabled_target: expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+\/… \(url sha256 [0-9a-f]{12}\)$/) })]);
    expect(h.r.logs.lines.some((l) => l.level === 50 && String(l.msg).startsWith('SINK DISABLED') && l.sink === 'a')).toBe(true);
    expect(jobOf(h, 'a').map((j) => [j.state, j.attempts])).toEqual([['pending', 0], ['pending', 0], ['pending', 0]]);
    expect(h.deliveries('a').map((d) => d.state)).toEqual(['pending', 'pending', 'pending']);

    // More events while disabled are queued for it too, and still not sent.
    const late = envelope();
    await h.post(late);
    // (Consumers check webhook-timestamp against their own clock: stay within minutes of real time.)
    h.clock.advance(2 * 60_000);
    await h.settle();
    expect(consumer.on('/a')).toHaveLength(1);
    expect((await h.r.app.fanOut.status()).find((s) => s.name === 'a')).toMatchObject({ enabled: false, pending: 4 });

    // A restart with the same URL keeps it disabled.
    await h.r.app.fanOut.reconcile();
    await h.settle();
    expect(consumer.on('/a')).toHaveLength(1);

    // The operator re-enables it (the CLI's action): everything is delivered, each once.
    consumer.reply(() => ({ status: 200 }));
    expect(await enableSink(h.r.app.database.db, 'a', h.clock.now())).toBe(true);
    await h.settle();
    const ids = consumer.on('/a').slice(1).map((r) => r.message!.id);
    expect(ids.sort()).toEqual([...events, late].map((e) => e.id).sort());
    expect(h.deliveries('a').every((d) => d.state === 'delivered')).toBe(true);
  });

  it('a disabled sink is re-enabled at start when its URL changed', async () => {
    const { h, consumer } = await setup();
    consumer.reply(() => ({ status: 410 }));
    await h.post(envelope());
    await h.settle();
    expect((await h.r.app.fanOut.status())[0]!.enabled).toBe(false);
    // The same database under a configuration that points the sink elsewhere.
    const moved = new FanOut({
      db: h.r.app.database.db,
      queue: h.r.app.queue,
      clock: h.clock,
      logger: h.r.app.logger,
      sinks: [{ name: 'a', type: 'http', events: null, sources: null, concurrency: 1, maxAttempts: 5, target: `${consumer.url}/moved`, options: { url: `${consumer.url}/moved`, secret: SECRET_A, timeoutMs: 1000 } }],
    });
    await moved.reconcile();
    expect((await moved.status())[0]!.enabled).toBe(true);
    consumer.reply(() => ({ status: 200 }));
    await moved.runUntilIdle();
    expect(consumer.on('/moved')).toHaveLength(1);
    expect(consumer.on('/moved')[0]!.message).not.toBeNull();
  });
});

describe('isolation: one sink per worker', () => {
  it('a sink down for a while never delays another; it then catches up with nothing lost', async () => {
    const { h, consumer } = await setup({}, true);
    let aUp = false;
    consumer.reply((r) => ({ status: r.path === '/a' && !aUp ? 503 : 200 }));
    const events = Array.from({ length: 6 }, () => envelope());
    for (const e of events) await h.post(e);
    await h.settle();
    expect(consumer.on('/b').map((r) => r.message!.id).sort()).toEqual(events.map((e) => e.id).sort());
    expect(consumer.on('/a').every((r) => r.message !== null)).toBe(true);
    for (let i = 0; i < 3; i++) {
      h.clock.advance(1000);
      await h.settle();
    }
    expect(h.deliveries('a').every((d) => d.state === 'retrying' && d.attempts === 4)).toBe(true);
    aUp = true;
    h.clock.advance(1000);
    await h.settle();
    const ok = consumer.on('/a').slice(-6);
    expect(ok.map((r) => r.message!.id).sort()).toEqual(events.map((e) => e.id).sort());
    expect(consumer.on('/a')).toHaveLength(6 * 5);
    expect(h.deliveries('a').every((d) => d.state === 'delivered' && d.attempts === 5)).toBe(true);
    expect(h.deliveries('b').every((d) => d.state === 'delivered' && d.attempts === 1)).toBe(true);
  });

  it('with running workers, a hanging sink does not hold up the other one', async () => {
    const { h, consumer: c } = await setup({ timeout_ms: 5000, concurrency: 2 }, true);
    c.reply((r) => (r.path === '/a' ? { status: 200, hangMs: 2500 } : { status: 200 }));
    const events = Array.from({ length: 4 }, () => envelope());
    for (const e of events) await h.post(e);
    await h.r.app.worker.runUntilIdle(); // settle the events (processing)
    await h.r.app.fanOut.start();
    const t0 = Date.now();
    while (c.on('/b').length < 4 && Date.now() - t0 < 2000) await new Promise((ok) => setTimeout(ok, 10));
    expect(c.on('/b')).toHaveLength(4);
    expect(Date.now() - t0).toBeLessThan(2000);
    // Sink a is still stuck on its first two requests (its concurrency), none delivered.
    expect(c.on('/a')).toHaveLength(2);
    expect(h.deliveries('a').some((d) => d.state === 'delivered')).toBe(false);
    await c.close(); // cuts the hanging requests: they fail and will retry
    consumer = undefined;
    await h.r.app.fanOut.stop();
    expect(h.deliveries('a').filter((d) => d.state === 'retrying')).toHaveLength(2);
  });
});

describe('http sink, upgraded from a version that stored the whole URL', () => {
  it('a sink a 410 disabled then stays disabled (same URL), and its stored target loses the token', async () => {
    const { dir, cleanup } = tempDir('sink-upgrade-');
    try {
      const url = 'https://hooks.example.com/services/T0/B0/tok-XXXXSECRET';
      const configFile = join(dir, 'config.json');
      writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'slack', type: 'http', url, secret: SECRET_A }] }));
      const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), CONFIG_FILE: configFile, WORKER_CONCURRENCY: '1' }, { listen: false });
      try {
        // What earlier versions stored on a 410: the whole URL.
        r.app.database.ingestSqlite
          .prepare(
            "INSERT INTO sink_state (sink, disabled_at, disabled_reason, disabled_status, disabled_target, updated_at) VALUES ('slack', '2026-01-01T00:00:00.000Z', 'HTTP 410 Gone', 410, ?, '2026-01-01T00:00:00.000Z')",
          )
          .run(url);
        await r.app.startWorkers();
        const st = r.app.database.ingestSqlite.prepare('SELECT disabled_at, disabled_target FROM sink_state').get();
        expect(st).toEqual({ disabled_at: '2026-01-01T00:00:00.000Z', disabled_target: httpTarget(url) });
        expect(r.logs.lines.some((l) => /sink re-enabled/.test(String(l.msg)))).toBe(false);
      } finally {
        await r.close();
      }
    } finally {
      cleanup();
    }
  });
});

describe('http sink at shutdown', () => {
  it('a consumer that never answers does not hold stop() past SHUTDOWN_GRACE_MS; the interruption is noted (no attempt counted) and the message stays queued', async () => {
    const hanging = await startSilentServer();
    const { dir, cleanup } = tempDir('sink-shutdown-');
    try {
      const configFile = join(dir, 'config.json');
      const url = `${hanging.url}/hook`;
      writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'slow', type: 'http', url, secret: SECRET_A, timeout_ms: 50_000 }] }));
      const secret = newSecret();
      const r = await startReceiver({ WEBHOOK_SECRET: secret, CONFIG_FILE: configFile, SHUTDOWN_GRACE_MS: '300' }, { listen: false });
      const e = envelope();
      const d = signDelivery(secret, JSON.stringify(e));
      expect((await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
      await r.app.startWorkers();
      await hanging.waitForRequest();
      expect(hanging.held).toHaveLength(1);

      const started = Date.now();
      await r.app.stop();
      const took = Date.now() - started;
      expect(took).toBeGreaterThanOrEqual(250);
      expect(took).toBeLessThan(10_000);
      const db = new BetterSqlite3(r.dbPath, { readonly: true });
      const delivery = db.prepare("SELECT state, attempts, last_error FROM deliveries WHERE sink = 'slow'").get();
      const job = db.prepare("SELECT state FROM jobs WHERE kind = 'sink:slow'").get();
      db.close();
      expect(delivery).toEqual({ state: 'retrying', attempts: 0, last_error: 'interrupted: the receiver was stopping (SHUTDOWN_GRACE_MS passed)' });
      expect(job).toEqual({ state: 'pending' });
      rmSync(dirname(r.dbPath), { recursive: true, force: true });
    } finally {
      hanging.close();
      cleanup();
    }
  });

  it('a message cut by the stop on its last attempt is not dead-lettered: put back due at once (for the restart), without counting the attempt on the job or the delivery', async () => {
    const hanging = await startSilentServer();
    const { dir, cleanup } = tempDir('sink-shutdown-last-');
    try {
      const configFile = join(dir, 'config.json');
      writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'slow', type: 'http', url: `${hanging.url}/hook`, secret: SECRET_A, timeout_ms: 50_000, max_attempts: 1 }] }));
      const secret = newSecret();
      const r = await startReceiver({ WEBHOOK_SECRET: secret, CONFIG_FILE: configFile, SHUTDOWN_GRACE_MS: '300' }, { listen: false });
      const d = signDelivery(secret, JSON.stringify(envelope()));
      expect((await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
      await r.app.startWorkers();
      await hanging.waitForRequest();
      await r.app.stop();
      const db = new BetterSqlite3(r.dbPath, { readonly: true });
      const { run_at: runAt, ...job } = db.prepare("SELECT state, attempts, max_attempts, last_error, run_at FROM jobs WHERE kind = 'sink:slow'").get() as { run_at: string };
      const delivery = db.prepare("SELECT state, attempts, last_error, last_attempt_at FROM deliveries WHERE sink = 'slow'").get();
      db.close();
      expect(job).toEqual({ state: 'pending', attempts: 0, max_attempts: 1, last_error: 'interrupted: the receiver was stopping (SHUTDOWN_GRACE_MS passed)' });
      // The row operators read says so too: noted, no attempt counted (counted, three stops read as 3 attempts of at most 1).
      expect(delivery).toEqual({ state: 'retrying', attempts: 0, last_error: 'interrupted: the receiver was stopping (SHUTDOWN_GRACE_MS passed)', last_attempt_at: null });
      expect(Date.parse(runAt)).toBeLessThanOrEqual(Date.now());
      rmSync(dirname(r.dbPath), { recursive: true, force: true });
    } finally {
      hanging.close();
      cleanup();
    }
  });
});

describe('http sink whose max_attempts was lowered', () => {
  it('a waiting delivery that already failed that many times gets one last attempt, and its dead letter says why it failed', async () => {
    consumer = await startConsumer({ '/a': SECRET_A });
    consumer.reply(() => ({ status: 500 }));
    const sink = { name: 'a', type: 'http', url: `${consumer.url}/a`, secret: SECRET_A };
    h = await startHarness({ sinks: [{ ...sink, max_attempts: 25 }] });
    const e = envelope();
    await h.post(e);
    await h.settle();
    h.clock.advance(1000);
    await h.settle();
    expect(jobOf(h, 'a')).toEqual([expect.objectContaining({ state: 'pending', attempts: 2 })]);
    // The operator lowers max_attempts to 1, and the receiver starts again on the same database.
    const configFile = join(h.dir, 'config.json');
    writeFileSync(configFile, JSON.stringify({ sinks: [{ ...sink, max_attempts: 1 }] }));
    const restarted = await startReceiver(
      { WEBHOOK_SECRET: h.secret, CONFIG_FILE: configFile, DATABASE_PATH: h.r.dbPath },
      { clock: h.clock, listen: false, sinks: { backoff: { baseMs: 1000, capMs: 1000, jitter: 0 } } },
    );
    extra.push(restarted);
    await restarted.app.fanOut.reconcile();
    h.clock.advance(1000);
    await restarted.app.fanOut.runUntilIdle();
    expect(consumer.on('/a')).toHaveLength(3);
    expect(jobOf(h, 'a')).toEqual([expect.objectContaining({ state: 'dead', last_error: 'HTTP 500' })]);
    expect(h.deliveries('a')).toEqual([expect.objectContaining({ state: 'dead', last_status_code: 500, last_error: 'HTTP 500' })]);
  });
});
