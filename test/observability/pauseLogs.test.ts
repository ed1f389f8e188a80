import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startConsumer, startHarness, type Consumer, type Harness } from '../sinks/helpers.js';

let h: Harness | undefined;
let consumer: Consumer | undefined;
let r: TestReceiver | undefined;
let api: Server | undefined;
afterEach(async () => {
  await h?.close();
  await consumer?.close();
  await r?.close();
  api?.close();
  h = consumer = r = api = undefined;
});

// The attempts in flight beside the one that changed the state see the same answer: one error
// line says what happened, not one per attempt (up to the worker's concurrency).
describe('a sink disabled or a source paused by several attempts at once', () => {
  it('SINK DISABLED is logged at error once, the other attempts that saw the 410 at debug', async () => {
    const secret = newSecret();
    consumer = await startConsumer({ '/a': secret });
    consumer.reply(() => ({ status: 410 }));
    h = await startHarness({ sinks: [{ name: 'a', type: 'http', url: `${consumer.url}/a`, secret, concurrency: 4 }] });
    for (let i = 0; i < 4; i++) await h.post(envelope());
    await h.settle();
    const disabled = (level: number) => h!.r.logs.lines.filter((l) => String(l.msg).startsWith('SINK DISABLED') && l.level === level);
    expect(consumer.on('/a').length).toBeGreaterThan(1);
    expect(disabled(50)).toHaveLength(1);
    expect(disabled(20)).toHaveLength(consumer.on('/a').length - 1);
  });

  it('a refused API key is logged at error once, the other reads in flight refused beside it at debug', async () => {
    api = createServer((req, res) => {
      req.resume();
      res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"authentication_failed"}');
    });
    await new Promise<void>((ok) => api!.listen(0, '127.0.0.1', () => ok()));
    const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
    const secret = newSecret();
    let refused = 0;
    api.on('request', () => refused++);
    r = await startReceiver({ WEBHOOK_SECRET: secret, HIRING_API_URL: `http://127.0.0.1:${(api.address() as AddressInfo).port}`, WORKER_CONCURRENCY: '4' }, { clock });
    await r.app.worker.stop();
    for (let i = 0; i < 4; i++) {
      const body = JSON.stringify(envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() }));
      expect((await postSigned(r.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
    }
    await r.app.worker.runUntilIdle();
    const paused = (level: number) => r!.logs.lines.filter((l) => String(l.msg).startsWith('API key refused') && l.level === level);
    expect(refused).toBe(4);
    expect(paused(50)).toHaveLength(1);
    expect(paused(20)).toHaveLength(3);
  });
});
