import { createServer as createHttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { REFUSALS_LOGGED_PER_MINUTE } from '../../src/observability/RefusalLog.js';
import { ManualClock } from '../../src/util/clock.js';
import { envelope, newSecret, signDelivery } from '../helpers/signing.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';

const secret = newSecret();
let r: TestReceiver | null = null;
afterEach(async () => {
  await r?.close();
  r = null;
});

/** receiver_deliveries_received_total for an outcome (source "unknown" unless said), as /metrics says it now. */
async function counted(url: string, outcome: string, source = 'unknown'): Promise<number> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`receiver_deliveries_received_total{outcome="${outcome}",source="${source}"} `));
  return Number(line?.split(' ')[1] ?? 0);
}

type Line = Record<string, unknown>;
const WARN = 40;
const DEBUG = 20;
/** The lines of refused requests of one kind (a delivery's outcome, or a message before routing), by level. */
const refusedLines = (lines: Line[], match: (l: Line) => boolean) => ({
  warn: lines.filter((l) => match(l) && l.level === WARN && !String(l.msg).startsWith('more requests refused')),
  debug: lines.filter((l) => match(l) && l.level === DEBUG),
  counts: lines.filter((l) => match(l) && String(l.msg).startsWith('more requests refused alike')),
});
/** Everything the warn lines of a kind counted: on a refusal's own line or on a count line. */
const sumCounted = (lines: Line[]) => lines.reduce((n, l) => n + Number(l.refused_since_last_line ?? 0), 0);

describe('refused requests are logged a few a minute per kind, counted exactly', () => {
  it('a flood of forged deliveries: 5 lines at warn, the rest at debug, their count a minute later; every one in the metrics, and the genuine ones all logged', async () => {
    const clock = new ManualClock(Date.now());
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret }, { clock });
    const url = r.url;
    const post = (d: { body: string; headers: Record<string, string> }) => fetch(`${url}/webhooks`, { method: 'POST', headers: d.headers, body: d.body });
    const seconds = () => Math.floor(clock.now() / 1000);
    const forged = (i: number) => signDelivery(newSecret(), JSON.stringify(envelope()), { msgId: `msg_forged_${i}`, timestampSeconds: seconds() });
    const N = 60;
    // A burst, in waves of 20 at once, with a genuine delivery in each wave.
    const genuine: string[] = [];
    for (let wave = 0; wave < N / 20; wave++) {
      const env = envelope();
      genuine.push(env.id as string);
      const answers = await Promise.all([
        ...Array.from({ length: 20 }, (_, i) => post(forged(wave * 20 + i))),
        post(signDelivery(secret, JSON.stringify(env), { timestampSeconds: seconds() })),
      ]);
      expect(answers.map((a) => a.status)).toEqual([...Array(20).fill(401), 200]);
    }
    // Another reason is another kind, with its own lines: 8 without the webhook-* headers.
    for (let i = 0; i < 8; i++) {
      expect((await fetch(`${url}/webhooks`, { method: 'POST', headers: { 'webhook-id': `msg_bare_${i}` }, body: '{}' })).status).toBe(400);
    }

    const isForged = (l: Line) => l.outcome === 'rejected:no_valid_signature';
    const isBare = (l: Line) => l.outcome === 'rejected:missing_header';
    let forgedLines = refusedLines(r.logs.lines, isForged);
    expect(forgedLines.warn).toHaveLength(REFUSALS_LOGGED_PER_MINUTE);
    // Logged as before: the delivery's id, the outcome, the status, at warn.
    for (const l of forgedLines.warn) {
      expect(l).toMatchObject({ msg: 'webhook delivery', status: 401, delivery_id: expect.stringMatching(/^msg_forged_\d+$/) });
      expect(l).not.toHaveProperty('refused_since_last_line');
    }
    expect(forgedLines.debug).toHaveLength(N - REFUSALS_LOGGED_PER_MINUTE);
    expect(refusedLines(r.logs.lines, isBare).warn).toHaveLength(REFUSALS_LOGGED_PER_MINUTE);
    // Each counted, whatever its line.
    expect(await counted(url, 'rejected:no_valid_signature')).toBe(N);
    expect(await counted(url, 'rejected:missing_header')).toBe(8);
    // The service's deliveries are never throttled.
    const accepted = r.logs.lines.filter((l) => l.msg === 'webhook delivery' && l.outcome === 'accepted');
    expect(accepted.map((l) => l.event_id).sort()).toEqual([...genuine].sort());
    expect(accepted.every((l) => l.level === 30)).toBe(true);

    // A minute later, the next forged one is at warn again and says how many were at debug
    // meanwhile (or, had the receiver's timer looked first, a count line of its own did).
    clock.advance(60_000);
    expect((await post(forged(N))).status).toBe(401);
    forgedLines = refusedLines(r.logs.lines, isForged);
    expect(forgedLines.warn).toHaveLength(REFUSALS_LOGGED_PER_MINUTE + 1);
    expect(sumCounted([...forgedLines.warn, ...forgedLines.counts])).toBe(N - REFUSALS_LOGGED_PER_MINUTE);
    expect(forgedLines.warn.at(-1)).toMatchObject({ delivery_id: `msg_forged_${N}` });
    expect(await counted(url, 'rejected:no_valid_signature')).toBe(N + 1);

    // The flood of the other kind stopped: its count is said on a line of its own, by the
    // receiver's timer or at the latest when it stops.
    await r.close();
    const logs = r.logs.lines;
    r = null;
    const bare = refusedLines(logs, isBare);
    expect(bare.counts).toEqual([expect.objectContaining({ level: WARN, outcome: 'rejected:missing_header', status: 400, refused_since_last_line: 8 - REFUSALS_LOGGED_PER_MINUTE })]);
    expect(sumCounted(bare.warn)).toBe(0);
  });

  it('requests that make no URL: a few lines a minute per message, every POST counted', async () => {
    const clock = new ManualClock(Date.now());
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret }, { clock });
    const { port } = new URL(r.url);
    const raw = (host: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(port), '127.0.0.1');
        let text = '';
        socket.on('data', (c: Buffer) => (text += c.toString()));
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
        socket.end(`POST /webhooks HTTP/1.1\r\nHost: ${host}\r\nContent-Length: 2\r\n\r\n{}`);
      });
    const N = 30;
    const answers = await Promise.all(Array.from({ length: N }, (_, i) => raw(`bad host ${i}`)));
    expect(answers.every((a) => a.startsWith('HTTP/1.1 400 '))).toBe(true);
    expect(await counted(r.url, 'rejected:bad_request')).toBe(N);
    const isBad = (l: Line) => String(l.msg).startsWith('request refused before routing') || String(l.refused).startsWith('request refused before routing');
    expect(refusedLines(r.logs.lines, isBad).warn).toHaveLength(REFUSALS_LOGGED_PER_MINUTE);
    expect(refusedLines(r.logs.lines, isBad).debug).toHaveLength(N - REFUSALS_LOGGED_PER_MINUTE);

    clock.advance(60_000);
    await r.close();
    const logs = r.logs.lines;
    r = null;
    const bad = refusedLines(logs, isBad);
    expect(bad.counts).toEqual([expect.objectContaining({ level: WARN, status: 400, refused_since_last_line: N - REFUSALS_LOGGED_PER_MINUTE })]);
    expect(String(bad.counts[0]?.refused)).toMatch(/^request refused before routing: the Host header/);
    // Nothing a request said is in the logs: not its Host.
    expect(JSON.stringify(logs)).not.toContain('bad host');
  });
  it('deliveries refused as the stop cuts their connections (SHUTDOWN_GRACE_MS): each on a warn line or in a count, none lost after the count lines of the stop', async () => {
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret, SHUTDOWN_GRACE_MS: '100' });
    const { port } = new URL(r.url);
    // Forged deliveries whose bodies never finish: 3 of their 100 bytes sent, then nothing.
    const sockets: Socket[] = [];
    const N = REFUSALS_LOGGED_PER_MINUTE + 3;
    for (let i = 0; i < N; i++) {
      const d = signDelivery(newSecret(), '{}', { msgId: `msg_cut_${i}` });
      const head = Object.entries(d.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('');
      const socket = connect(Number(port), '127.0.0.1');
      socket.on('error', () => {});
      socket.write(`POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n${head}Content-Length: 100\r\n\r\n{"x`);
      sockets.push(socket);
    }
    // Every one's handler is reading its body (their bytes are held) before the stop.
    const inFlight = async () => Number(/^receiver_ingest_body_bytes_in_flight (\d+)/m.exec(await (await fetch(`${r!.url}/metrics`)).text())?.[1] ?? 0);
    for (let i = 0; i < 200 && (await inFlight()) < 3 * N; i++) await new Promise((res) => setTimeout(res, 10));
    expect(await inFlight()).toBe(3 * N);

    // The grace passes, the connections are cut, and their handlers answer body_unreadable.
    await r.close();
    const logs = r.logs.lines;
    r = null;
    for (const s of sockets) s.destroy();
    const isCut = (l: Line) => l.outcome === 'rejected:body_unreadable';
    // Their handlers end as their connections close (within the stop, so far): waited for, bounded.
    for (let i = 0; i < 100 && logs.filter((l) => isCut(l) && l.msg === 'webhook delivery').length < N; i++) await new Promise((res) => setTimeout(res, 10));
    const cut = refusedLines(logs, isCut);
    expect(cut.warn.length + cut.debug.length).toBe(N);
    // Every one said: on its own warn line, or in the count of one.
    expect(cut.warn.length + sumCounted([...cut.warn, ...cut.counts])).toBe(N);
  });
  it("the counts' timer: one from the first listen (serve with METRICS_PORT, work on WORK_METRICS_PORT), cleared by the stop and by a start that fails", async () => {
    // Every interval the receiver sets, and those it clears (its timers are unref'd: no handle shows them).
    const set: NodeJS.Timeout[] = [];
    const cleared = new Set<unknown>();
    const realSet = globalThis.setInterval;
    const realClear = globalThis.clearInterval;
    vi.spyOn(globalThis, 'setInterval').mockImplementation(((fn: () => void, ms?: number) => {
      const t = realSet(fn, ms);
      set.push(t);
      return t;
    }) as typeof setInterval);
    vi.spyOn(globalThis, 'clearInterval').mockImplementation(((t?: NodeJS.Timeout) => {
      cleared.add(t);
      realClear(t);
    }) as typeof clearInterval);
    const running = () => set.filter((t) => !cleared.has(t));
    try {
      // serve, its /metrics on a port of its own: two listens, one timer, none once stopped.
      r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret, METRICS_PORT: '0' });
      expect(running()).toHaveLength(2); // the database file's watch, and the counts'
      await r.close();
      r = null;
      expect(running()).toEqual([]);

      // work: WORK_METRICS_PORT only, then the workers.
      set.length = 0;
      r = await startReceiver({ WORKER_CONCURRENCY: '1', WEBHOOK_SECRET: secret }, { listen: false });
      await r.app.startWorkMetrics(0);
      await r.app.startWorkers();
      expect(running().length).toBeGreaterThan(0);
      await r.close();
      r = null;
      expect(running()).toEqual([]);

      // METRICS_PORT taken: the start fails after the webhook port listened, and leaves no timer.
      const taken = createHttpServer();
      await new Promise<void>((res) => taken.listen(0, '127.0.0.1', res));
      try {
        set.length = 0;
        const failing = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret, METRICS_PORT: String((taken.address() as AddressInfo).port) }, { listen: false });
        await expect(failing.app.start()).rejects.toThrow(/METRICS_PORT/);
        expect(set.length).toBeGreaterThan(0);
        expect(running()).toEqual([]);
        await failing.close();
      } finally {
        await new Promise((res) => taken.close(res));
      }
    } finally {
      vi.restoreAllMocks();
    }
  });
});
