import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ManualClock } from '../../src/util/clock.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';

let r: TestReceiver | undefined;
let api: Server | undefined;
afterEach(async () => {
  await r?.close();
  api?.close();
});

describe('a slow hiring API', () => {
  it('shows in receiver_hiring_api_call_duration_seconds, by resource', async () => {
    const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
    // The service takes 4 s to answer (on the receiver's clock).
    api = createServer((_req, res) => {
      clock.advance(4_000);
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'completed', overall_score: 3, is_eligible: true, ineligibility_reasons: [] }));
    });
    await new Promise<void>((ok) => api!.listen(0, '127.0.0.1', () => ok()));
    const secret = newSecret();
    r = await startReceiver({ WEBHOOK_SECRET: secret, HIRING_API_URL: `http://127.0.0.1:${(api.address() as AddressInfo).port}` }, { clock });
    await r.app.worker.stop();
    const body = JSON.stringify(envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() }));
    expect((await postSigned(r.url, secret, body, { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
    await r.app.worker.runUntilIdle();

    const text = await (await fetch(`${r.url}/metrics`)).text();
    expect(text).toMatch(/^receiver_hiring_api_calls_total\{source="default",resource="interview",outcome="ready"\} 1$/m);
    expect(text).toMatch(/^receiver_hiring_api_call_duration_seconds_bucket\{le="2.5",resource="interview"\} 0$/m);
    expect(text).toMatch(/^receiver_hiring_api_call_duration_seconds_bucket\{le="5",resource="interview"\} 1$/m);
    expect(text).toMatch(/^receiver_hiring_api_call_duration_seconds_sum\{resource="interview"\} 4$/m);
  });
});
