import { createHmac, randomBytes, randomUUID } from 'node:crypto';
import fc from 'fast-check';

/** v1 signature of exactly these strings and bytes (spec 6.2), with the secret's decoded key. */
export function sign(secret: string, id: string, ts: string, body: Buffer): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${ts}.`).update(body).digest('base64')}`;
}

/** Bodies a hostile or broken sender may send: prototype keys, deep nesting, unicode, not JSON at all. */
export function bodyArb(): fc.Arbitrary<Buffer> {
  const now = () => new Date().toISOString();
  const hostileKeys = fc.constantFrom('__proto__', 'constructor', 'prototype', '__defineGetter__', 'hasOwnProperty', 'toString', 'valueOf');
  const hostileObject = fc
    .tuple(hostileKeys, fc.jsonValue({ maxDepth: 3 }), fc.constantFrom('top', 'payload', 'application', 'candidate'))
    .map(([k, v, where]) => {
      const inner = `{"${k}":{"polluted":"yes","constructor":{"prototype":{"polluted":"yes"}}},"x":${JSON.stringify(v)}}`;
      const app = `{"id":"${randomUUID()}","status":"applied"${where === 'application' ? `,"${k}":{"polluted":"yes"}` : ''}}`;
      const cand = where === 'candidate' ? `{"first_name":"A","${k}":{"polluted":"yes"}}` : '{"first_name":"A"}';
      const payload = `{"application":${app},"candidate":${cand}${where === 'payload' ? `,"${k}":${inner}` : ''}}`;
      return `{"id":"evt_${randomUUID()}","event_type":"application.created","created_at":"${now()}"${where === 'top' ? `,"${k}":${inner}` : ''},"payload":${payload}}`;
    });
  const deep = fc.tuple(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom('[', '{"a":')).map(([n, open]) => {
    const close = open === '[' ? ']' : '}';
    return `{"id":"evt_${randomUUID()}","event_type":"application.created","payload":${open.repeat(n)}1${close.repeat(n)}}`;
  });
  const unicode = fc.string({ unit: 'grapheme', maxLength: 200 }).map((s) => JSON.stringify({ id: `evt_${s}`, event_type: s || 'x', payload: { s } }));
  const envelopeLike = fc.record({
    id: fc.oneof(fc.constant(`evt_${randomUUID()}`), fc.string(), fc.integer(), fc.constant(null), fc.string({ minLength: 250, maxLength: 300 })),
    event_type: fc.oneof(fc.constantFrom('application.created', 'interview.completed', 'job_application.deleted', 'made.up'), fc.string(), fc.constant(null)),
    payload: fc.jsonValue({ maxDepth: 4 }),
  }).map((o) => JSON.stringify(o));
  const strings = fc.oneof(
    { weight: 3, arbitrary: hostileObject },
    { weight: 1, arbitrary: deep },
    { weight: 1, arbitrary: unicode },
    { weight: 2, arbitrary: envelopeLike },
    { weight: 1, arbitrary: fc.json({ maxDepth: 4 }) },
    { weight: 1, arbitrary: fc.string({ maxLength: 300 }) },
  );
  return fc.oneof(
    { weight: 9, arbitrary: strings.map((s) => Buffer.from(s, 'utf8')) },
    { weight: 1, arbitrary: fc.uint8Array({ maxLength: 2000 }).map((a) => Buffer.from(a)) },
  );
}

export type SigMode =
  | 'valid'
  | 'valid_among_garbage'
  | 'wrong_secret'
  | 'random'
  | 'mutated'
  | 'other_body'
  | 'other_id'
  | 'other_timestamp'
  | 'truncated'
  | 'v2_prefix'
  | 'empty'
  | 'missing'
  | 'garbage';

export const SIG_MODES: SigMode[] = [
  'valid', 'valid', 'valid', 'valid', 'valid', 'valid', 'valid_among_garbage', 'valid_among_garbage', 'wrong_secret', 'random', 'mutated', 'other_body', 'other_id',
  'other_timestamp', 'truncated', 'v2_prefix', 'empty', 'missing', 'garbage',
];

/**
 * Timestamps: mostly now, then the odd ones. `acceptable`: what spec 6.2
 * allows, an integer number of seconds (digits only) within 5 minutes of now;
 * a 2xx for anything else counts against the receiver.
 */
export function timestampArb(): fc.Arbitrary<{ ts: string | null; acceptable: boolean }> {
  const s = () => Math.floor(Date.now() / 1000);
  const judge = (ts: string | null) => ({ ts, acceptable: ts !== null && /^\d{1,15}$/.test(ts) && Math.abs(Number(ts) - s()) <= 290 });
  return fc.oneof(
    { weight: 10, arbitrary: fc.constant(null).map(() => judge(String(s()))) },
    {
      weight: 4,
      arbitrary: fc
        .constantFrom(
          () => String(s() - 400), () => String(s() + 400), () => String(s() - 100_000), () => '', () => ' ', () => '-1', () => '0',
          () => `${s()}.5`, () => `0${s()}`, () => ` ${s()}`, () => `${s()}abc`, () => '1e9', () => '0x10', () => '١٧٠٠٠٠٠٠٠٠',
          () => '9'.repeat(40), () => String(Number.MAX_SAFE_INTEGER), () => `${s()}\u00a0`, () => 'NaN', () => 'Infinity', () => null,
        )
        .map((f) => judge(f())),
    },
  );
}

export function idArb(): fc.Arbitrary<string | null> {
  return fc.oneof(
    { weight: 10, arbitrary: fc.constant(null).map(() => `msg_${randomUUID()}`) },
    { weight: 1, arbitrary: fc.constant(null) },
    { weight: 1, arbitrary: fc.constantFrom('', ' ', 'x'.repeat(257), 'x'.repeat(5000), 'msg_ünïcødé_✓', '../../etc/passwd', 'a\u0000b') },
    { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 60 }) },
  );
}

/** Extra header lines: duplicates of the signed ones, huge, unicode, odd framing hints. */
export function extraHeadersArb(): fc.Arbitrary<{ name: string; value: string }[]> {
  const one = fc.oneof(
    fc.constantFrom('webhook-id', 'webhook-timestamp', 'webhook-signature', 'Webhook-Signature').map((name) => ({ name, value: `dup-${randomBytes(4).toString('hex')}` })),
    fc.constant(null).map(() => ({ name: 'webhook-signature', value: `v1,${randomBytes(32).toString('base64')}` })),
    fc.integer({ min: 1000, max: 20_000 }).map((n) => ({ name: 'x-huge', value: 'h'.repeat(n) })),
    fc.string({ unit: 'grapheme', minLength: 1, maxLength: 40 }).map((v) => ({ name: 'x-unicode', value: v.replace(/[\r\n]/g, '') })),
    fc.constantFrom('application/json', 'text/plain; charset=utf-16', 'multipart/form-data; boundary=x', '').map((value) => ({ name: 'content-type', value })),
    fc.constantFrom('__proto__', 'constructor', 'x-__proto__').map((name) => ({ name, value: '{"polluted":"yes"}' })),
  );
  return fc.oneof({ weight: 1, arbitrary: fc.constant<{ name: string; value: string }[]>([]) }, { weight: 1, arbitrary: fc.array(one, { minLength: 1, maxLength: 4 }) });
}
