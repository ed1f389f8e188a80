import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { PauseSourceError, RetryableError } from '../../src/hiring/errors.js';
import { createLogger } from '../../src/observability/logger.js';
import { enqueue } from '../../src/queue/JobQueue.js';
import { Worker } from '../../src/queue/Worker.js';
import { createDeliveryHandler } from '../../src/sinks/deliveryHandler.js';
import { createFileSink, openAppend, type SinkFile } from '../../src/sinks/kinds/file.js';
import type { SinkConfig } from '../../src/sinks/sinkConfig.js';
import { SinkGate } from '../../src/sinks/SinkGate.js';
import { BATCH_BYTES, countWithin } from '../../src/sinks/messageBytes.js';
import type { DeliveryOutcome, Sink, SinkMessage } from '../../src/sinks/types.js';
import { envelope, signDelivery } from '../helpers/signing.js';
import { sinkFileOf, startHarness, type Harness } from './helpers.js';

let h: Harness | undefined;
afterEach(async () => {
  await h?.close();
  h = undefined;
});

const logger = createLogger('silent');
const RETRY_MS = 1000;
const idsIn = (path: string) =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => (JSON.parse(l) as SinkMessage).id);

/**
 * A receiver whose configured sink `x` gets a delivery job per settled event
 * (the app's own lanes are not started), and a Worker running those jobs with
 * the real batch handler over `sink` (a test double or a file sink on a fake file).
 */
async function lane(sink: Sink, events: number, o: { maxJobs?: number; maxAttempts?: number; notesBytes?: number } = {}) {
  h = await startHarness({ sinks: [{ name: 'x', type: 'stdout', max_attempts: o.maxAttempts ?? 25 }] });
  const harness = h;
  const posted: string[] = [];
  for (let i = 0; i < events; i++) {
    const e = envelope();
    if (o.notesBytes) (e.payload as Record<string, unknown>).notes = 'n'.repeat(o.notesBytes);
    posted.push(e.id as string);
    await harness.post(e);
  }
  await harness.r.app.worker.runUntilIdle(); // processing only: settles the events, queues `sink:x`
  const { db } = harness.r.app.database;
  const config: SinkConfig = { name: 'x', type: 'stdout', events: null, sources: null, concurrency: 64, maxAttempts: o.maxAttempts ?? 25, target: 'stdout', options: {} };
  const gate = new SinkGate(db, harness.clock, 'x', 'stdout');
  const worker = new Worker({
    queue: harness.r.app.queue,
    clock: harness.clock,
    logger,
    gate,
    concurrency: 64,
    backoff: { baseMs: RETRY_MS, capMs: RETRY_MS, jitter: 0 },
    handlers: { 'sink:x': createDeliveryHandler({ db, clock: harness.clock, logger, sink, config, gate, maxJobs: o.maxJobs ?? 64, revise: harness.r.app.fanOut.revise }) },
  });
  const jobs = () =>
    harness.r.app.database.ingestSqlite.prepare("SELECT event_id, state, attempts, last_error, run_at FROM jobs WHERE kind = 'sink:x'").all() as {
      event_id: string; state: string; attempts: number; last_error: string | null; run_at: string;
    }[];
  const byEvent = <T extends { event_id: string }>(rows: T[]) => posted.map((id) => rows.find((r) => r.event_id === id)!);
  return { h: harness, posted, worker, jobs: () => byEvent(jobs()), deliveries: () => byEvent(harness.deliveries('x') as { event_id: string }[]) as Record<string, any>[] };
}

/** A batch-capable sink that fails the messages `fail` picks, and records each batch it was given. */
function scriptedSink(fail: (m: SinkMessage) => Error | null) {
  const batches: string[][] = [];
  const accepted: string[] = [];
  const sink: Sink = {
    deliver: () => Promise.reject(new Error('batch sinks get batches')),
    async deliverBatch(batch) {
      batches.push(batch.map((b) => b.message.id));
      return batch.map(({ message }): PromiseSettledResult<DeliveryOutcome> => {
        const err = fail(message);
        if (err) return { status: 'rejected', reason: err };
        accepted.push(message.id);
        return { status: 'fulfilled', value: {} };
      });
    },
  };
  return { sink, batches, accepted };
}

describe('sink batches', () => {
  it('one message of a batch fails: the others are delivered and recorded, it alone is retried and then delivered', async () => {
    let failing: string | null = null;
    const s = scriptedSink((m) => (m.id === failing ? Object.assign(new RetryableError('HTTP 500'), { status: 500 }) : null));
    const l = await lane(s.sink, 4);
    failing = l.posted[1]!;
    expect(await l.worker.runUntilIdle()).toBe(4);
    expect(s.batches).toEqual([l.posted]); // one claim, one batch
    expect(l.deliveries().map((d) => d.state)).toEqual(['delivered', 'retrying', 'delivered', 'delivered']);
    expect(l.deliveries()[1]).toMatchObject({ attempts: 1, last_status_code: 500, last_error: 'HTTP 500', delivered_at: null });
    expect(l.jobs().map((j) => j.state)).toEqual(['done', 'pending', 'done', 'done']);
    expect(Date.parse(l.jobs()[1]!.run_at) - l.h.clock.now()).toBe(RETRY_MS);

    failing = null;
    l.h.clock.advance(RETRY_MS);
    expect(await l.worker.runUntilIdle()).toBe(1);
    expect(s.batches[1]).toEqual([l.posted[1]]);
    expect(l.deliveries().map((d) => [d.state, d.attempts])).toEqual([['delivered', 1], ['delivered', 2], ['delivered', 1], ['delivered', 1]]);
    expect(l.jobs().every((j) => j.state === 'done')).toBe(true);
  });

  it('past max_attempts the failing message of a batch is dead-lettered with its record; the rest are delivered', async () => {
    let failing: string | null = null;
    const s = scriptedSink((m) => (m.id === failing ? new RetryableError('HTTP 502') : null));
    const l = await lane(s.sink, 3, { maxAttempts: 1 });
    failing = l.posted[2]!;
    await l.worker.runUntilIdle();
    expect(l.deliveries().map((d) => d.state)).toEqual(['delivered', 'delivered', 'dead']);
    expect(l.jobs()[2]).toMatchObject({ state: 'dead', last_error: 'HTTP 502' });
  });

  it('a 410 inside a batch disables the sink and keeps that delivery pending, without counting the attempt', async () => {
    let gone: string | null = null;
    const s = scriptedSink((m) => (m.id === gone ? Object.assign(new PauseSourceError('HTTP 410 Gone'), { status: 410 }) : null));
    const l = await lane(s.sink, 3);
    gone = l.posted[0]!;
    await l.worker.runUntilIdle();
    expect(l.deliveries().map((d) => d.state)).toEqual(['pending', 'delivered', 'delivered']);
    expect(l.deliveries()[0]!.last_error).toMatch(/^sink disabled: HTTP 410/);
    expect(l.jobs()[0]).toMatchObject({ state: 'pending', attempts: 0 });
    const state = l.h.r.app.database.ingestSqlite.prepare("SELECT disabled_status FROM sink_state WHERE sink = 'x'").get() as { disabled_status: number };
    expect(state.disabled_status).toBe(410);
    // Disabled: nothing more is claimed.
    expect(await l.worker.runUntilIdle()).toBe(0);
  });

  it('a batch finishing after its lease was taken over completes and records only the jobs it still holds', async () => {
    const l0: { takeOver?: () => Promise<void> } = {};
    const s = scriptedSink(() => null);
    const inner = s.sink.deliverBatch!;
    s.sink.deliverBatch = async (batch) => {
      await l0.takeOver?.();
      return inner(batch);
    };
    const l = await lane(s.sink, 3);
    let taken: string | undefined;
    l0.takeOver = async () => {
      l0.takeOver = undefined;
      // The write took longer than the lease: another worker claims the first job again.
      l.h.clock.advance(60_001);
      const [job] = await l.h.r.app.queue.claim('other-worker', 1, [], ['sink:x']);
      taken = job!.event_id!;
    };
    await l.worker.runUntilIdle(3);
    expect(taken).toBe(l.posted[0]);
    expect(l.jobs().map((j) => j.state)).toEqual(['running', 'done', 'done']);
    // The newer attempt records that delivery; the stale batch did not.
    expect(l.deliveries().map((d) => d.state)).toEqual(['pending', 'delivered', 'delivered']);
  });

  it('a file sink batch is one write and one fsync; a delivery is done only after the fsync, and a failed fsync retries the whole batch', async () => {
    const dir = (await import('../helpers/receiver.js')).tempDir('batch-file-');
    const path = join(dir.dir, 'out.ndjson');
    let writes = 0;
    let syncs = 0;
    let failSync = true;
    const openFile = async (p: string): Promise<SinkFile> => {
      const fh = await openAppend(p);
      return sinkFileOf(fh, {
        write: (buf) => {
          writes++;
          return fh.write(buf);
        },
        sync: async () => {
          syncs++;
          if (failSync) {
            failSync = false;
            throw Object.assign(new Error('EIO: i/o error, fsync'), { code: 'EIO' });
          }
          return fh.sync();
        },
      });
    };
    const sink = createFileSink({ path }, { logger, openFile });
    try {
      const l = await lane(sink, 5);
      expect(await l.worker.runUntilIdle()).toBe(5);
      // The lines were written but not synced: cut back, nothing counts as delivered.
      expect(writes).toBe(1);
      expect(readFileSync(path, 'utf8')).toBe('');
      expect(l.deliveries().map((d) => d.state)).toEqual(Array(5).fill('retrying'));
      expect(l.deliveries()[0]!.last_error).toMatch(/cannot append to .*EIO/);

      l.h.clock.advance(RETRY_MS);
      expect(await l.worker.runUntilIdle()).toBe(5);
      expect(writes).toBe(2);
      // One fsync per batch (the cut-back of the failed one synced too).
      expect(syncs).toBe(3);
      expect(idsIn(path)).toEqual(l.posted);
      expect(l.deliveries().map((d) => d.state)).toEqual(Array(5).fill('delivered'));
    } finally {
      await sink.close!();
      dir.cleanup();
    }
  });

  it('a file sink batch of large messages is written in parts within BATCH_BYTES, each delivered at its first attempt', async () => {
    // 12 messages of 900 KB: 10.5 MB, in one claim. Written at once, a claim of 256 messages with
    // results of a few MB took the receiver to gigabytes and past V8's longest string.
    const dir = (await import('../helpers/receiver.js')).tempDir('batch-file-');
    const path = join(dir.dir, 'out.ndjson');
    const writes: number[] = [];
    const openFile = async (p: string): Promise<SinkFile> => {
      const fh = await openAppend(p);
      return sinkFileOf(fh, {
        write: (buf) => {
          writes.push(buf.length);
          return fh.write(buf);
        },
      });
    };
    const sink = createFileSink({ path }, { logger, openFile });
    try {
      const l = await lane(sink, 12, { notesBytes: 900_000 });
      // Put back unsent, a job keeps the error of its last attempt (status and sinks list show it) and its attempts.
      l.h.r.app.database.ingestSqlite.prepare("UPDATE jobs SET last_error = 'HTTP 503 (an earlier attempt)' WHERE kind = 'sink:x'").run();
      await l.worker.runUntilIdle(12); // one claim of the 12
      const putBack = l.jobs().filter((j) => j.state === 'pending');
      expect(putBack.length).toBeGreaterThan(0);
      expect(putBack.map((j) => [j.last_error, j.attempts])).toEqual(putBack.map(() => ['HTTP 503 (an earlier attempt)', 0]));
      await l.worker.runUntilIdle(); // the messages put back are claimed again
      expect(writes.length).toBeGreaterThan(1);
      // A message is its stored envelope and a few hundred bytes of the receiver's fields.
      for (const bytes of writes) expect(bytes).toBeLessThanOrEqual(BATCH_BYTES + 12 * 1024);
      expect(idsIn(path).sort()).toEqual([...l.posted].sort());
      expect(l.deliveries().map((d) => [d.state, d.attempts])).toEqual(Array(12).fill(['delivered', 1]));
      expect(l.jobs().map((j) => [j.state, j.attempts])).toEqual(Array(12).fill(['done', 1]));
    } finally {
      await sink.close!();
      dir.cleanup();
    }
  }, 30_000);
});

describe('countWithin', () => {
  it('takes sizes from the first while their sum fits, and always the first', () => {
    expect(countWithin([3, 3, 3], 9)).toBe(3);
    expect(countWithin([3, 3, 3], 8)).toBe(2);
    expect(countWithin([10, 1], 8)).toBe(1);
    expect(countWithin([], 8)).toBe(0);
  });
});

describe('file sink batches through the app', () => {
  it('a payload nested too deeply to write as JSON is a dead letter at once in every sink, saying why; the rest of the file batch is written', async () => {
    const dir = (await import('../helpers/receiver.js')).tempDir('batch-deep-');
    const path = join(dir.dir, 'archive.ndjson');
    try {
      h = await startHarness({ sinks: [{ name: 'archive', type: 'file', path }, { name: 'out', type: 'stdout' }] });
      // Signed like any delivery (whoever holds the secret); JSON.parse takes it, JSON.stringify cannot.
      const depth = 20_000;
      const deep = envelope({ event_type: 'application.created' });
      (deep.payload as Record<string, unknown>).extra = '__DEEP__';
      const deepBody = JSON.stringify(deep).replace('"__DEEP__"', `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`);
      const d = signDelivery(h.secret, deepBody, { timestampSeconds: Math.floor(h.clock.now() / 1000) });
      expect((await h.r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
      const others = [envelope(), envelope()];
      for (const e of others) await h.post(e);
      await h.settle();
      expect(idsIn(path)).toEqual(others.map((e) => e.id));
      expect(h.stdout.lines.map((l) => JSON.parse(l).id)).toEqual(others.map((e) => e.id));
      const rows = h.r.app.database.ingestSqlite.prepare('SELECT sink, state, attempts, last_error FROM deliveries WHERE event_id = ? ORDER BY sink').all(deep.id);
      const why = /^the message cannot be written as JSON \(Maximum call stack size exceeded\): its payload nests too deeply$/;
      expect(rows).toEqual([
        { sink: 'archive', state: 'dead', attempts: 1, last_error: expect.stringMatching(why) },
        { sink: 'out', state: 'dead', attempts: 1, last_error: expect.stringMatching(why) },
      ]);
    } finally {
      await h?.close();
      h = undefined;
      dir.cleanup();
    }
  });


  it('delivers every event with one line each; a delivery whose event is not stored is dead-lettered on its own', async () => {
    const dir = (await import('../helpers/receiver.js')).tempDir('batch-app-');
    const path = join(dir.dir, 'archive.ndjson');
    try {
      h = await startHarness({ sinks: [{ name: 'archive', type: 'file', path }] });
      const posted: string[] = [];
      for (let i = 0; i < 20; i++) {
        const e = envelope();
        posted.push(e.id as string);
        await h.post(e);
      }
      await h.r.app.worker.runUntilIdle();
      const { db } = h.r.app.database;
      await enqueue(db, { kind: 'sink:archive', payload: { event_id: 'evt_gone', sink: 'archive' }, eventId: 'evt_gone', source: 'sink:archive' }, h.clock.now());
      expect(await h.r.app.fanOut.runUntilIdle()).toBe(21);
      expect(idsIn(path)).toEqual(posted);
      expect(h.deliveries('archive').map((d) => d.state)).toEqual(Array(20).fill('delivered'));
      const gone = h.r.app.database.ingestSqlite.prepare("SELECT state, last_error FROM jobs WHERE event_id = 'evt_gone'").get();
      expect(gone).toEqual({ state: 'dead', last_error: 'event evt_gone is not stored' });
    } finally {
      await h?.close();
      h = undefined;
      dir.cleanup();
    }
  });
});
