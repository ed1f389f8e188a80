import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerifier } from '../../src/ingest/verifySignature.js';
import { ManualClock } from '../../src/util/clock.js';
import { parseSecret } from '../../src/config/parseSecret.js';
import { envelope, newSecret, postSigned, signDelivery } from '../helpers/signing.js';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';

// The Standard Webhooks reference vector.
const REF = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  id: 'msg_p5jXN8AQM9LWM0D4loKWxJek',
  timestamp: 1614265330,
  body: '{"test": 2432232314}',
  signature: 'v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=',
};

const refHeaders = (over: Record<string, string> = {}) => ({
  'webhook-id': REF.id,
  'webhook-timestamp': String(REF.timestamp),
  'webhook-signature': REF.signature,
  ...over,
});

describe('Standard Webhooks reference vector through POST /webhooks', () => {
  const clock = new ManualClock(REF.timestamp * 1000);
  let r: TestReceiver;
  beforeAll(async () => {
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: REF.secret }, { clock, listen: false });
  });
  afterAll(() => r.close());

  const post = (headers: Record<string, string>, body = REF.body) =>
    r.app.app.request('/webhooks', { method: 'POST', headers, body });

  it.each([
    ['at the signing time', 0, 200],
    ['299 s later', 299, 200],
    ['299 s earlier', -299, 200],
    // The boundary itself: "more than 5 minutes" away is refused, exactly 5 minutes is not.
    ['300 s later', 300, 200],
    ['300 s earlier', -300, 200],
    ['301 s later', 301, 401],
    ['301 s earlier', -301, 401],
    // The receiver's clock has milliseconds: 300.001 s away is more than 5 minutes, either way.
    ['300.001 s later', 300.001, 401],
    ['300.5 s later', 300.5, 401],
    ['300.5 s earlier', -300.5, 401],
    ['299.999 s later', 299.999, 200],
    ['299.5 s earlier', -299.5, 200],
  ])('%s → %i', async (_label, offset, status) => {
    clock.set(Math.round((REF.timestamp + offset) * 1000));
    const res = await post(refHeaders());
    expect(res.status).toBe(status);
    if (status === 401) expect(await res.json()).toMatchObject({ error: 'timestamp_out_of_tolerance' });
    // The vector's body has no envelope id: a verified delivery is quarantined, never dropped.
    else expect(await res.json()).toMatchObject({ outcome: 'quarantined' });
  });

  it('logs how far the receiver\'s clock is from the refused timestamp, either way (a wrong clock is told from replayed deliveries)', async () => {
    // Fractions too: refused at 300.5 s ahead, a whole-second cut logged 300, inside the tolerance it broke.
    for (const offset of [400, -3600, 300.5, -300.5, 300.001]) {
      clock.set(Math.round((REF.timestamp + offset) * 1000));
      expect((await post(refHeaders())).status).toBe(401);
      expect(r.logs.lines.at(-1)).toMatchObject({ msg: 'webhook delivery', outcome: 'rejected:timestamp_out_of_tolerance', receiver_clock_ahead_seconds: offset });
    }
  });
});

describe('malformed signatures and headers are refused and never stored', () => {
  const clock = new ManualClock(REF.timestamp * 1000);
  let r: TestReceiver;
  beforeAll(async () => {
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: REF.secret }, { clock, listen: false });
  });
  afterAll(() => r.close());

  const count = () => {
    const db = r.app.database.ingestSqlite;
    return (['events', 'quarantine', 'jobs'] as const).map((t) => db.prepare(`SELECT COUNT(*) FROM ${t}`).pluck().get());
  };

  it.each([
    ['empty v1,', { 'webhook-signature': 'v1,' }, 401],
    ['truncated signature', { 'webhook-signature': REF.signature.slice(0, -6) }, 401],
    ['non-base64 signature', { 'webhook-signature': 'v1,!!!!not*base64!!!!~~~~~~~~~~~~~~~~~~~~~~=' }, 401],
    ['a v2 entry alone', { 'webhook-signature': REF.signature.replace('v1,', 'v2,') }, 401],
    ['no version prefix', { 'webhook-signature': REF.signature.slice(3) }, 400],
    ['missing webhook-id', { 'webhook-id': '' }, 400],
    ['missing webhook-timestamp', { 'webhook-timestamp': '' }, 400],
    ['missing webhook-signature', { 'webhook-signature': '' }, 400],
    ['non-integer timestamp', { 'webhook-timestamp': `${REF.timestamp}.5` }, 400],
    ['timestamp with trailing junk', { 'webhook-timestamp': `${REF.timestamp}abc` }, 400],
    ['negative timestamp', { 'webhook-timestamp': `-${REF.timestamp}` }, 400],
  ])('%s → %i', async (_label, over, status) => {
    const headers: Record<string, string> = refHeaders();
    for (const [k, v] of Object.entries(over)) {
      if (v === '') delete headers[k];
      else headers[k] = v;
    }
    const before = count();
    const res = await r.app.app.request('/webhooks', { method: 'POST', headers, body: REF.body });
    expect(res.status).toBe(status);
    const body = (await res.json()) as { error: string; message: string };
    expect(body.message.length).toBeGreaterThan(10);
    expect(count()).toEqual(before);
  });

  it.each([
    ['empty', ''],
    ['not JSON', 'not json at all'],
  ])('a body that is %s with a signature of another secret is refused (401), not quarantined', async (_label, body) => {
    const forged = signDelivery(newSecret(), body, { timestampSeconds: REF.timestamp });
    const before = count();
    const res = await r.app.app.request('/webhooks', { method: 'POST', headers: forged.headers, body });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: 'no_valid_signature' });
    expect(count()).toEqual(before);
  });

  it('accepts a header carrying a bad and a good signature', async () => {
    const res = await r.app.app.request('/webhooks', {
      method: 'POST',
      headers: refHeaders({ 'webhook-signature': `v1,${'A'.repeat(43)}= v2,whatever ${REF.signature}` }),
      body: REF.body,
    });
    expect(res.status).toBe(200);
  });

  it('accepts the good signature wherever it stands in the list, first or between bad ones', async () => {
    // Every entry is tried: a verifier reading only the last (or only the first) entry fails one of these.
    const bad = `v1,${'A'.repeat(43)}=`;
    for (const signature of [`${REF.signature} ${bad}`, `${bad} ${REF.signature} ${bad}`]) {
      const res = await r.app.app.request('/webhooks', { method: 'POST', headers: refHeaders({ 'webhook-signature': signature }), body: REF.body });
      expect(res.status, signature).toBe(200);
    }
  });
});

describe('deliveries signed by the standardwebhooks package', () => {
  const now = 1_790_000_000;
  const clock = new ManualClock(now * 1000);
  const secretA = newSecret();
  const secretB = newSecret();
  let r: TestReceiver;
  beforeAll(async () => {
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: `${secretA}, ${secretB}` }, { clock, listen: false });
  });
  afterAll(() => r.close());

  it('passes with either of two configured secrets (a rotation)', async () => {
    for (const secret of [secretA, secretB]) {
      const env = envelope();
      const d = signDelivery(secret, JSON.stringify(env), { timestampSeconds: now });
      const res = await r.app.app.request('/webhooks', { method: 'POST', headers: d.headers, body: d.body });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ outcome: 'accepted', id: env.id });
    }
    const other = signDelivery(newSecret(), JSON.stringify(envelope()), { timestampSeconds: now });
    const res = await r.app.app.request('/webhooks', { method: 'POST', headers: other.headers, body: other.body });
    expect(res.status).toBe(401);
  });

  it('rejects a signature whose last base64 character differs only in bits that do not encode the digest', async () => {
    const env = envelope({ id: 'evt_noncanonical' });
    const good = signDelivery(secretA, JSON.stringify(env), { msgId: 'msg_noncanonical', timestampSeconds: now });
    const b64 = good.headers['webhook-signature']!.slice(3);
    const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
    const altered = b64.slice(0, 42) + alphabet[alphabet.indexOf(b64[42]!) ^ 1] + '=';
    expect(Buffer.from(altered, 'base64').equals(Buffer.from(b64, 'base64'))).toBe(true); // same digest bytes
    const res = await r.app.app.request('/webhooks', { method: 'POST', headers: { ...good.headers, 'webhook-signature': `v1,${altered}` }, body: good.body });
    expect(res.status).toBe(401);
  });

  it('rejects any single changed byte of body, id, timestamp or signature (property)', async () => {
    const env = envelope({ id: 'evt_property' });
    const good = signDelivery(secretA, JSON.stringify(env), { msgId: 'msg_property', timestampSeconds: now });
    const fields = ['body', 'webhook-id', 'webhook-timestamp', 'webhook-signature'] as const;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...fields),
        fc.nat(),
        fc.integer({ min: 1, max: 255 }),
        async (field, position, delta) => {
          const original = Buffer.from(field === 'body' ? good.body : good.headers[field]!, 'latin1');
          const i = position % original.length;
          const mutated = Buffer.from(original);
          mutated[i] = (mutated[i]! + delta) % 256;
          // Header values must stay printable ASCII to be sendable at all.
          if (field !== 'body' && (mutated[i]! < 0x21 || mutated[i]! > 0x7e)) return;
          const headers = { ...good.headers };
          let body: Buffer = Buffer.from(good.body);
          if (field === 'body') body = mutated;
          else headers[field] = mutated.toString('latin1');
          const res = await r.app.app.request('/webhooks', { method: 'POST', headers, body });
          expect([400, 401]).toContain(res.status);
        },
      ),
      { numRuns: 300 },
    );
    const stored = r.app.database.ingestSqlite.prepare("SELECT COUNT(*) FROM events WHERE id = 'evt_property'").pluck().get();
    expect(stored).toBe(0);
  });
});

describe('a secret written without its base64 padding (accepted by the standardwebhooks package)', () => {
  const now = 1_790_000_000;
  // 32 bytes: 43 characters without the '=' (length mod 4 of 3); 25 bytes: 34 (mod 4 of 2).
  const unpadded = [32, 25].map((n) => `whsec_${randomBytes(n).toString('base64').replace(/=+$/, '')}`);
  let r: TestReceiver;
  beforeAll(async () => {
    r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: unpadded.join(',') }, { clock: new ManualClock(now * 1000) });
  });
  afterAll(() => r?.close());

  it('starts, and accepts over HTTP a delivery signed with it by the reference package', async () => {
    expect(unpadded.map((s) => (s.length - 'whsec_'.length) % 4)).toEqual([3, 2]);
    for (const secret of unpadded) {
      const env = envelope();
      const res = await postSigned(r.url, secret, JSON.stringify(env), { timestampSeconds: now });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ outcome: 'accepted', id: env.id });
    }
  });
});

describe('verifier agrees with the standardwebhooks package (the reference)', () => {
  it('gives the same verdict as Webhook.verify for random UTF-8 bodies and signatures', () => {
    const secret = newSecret();
    const key = parseSecret(secret);
    if (!key.ok) throw new Error('bad secret');
    const verifier = createVerifier([{ name: 'default', signingKeys: [key.key] }], { now: () => Date.now() });
    const ref = new Webhook(secret);
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 200 }), fc.boolean(), fc.string({ maxLength: 44 }), (body, sign, junk) => {
        const ts = Math.floor(Date.now() / 1000);
        const headers = {
          'webhook-id': 'msg_diff',
          'webhook-timestamp': String(ts),
          'webhook-signature': sign ? ref.sign('msg_diff', new Date(ts * 1000), body) : `v1,${junk}`,
        };
        let refOk = true;
        try {
          ref.verify(body, headers, { jsonParse: false });
        } catch {
          refOk = false;
        }
        const ours = verifier.verify(
          { id: headers['webhook-id'], timestamp: headers['webhook-timestamp'], signature: headers['webhook-signature'] },
          Buffer.from(body, 'utf8'),
        );
        expect(ours.ok).toBe(refOk);
      }),
      { numRuns: 500 },
    );
  });
});
