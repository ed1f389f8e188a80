import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { startServer, type TestServer } from '../hiring/testServer.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned, signDelivery } from '../helpers/signing.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A remote on 127.0.0.1 answering its first request `first` (status and headers), every later one 503 without Retry-After (a failure that holds nothing). */
async function remote(first: { status: number; headers: Record<string, string> }): Promise<TestServer> {
  const s = await startServer((req, res) => {
    req.resume();
    const { status, headers } = s.requests.length === 1 ? first : { status: 503, headers: {} };
    res.writeHead(status, { 'content-type': 'application/json', ...headers });
    res.end('{"error":"slow down"}');
  });
  cleanups.push(() => s.close());
  return s;
}

async function receiver(env: Record<string, string>, clock: ManualClock, listen = true): Promise<TestReceiver> {
  const r = await startReceiver(env, { clock, listen });
  cleanups.push(() => r.close());
  return r;
}

/** The value of one series in a Prometheus text page (undefined when absent). */
function series(text: string, name: string, labels: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}} `));
  return line === undefined ? undefined : Number(line.slice(line.lastIndexOf(' ') + 1));
}

const left = (text: string, source: string, reason: string) => series(text, 'receiver_source_hold_remaining_seconds', `source="${source}",reason="${reason}"`);

describe('a source held by the workers shows in /metrics and /readyz', () => {
  it("a 429's Retry-After from the hiring API and from a sink's consumer: seconds left by source and reason, counted down on the receiver's clock, 0 when it has passed; /readyz lists them and stays ready", async () => {
    const clock = new ManualClock(Date.parse('2026-11-02T09:00:00Z'));
    const api = await remote({ status: 429, headers: { 'Retry-After': '120' } });
    const consumer = await remote({ status: 429, headers: { 'Retry-After': '300' } });
    const { dir, cleanup } = tempDir('held-sources-');
    cleanups.push(cleanup);
    const config = join(dir, 'config.json');
    writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: `${consumer.url}/hook`, secret: newSecret() }] }));
    const secret = newSecret();
    const r = await receiver({ WEBHOOK_SECRET: secret, CONFIG_FILE: config, HIRING_API_URL: api.url, WORKER_CONCURRENCY: '1' }, clock);
    // The workers run in this process; the test takes their turns itself (runUntilIdle), on its clock.
    await r.app.worker.stop();
    await r.app.fanOut.halt();
    const scrape = async () => (await fetch(`${r.url}/metrics`)).text();
    const ready = async () => {
      const res = await fetch(`${r.url}/readyz`);
      return { status: res.status, body: (await res.json()) as Record<string, unknown> };
    };

    // Nothing held: every configured source and sink, each reason, at 0.
    let text = await scrape();
    for (const [source, reason] of [['default', 'retry_after'], ['default', 'outage'], ['sink:crm', 'retry_after']] as const) expect(left(text, source, reason)).toBe(0);
    expect((await ready()).body).toMatchObject({ status: 'ready', held_sources: [] });

    // A read of the API (interview.completed) and a message to the sink (application.created).
    for (const type of ['interview.completed', 'application.created']) {
      const body = JSON.stringify(envelope({ event_type: type, created_at: new Date(clock.now()).toISOString() }));
      expect((await postSigned(r.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
    }
    await r.app.worker.runUntilIdle();
    await r.app.fanOut.runUntilIdle();
    expect([api.requests.length, consumer.requests.length]).toEqual([1, 1]);
    const told = clock.now();

    text = await scrape();
    expect(left(text, 'default', 'retry_after')).toBe(120);
    expect(left(text, 'sink:crm', 'retry_after')).toBe(300);
    expect(left(text, 'default', 'outage')).toBe(0);
    // The outage breaker never holds a sink: no series that would read 0 for ever.
    expect(left(text, 'sink:crm', 'outage')).toBeUndefined();
    // Held, not unready: deliveries are still accepted.
    expect(await ready()).toEqual({
      status: 200,
      body: expect.objectContaining({
        status: 'ready',
        held_sources: [
          { source: 'default', reason: 'retry_after', until: new Date(told + 120_000).toISOString() },
          { source: 'sink:crm', reason: 'retry_after', until: new Date(told + 300_000).toISOString() },
        ],
      }),
    });

    clock.advance(50_000);
    text = await scrape();
    expect(left(text, 'default', 'retry_after')).toBe(70);
    expect(left(text, 'sink:crm', 'retry_after')).toBe(250);

    // The API's wait has passed: its read goes again (answered 503, which holds nothing).
    clock.advance(101_000);
    await r.app.worker.runUntilIdle();
    expect(api.requests.length).toBe(2);
    text = await scrape();
    expect(left(text, 'default', 'retry_after')).toBe(0);
    expect(left(text, 'sink:crm', 'retry_after')).toBe(149);
    expect((await ready()).body.held_sources).toEqual([{ source: 'sink:crm', reason: 'retry_after', until: new Date(told + 300_000).toISOString() }]);
  });

  it("the outage breaker's hold, on a `work` process's WORK_METRICS_PORT (the workers' memory is there, not in `serve`)", async () => {
    const clock = new ManualClock(Date.parse('2026-11-02T09:00:00Z'));
    const api = await remote({ status: 503, headers: {} });
    const secret = newSecret();
    // As `work` runs it: no webhook port, its own metrics port, then the workers.
    const r = await receiver({ WEBHOOK_SECRET: secret, HIRING_API_URL: api.url, WORKER_CONCURRENCY: '4' }, clock, false);
    const metricsUrl = await r.app.startWorkMetrics(0);
    await r.app.startWorkers();
    await r.app.worker.stop();
    const scrape = async () => (await fetch(metricsUrl)).text();
    expect(left(await scrape(), 'default', 'outage')).toBe(0);

    // 8 reads answered 503 in a row (OUTAGE_HOLD_AFTER): the breaker holds the source 15 s.
    for (let i = 0; i < 8; i++) {
      const body = JSON.stringify(envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() }));
      const { headers } = signDelivery(secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) });
      expect((await r.app.app.request('/webhooks', { method: 'POST', headers, body })).status).toBe(200);
    }
    await r.app.worker.runUntilIdle();
    expect(api.requests.length).toBe(8);
    let text = await scrape();
    expect(left(text, 'default', 'outage')).toBe(15);
    expect(left(text, 'default', 'retry_after')).toBe(0);
    // Only the series the `work` process updates: not serve's database gauges.
    expect(text).not.toContain('receiver_source_paused');

    clock.advance(15_000);
    text = await scrape();
    expect(left(text, 'default', 'outage')).toBe(0);
  });

  it("a sink's consumer failing over and over without Retry-After: the outage breaker (the hiring API's reads only) never holds the sink, and it has no `outage` series", async () => {
    const clock = new ManualClock(Date.parse('2026-11-02T09:00:00Z'));
    const consumer = await remote({ status: 503, headers: {} });
    const { dir, cleanup } = tempDir('held-sinks-');
    cleanups.push(cleanup);
    const config = join(dir, 'config.json');
    writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'http', url: `${consumer.url}/hook`, secret: newSecret() }] }));
    const secret = newSecret();
    const r = await receiver({ WEBHOOK_SECRET: secret, CONFIG_FILE: config, HIRING_API_URL: 'http://127.0.0.1:9', WORKER_CONCURRENCY: '1' }, clock);
    await r.app.worker.stop();
    await r.app.fanOut.halt();
    // Twice OUTAGE_HOLD_AFTER messages to the sink, every one answered 503: each fails in a row.
    for (let i = 0; i < 16; i++) {
      const body = JSON.stringify(envelope({ event_type: 'application.created', created_at: new Date(clock.now()).toISOString() }));
      expect((await postSigned(r.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
    }
    await r.app.worker.runUntilIdle();
    await r.app.fanOut.runUntilIdle();
    expect(consumer.requests.length).toBe(16);
    const text = await (await fetch(`${r.url}/metrics`)).text();
    expect(left(text, 'sink:crm', 'retry_after')).toBe(0);
    expect(left(text, 'sink:crm', 'outage')).toBeUndefined();
    expect(((await (await fetch(`${r.url}/readyz`)).json()) as { held_sources: unknown }).held_sources).toEqual([]);
  });

  it('a `serve` with WORKER_CONCURRENCY=0 reports no series and no held_sources in /readyz: the holds are in the memory of the `work` process beside it, which it cannot know', async () => {
    const r = await receiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '0' }, new ManualClock(Date.parse('2026-11-02T09:00:00Z')));
    const text = await (await fetch(`${r.url}/metrics`)).text();
    expect(text).toContain('# TYPE receiver_source_hold_remaining_seconds gauge');
    expect(text).not.toContain('receiver_source_hold_remaining_seconds{');
    // Not an empty list, which would say "nothing held" while the `work` process holds a source.
    const body = (await (await fetch(`${r.url}/readyz`)).json()) as Record<string, unknown>;
    expect(body).toMatchObject({ status: 'ready', paused_sources: [], disabled_sinks: [] });
    expect(body).not.toHaveProperty('held_sources');
  });
});
