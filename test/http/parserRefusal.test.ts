import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope, newSecret, signDelivery } from '../helpers/signing.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';

// Requests Node's HTTP parser refuses before any handler runs (a body framed by both
// Content-Length and Transfer-Encoding, headers past Node's 16 KB): Node answers them itself.
// A sender (or a proxy in front) that frames every delivery so had each one refused, and
// neither /metrics nor the log said anything: the "deliveries refused" alert could not fire.

const secret = newSecret();
let r: TestReceiver;
beforeAll(async () => {
  r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret });
});
afterAll(() => r.close());

/** Writes `head` and `body` on a fresh connection; resolves with everything the receiver answered (bounded: 5 s). */
const raw = (text: string) =>
  new Promise<string>((resolve, reject) => {
    const socket = connect(Number(new URL(r.url).port), '127.0.0.1');
    let answer = '';
    const timer = setTimeout(() => socket.destroy(new Error(`no end of the answer within 5 s: ${answer}`)), 5_000);
    socket.on('data', (c: Buffer) => (answer += c.toString('latin1')));
    socket.on('close', () => {
      clearTimeout(timer);
      resolve(answer);
    });
    socket.on('error', (err) => {
      clearTimeout(timer);
      // The receiver may reset the connection after answering: what it answered counts.
      if (answer) resolve(answer);
      else reject(err);
    });
    socket.end(text);
  });

const refusedCount = async () => {
  const text = await (await fetch(`${r.url}/metrics`)).text();
  return Number(/^receiver_deliveries_received_total\{outcome="rejected:bad_request",source="unknown"\} (\d+)$/m.exec(text)?.[1]);
};

function signedHead(extra: (body: string) => string[]): { head: string; body: string; signature: string } {
  const d = signDelivery(secret, JSON.stringify(envelope()));
  const lines = ['POST /webhooks HTTP/1.1', 'Host: 127.0.0.1', ...Object.entries(d.headers).map(([k, v]) => `${k}: ${v}`), ...extra(d.body)];
  return { head: `${lines.join('\r\n')}\r\n\r\n`, body: d.body, signature: d.headers['webhook-signature']! };
}

describe("requests Node's HTTP parser refuses", () => {
  it('a delivery framed by both Content-Length and Transfer-Encoding: answered 400, counted as a refused delivery, logged without its headers', async () => {
    const before = await refusedCount();
    const logged = r.logs.lines.length;
    const { head, body, signature } = signedHead((b) => [`Content-Length: ${Buffer.byteLength(b)}`, 'Transfer-Encoding: chunked']);
    const chunked = `${Buffer.byteLength(body).toString(16)}\r\n${body}\r\n0\r\n\r\n`;
    const answer = await raw(head + chunked);
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(await refusedCount()).toBe(before + 1);
    const lines = r.logs.lines.slice(logged).filter((l) => String(l.msg).startsWith('request refused before routing'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, status: 400, method: 'POST', msg: expect.stringMatching(/^request refused before routing: the request's body framing is refused: Content-Length with Transfer-Encoding/) });
    expect(JSON.stringify(lines[0])).not.toContain(signature);
  });

  it('headers past the limit: answered 431, counted and logged alike', async () => {
    const before = await refusedCount();
    const logged = r.logs.lines.length;
    const { head } = signedHead(() => [`X-Padding: ${'p'.repeat(20_000)}`, 'Content-Length: 2']);
    const answer = await raw(`${head}{}`);
    expect(answer).toMatch(/^HTTP\/1\.1 431 /);
    expect(await refusedCount()).toBe(before + 1);
    const lines = r.logs.lines.slice(logged).filter((l) => String(l.msg).startsWith('request refused before routing'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 40, status: 431, method: 'POST', msg: 'request refused before routing: the request headers are larger than Node accepts (16 KB in all)' });
    expect(JSON.stringify(lines[0])).not.toContain('ppppp');
  });

  it('a delivery whose body the parser refuses after its handler got it (a chunk size that is no number) is counted and logged once, by its handler, not also as refused before routing', async () => {
    const count = async (outcome: string) => {
      const text = await (await fetch(`${r.url}/metrics`)).text();
      return Number(new RegExp(`^receiver_deliveries_received_total\\{outcome="${outcome}",source="unknown"\\} (\\d+)$`, 'm').exec(text)?.[1]);
    };
    const before = { badRequest: await count('rejected:bad_request'), unreadable: await count('rejected:body_unreadable') };
    const logged = r.logs.lines.length;
    const { head, body, signature } = signedHead(() => ['Transfer-Encoding: chunked']);
    // One write: the parser meets the bad chunk size in the same packet as the head, whose method it reads.
    const answer = await raw(`${head}ZZ\r\n${body}\r\n0\r\n\r\n`);
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    // The handler's refusal is told once the body read fails: wait for it (bounded).
    for (let i = 0; i < 100 && (await count('rejected:body_unreadable')) === before.unreadable; i++) await new Promise((res) => setTimeout(res, 20));
    expect({ badRequest: await count('rejected:bad_request'), unreadable: await count('rejected:body_unreadable') }).toEqual({ badRequest: before.badRequest, unreadable: before.unreadable + 1 });
    const lines = r.logs.lines.slice(logged);
    expect(lines.filter((l) => String(l.msg).startsWith('request refused before routing'))).toEqual([]);
    expect(lines.filter((l) => l.msg === 'webhook delivery').map((l) => l.outcome)).toEqual(['rejected:body_unreadable']);
    expect(JSON.stringify(lines)).not.toContain(signature);
  });

  it('a GET the parser refuses is logged, not counted as a delivery; a connection reset by the client is neither; a first word that is no method is not logged as one', async () => {
    const before = await refusedCount();
    const logged = r.logs.lines.length;
    expect(await raw('GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nBad Header\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    // Half a request, then gone.
    await new Promise<void>((resolve) => {
      const socket = connect(Number(new URL(r.url).port), '127.0.0.1', () => {
        socket.write('POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n');
        socket.resetAndDestroy();
        resolve();
      });
    });
    // The receiver still answers, and counted nothing.
    expect((await fetch(`${r.url}/healthz`)).status).toBe(200);
    expect(await refusedCount()).toBe(before);
    const lines = r.logs.lines.slice(logged).filter((l) => String(l.msg).startsWith('request refused before routing'));
    expect(lines.map((l) => l.status)).toEqual([400]);
    // A first word that is no method Node knows is the request's own text: not logged as its method.
    const unknownMethod = r.logs.lines.length;
    expect(await raw('SKSECRETTOKEN /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n')).toMatch(/^HTTP\/1\.1 400 /);
    const said = r.logs.lines.slice(unknownMethod).filter((l) => String(l.msg).startsWith('request refused before routing'));
    expect(said.map((l) => [l.status, l.method])).toEqual([[400, undefined]]);
    expect(JSON.stringify(said)).not.toContain('SKSECRETTOKEN');
    // And a good delivery after all this is stored.
    const d = signDelivery(secret, JSON.stringify(envelope()));
    expect((await fetch(`${r.url}/webhooks`, { method: 'POST', headers: d.headers, body: d.body })).status).toBe(200);
  });
});

describe('a request cut by REQUEST_TIMEOUT_MS', () => {
  it('is answered 408 and is no parser refusal: not logged as refused before routing', async () => {
    // Node's own request timer, checked every REQUEST_TIMEOUT_MS at most (listen.ts): real time, about 1-2 s.
    const slow = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret, REQUEST_TIMEOUT_MS: '1000' });
    try {
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(new URL(slow.url).port), '127.0.0.1');
        let text = '';
        const timer = setTimeout(() => socket.destroy(new Error(`no answer within 8 s: ${text}`)), 8_000);
        socket.on('data', (c: Buffer) => (text += c.toString('latin1')));
        socket.on('close', () => {
          clearTimeout(timer);
          resolve(text);
        });
        socket.on('error', (err) => (text ? undefined : reject(err)));
        // Headers begun, never ended.
        socket.write('POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n');
      });
      expect(answer).toMatch(/^HTTP\/1\.1 408 /);
      expect(slow.logs.lines.filter((l) => String(l.msg).startsWith('request refused before routing'))).toEqual([]);
    } finally {
      await slow.close();
    }
  }, 15_000);
});
