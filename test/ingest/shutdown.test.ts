import { Agent, request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { startReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, signDelivery } from '../helpers/signing.js';

describe('stop() and keep-alive connections', () => {
  it('a keep-alive connection whose request ends during the grace is closed once idle: stop() does not wait out SHUTDOWN_GRACE_MS, and warns of nothing', async () => {
    const secret = newSecret();
    const r = await startReceiver({ WEBHOOK_SECRET: secret, SHUTDOWN_GRACE_MS: '5000', WORKER_CONCURRENCY: '0' });
    const agent = new Agent({ keepAlive: true, maxSockets: 1 });
    try {
      const d = signDelivery(secret, JSON.stringify(envelope()));
      const u = new URL(r.url);
      const answered = new Promise<number>((resolve, reject) => {
        const req = request(
          { host: u.hostname, port: u.port, path: '/webhooks', method: 'POST', agent, headers: { ...d.headers, 'content-length': Buffer.byteLength(d.body) } },
          (res) => {
            res.resume();
            res.on('end', () => resolve(res.statusCode!));
          },
        );
        req.on('error', reject);
        req.write(d.body.slice(0, 10));
        setTimeout(() => req.end(d.body.slice(10)), 200); // the rest 200 ms into the shutdown
      });
      await new Promise((res) => setTimeout(res, 50));
      const started = Date.now();
      const stopped = r.app.stop();
      expect(await answered).toBe(200);
      await stopped;
      expect(Date.now() - started).toBeLessThan(2500);
      expect(r.logs.lines.some((l) => /closing connections with a request still in progress/.test(String(l.msg)))).toBe(false);
    } finally {
      agent.destroy();
      await r.close();
    }
  });
});
