import BetterSqlite3 from 'better-sqlite3';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope, newSecret, signDelivery } from '../helpers/signing.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';

// MAX_BODY_BYTES_IN_FLIGHT: bodies must be read before their signature can be checked, so the
// bytes held for them over all connections are bounded; past the bound, 503 receiver_busy.
const KIB = 1024;
const secret = newSecret();
let r: TestReceiver;
beforeAll(async () => {
  r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret, MAX_BODY_BYTES: String(64 * KIB), MAX_BODY_BYTES_IN_FLIGHT: String(128 * KIB), WRITE_TIMEOUT_MS: '20000' });
});
afterAll(() => r.close());

const post = (d: { body: string; headers: Record<string, string> }) => fetch(`${r.url}/webhooks`, { method: 'POST', headers: d.headers, body: d.body });
const stored = (id: string) => r.app.database.ingestSqlite.prepare('SELECT COUNT(*) FROM events WHERE id = ?').pluck().get(id);
const metric = async (line: RegExp) => {
  const m = line.exec(await (await fetch(`${r.url}/metrics`)).text());
  return m ? Number(m[1]) : NaN;
};
const inFlight = () => metric(/^receiver_ingest_body_bytes_in_flight (\d+)$/m);
/** Polls the gauge until it reads `bytes` (at most 5 s: 250 polls of 20 ms). */
const untilInFlight = async (bytes: number) => {
  let seen = NaN;
  for (let i = 0; i < 250; i++) {
    seen = await inFlight();
    if (seen === bytes) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`bytes in flight stayed ${seen}, expected ${bytes}`);
};
/** An event of about `bytes` bytes, signed. */
const sized = (bytes: number) => {
  const env = envelope();
  const text = JSON.stringify({ ...env, padding: 'x'.repeat(bytes) });
  return { id: env.id as string, d: signDelivery(secret, text) };
};
/** A delivery's headers: Content-Length `declared`, a well-formed signature that no key made. */
const stallHead = (declared: number) =>
  `POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${declared}\r\n` +
  `webhook-id: msg_stall\r\nwebhook-timestamp: ${Math.floor(Date.now() / 1000)}\r\nwebhook-signature: v1,AAAA\r\n\r\n`;
/**
 * A client that sends those headers and `sent` bytes of the body, then stalls: what anyone can do
 * without the secret. `before`: requests written first on the same connection.
 */
const stall = (declared: number, sent: number, before = '') =>
  new Promise<Socket>((resolve, reject) => {
    const s = connect(Number(new URL(r.url).port), '127.0.0.1', () => {
      s.write(before + stallHead(declared));
      s.write(Buffer.alloc(sent, 'a'), () => resolve(s));
    });
    s.on('error', reject);
  });
/** A signed delivery as raw HTTP/1.1, kept alive. */
const rawDelivery = (d: { body: string; headers: Record<string, string> }) =>
  `POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\n${Object.entries(d.headers).map(([k, v]) => `${k}: ${v}\r\n`).join('')}Content-Length: ${Buffer.byteLength(d.body)}\r\n\r\n${d.body}`;

describe('MAX_BODY_BYTES_IN_FLIGHT', () => {
  it('refuses a body that does not fit beside stalled ones with 503 receiver_busy, still takes one that fits, and takes it again once they are gone', async () => {
    const stalled = [await stall(64 * KIB, 60 * KIB), await stall(64 * KIB, 60 * KIB)];
    await untilInFlight(120 * KIB);

    // 20 KiB more would pass 128 KiB: refused, not stored, and the connection is not kept.
    const big = sized(20 * KIB);
    const refused = await post(big.d);
    expect(refused.status).toBe(503);
    expect(refused.headers.get('retry-after')).toBe('5');
    expect(refused.headers.get('connection')).toBe('close');
    const answer = (await refused.json()) as { error: string; message: string };
    expect(answer.error).toBe('receiver_busy');
    expect(answer.message).toContain('MAX_BODY_BYTES_IN_FLIGHT');
    expect(answer.message).toContain(String(128 * KIB));
    expect(stored(big.id)).toBe(0);
    // Counted and logged as a refusal (warn), not as a storage failure (error).
    expect(await metric(/^receiver_deliveries_received_total\{outcome="rejected:receiver_busy",source="unknown"\} (\d+)$/m)).toBe(1);
    const line = r.logs.lines.find((l) => l.delivery_id === big.d.headers['webhook-id']);
    expect(line).toMatchObject({ level: 40, outcome: 'rejected:receiver_busy', status: 503 });

    // A small delivery still fits beside the stalled bodies.
    const small = sized(2 * KIB);
    expect((await post(small.d)).status).toBe(200);
    expect(stored(small.id)).toBe(1);

    // The stalled clients go (their bodies never completed): their bytes are given back.
    for (const s of stalled) s.destroy();
    await untilInFlight(0);
    const again = await post(big.d);
    expect(again.status).toBe(200);
    expect(await again.json()).toEqual({ outcome: 'accepted', id: big.id });
    expect(stored(big.id)).toBe(1);
  });

  it('gives back what each answered delivery held, whatever its answer', async () => {
    const answers: number[] = [];
    for (let i = 0; i < 20; i++) {
      const { d } = sized(40 * KIB);
      // Accepted, then the same delivery with a signature no key made (read, then refused), then one over MAX_BODY_BYTES.
      answers.push((await post(d)).status);
      answers.push((await post({ ...d, headers: { ...d.headers, 'webhook-signature': 'v1,AAAA' } })).status);
    }
    answers.push((await post(sized(70 * KIB).d)).status);
    expect(new Set(answers)).toEqual(new Set([200, 401, 413]));
    // 40 answers of 40 KiB each, one after the other, in a budget of 128 KiB: none refused, nothing left held.
    await untilInFlight(0);
  });

  it('gives back what a pipelined request held when its connection closes before the answer ahead of it is sent', async () => {
    // The first delivery waits for the write lock (held here, within WRITE_TIMEOUT_MS); the second, written behind it on the same
    // connection, is read while the first is unanswered, so its answer is queued behind the first.
    // Node never closes a queued answer when the connection goes: given back at its 'close'
    // only, the second's bytes stayed taken for ever (30 KiB of 128 here, at every such close).
    const other = new BetterSqlite3(r.dbPath);
    try {
      other.exec('BEGIN IMMEDIATE');
      const first = sized(1 * KIB);
      const s = await stall(40 * KIB, 30 * KIB, rawDelivery(first.d));
      await untilInFlight(30 * KIB + Buffer.byteLength(first.d.body));
      s.destroy();
      other.exec('ROLLBACK');
      await untilInFlight(0);
    } finally {
      other.close();
    }
    // The whole budget is there again: two bodies of 60 KiB at once.
    const held = [await stall(64 * KIB, 60 * KIB), await stall(64 * KIB, 60 * KIB)];
    await untilInFlight(120 * KIB);
    for (const s of held) s.destroy();
    await untilInFlight(0);
  });
});
