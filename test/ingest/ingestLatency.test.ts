import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';

// receiver_ingest_duration_seconds feeds the "ingest latency" alert (p99 over 1 s: a slow disk).
// A request refused for its signature may come from anyone, as slowly as it likes: it must not
// move that histogram.

const secret = newSecret();
let r: TestReceiver | undefined;
afterEach(async () => {
  await r?.close();
  r = undefined;
});

const count = async (url: string) => Number(/^receiver_ingest_duration_seconds_count (\S+)$/m.exec(await (await fetch(`${url}/metrics`)).text())?.[1]);

/** Well-formed webhook-* headers and a wrong signature, the body sent in two parts `gapMs` apart. */
function forged(url: string, gapMs: number): Promise<number> {
  const body = JSON.stringify(envelope());
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: u.hostname,
        port: u.port,
        path: '/webhooks',
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          'webhook-id': 'msg_forged',
          'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
          'webhook-signature': `v1,${Buffer.alloc(32, 1).toString('base64')}`,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode!));
      },
    );
    req.on('error', reject);
    req.write(body.slice(0, 10));
    setTimeout(() => req.end(body.slice(10)), gapMs);
  });
}

describe('receiver_ingest_duration_seconds', () => {
  it('times the deliveries whose signature verified, not the refused ones', async () => {
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret });
    expect(await forged(r.url, 50)).toBe(401);
    expect((await fetch(`${r.url}/webhooks`, { method: 'POST', body: '{}' })).status).toBe(400);
    expect(await count(r.url)).toBe(0);
    expect((await postSigned(r.url, secret, JSON.stringify(envelope()))).status).toBe(200);
    expect(await count(r.url)).toBe(1);
  });
});
