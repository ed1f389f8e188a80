import type { ServerResponse } from 'node:http';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createManualClock, type ManualClock } from '../../src/sandbox/clock.js';
import { createSandbox } from '../../src/sandbox/createSandbox.js';
import { startReceiver, startSandbox, subscribe, subscribeInProcess, type Receiver, type Running } from './helpers.js';

const DAY = 86_400_000;

describe('chaos knobs (issue 3; spec 6.1 at-least-once and unordered, 6.2 timestamps)', () => {
  let run: Running;
  let receiver: Receiver;
  let clock: ManualClock;
  beforeEach(async () => {
    clock = createManualClock(Date.now());
    run = await startSandbox({ clock });
    receiver = await startReceiver();
    await subscribe(run, receiver);
  });
  afterEach(async () => {
    await run.sandbox.stop();
    await receiver.close();
  });

  it('is off by default', () => {
    expect(run.sandbox.control.chaos()).toEqual({ duplicateRate: 0, reorder: false, parallel: false, delayMs: 0, timestampOffsetMs: 0 });
  });

  it('duplicate: the same event id arrives twice with fresh webhook-ids, both validly signed', async () => {
    run.sandbox.control.setChaos({ duplicateRate: 1 });
    const { id } = run.sandbox.control.emitEvent({ eventType: 'application.created', payload: {} });
    await run.sandbox.control.idle();
    expect(receiver.requests.map((r) => r.body.id)).toEqual([id, id]);
    const [a, b] = receiver.requests.map((r) => r.headers['webhook-id']);
    expect(a).not.toBe(b);
    expect(receiver.requests.every((r) => r.verified)).toBe(true);
  });

  it('reorder: deliveries that fall due together go out newest first', async () => {
    run.sandbox.control.setChaos({ reorder: true });
    const ids = ['one', 'two', 'three'].map((n) => run.sandbox.control.emitEvent({ eventType: 'application.created', payload: { n } }).id);
    await run.sandbox.control.idle();
    expect(receiver.requests.map((r) => r.body.id)).toEqual([...ids].reverse());
  });

  it('parallel: more than ten attempts in flight at once raise no "possible memory leak" warning (found by the chaos soak)', async () => {
    run.sandbox.control.setChaos({ parallel: true });
    const warnings: Error[] = [];
    const onWarning = (w: Error) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      // Holds every request until all 12 are open (or 2 s have passed), then answers them.
      const held: ServerResponse[] = [];
      const release = () => {
        for (const res of held.splice(0)) res.writeHead(204).end();
      };
      receiver.respond = (_req, res) => {
        held.push(res);
        if (held.length === 12) release();
        else setTimeout(release, 2000).unref();
      };
      for (let i = 0; i < 12; i++) run.sandbox.control.emitEvent({ eventType: 'application.created', payload: { i } });
      await run.sandbox.control.idle();
      await new Promise((r) => setImmediate(r)); // process.emitWarning emits on a later tick
      expect(receiver.requests).toHaveLength(12);
      expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message)).toEqual([]);
    } finally {
      process.off('warning', onWarning);
    }
  });

  it('parallel: deliveries to one endpoint that fall due together go out at once, so a duplicate overlaps its original', async () => {
    run.sandbox.control.setChaos({ duplicateRate: 1, parallel: true });
    // Holds each request until a second one is open (or 1 s has passed), then answers both.
    let open = 0;
    let most = 0;
    const held: ServerResponse[] = [];
    const release = () => {
      for (const res of held.splice(0)) {
        open--;
        res.writeHead(204).end();
      }
    };
    receiver.respond = (_req, res) => {
      open++;
      most = Math.max(most, open);
      held.push(res);
      if (held.length === 2) release();
      else setTimeout(release, 1000).unref();
    };
    const { id } = run.sandbox.control.emitEvent({ eventType: 'application.created', payload: {} });
    await run.sandbox.control.idle();
    expect(receiver.requests.map((r) => r.body.id)).toEqual([id, id]);
    expect(most).toBe(2);
    expect(run.sandbox.control.deliveries().map((d) => d.status)).toEqual(['succeeded', 'succeeded']);
  });

  it('delay: nothing is sent before the delay has passed on the sandbox clock', async () => {
    run.sandbox.control.setChaos({ delayMs: 45_000 });
    run.sandbox.control.emitEvent({ eventType: 'application.created', payload: {} });
    await run.sandbox.control.idle();
    expect(receiver.requests).toHaveLength(0);
    await run.sandbox.control.advance(44_999);
    expect(receiver.requests).toHaveLength(0);
    await run.sandbox.control.advance(1);
    expect(receiver.requests).toHaveLength(1);
  });

  it('timestamp offset: webhook-timestamp is shifted; beyond 5 minutes verification fails and the attempt fails', async () => {
    run.sandbox.control.setChaos({ timestampOffsetMs: -6 * 60_000 });
    run.sandbox.control.emitEvent({ eventType: 'application.created', payload: {} });
    await run.sandbox.control.idle();
    const [req] = receiver.requests;
    expect(Number(req!.headers['webhook-timestamp'])).toBe(Math.floor((clock.now() - 6 * 60_000) / 1000));
    expect(req!.verified).toBe(false);
    expect(run.sandbox.control.deliveries()[0]).toMatchObject({ status: 'failed', response_code: 400 });
  });
});

describe('long delays on the real clock', () => {
  afterEach(() => void vi.useRealTimers());

  it('delay: a delay beyond 2^31-1 ms (about 24.8 days) waits it out, not a 1 ms timer re-armed for ever', async () => {
    // Node (and vitest's fake timers, which copy it) runs a longer setTimeout after 1 ms: the
    // scheduler then woke every millisecond to find nothing due, with a TimeoutOverflowWarning each time.
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'Date'] });
    let reads = 0;
    const clock = { now: () => (reads++, Date.now()) };
    const sent: string[] = [];
    const fetch = (async (url: string) => (sent.push(url), new Response(null, { status: 204 }))) as unknown as typeof globalThis.fetch;
    const sandbox = createSandbox({ clock, fetch, chaos: { delayMs: 30 * DAY } });
    try {
      await subscribeInProcess(sandbox, 'http://127.0.0.1:9/webhooks');
      sandbox.control.emitEvent({ eventType: 'application.created', payload: {} });
      const before = reads;
      await vi.advanceTimersByTimeAsync(1_000);
      expect(reads - before).toBeLessThan(10);
      await vi.advanceTimersByTimeAsync(30 * DAY - 1_000 - 1);
      expect(sent).toHaveLength(0);
      await vi.advanceTimersByTimeAsync(1);
      expect(sent).toEqual(['http://127.0.0.1:9/webhooks']);
    } finally {
      await sandbox.stop();
    }
  });
});
