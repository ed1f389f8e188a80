import { randomUUID } from 'node:crypto';
import { request } from 'node:http';
import { connect } from 'node:net';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { envelope, newSecret, postSigned, signDelivery } from '../helpers/signing.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';

const secret = newSecret();
let r: TestReceiver;
beforeAll(async () => {
  r = await startReceiver({ WORKER_CONCURRENCY: '0', WEBHOOK_SECRET: secret, MAX_BODY_BYTES: String(64 * 1024) });
});
afterAll(() => r.close());

const post = (d: { body: string | Buffer; headers: Record<string, string> }) =>
  fetch(`${r.url}/webhooks`, { method: 'POST', headers: d.headers, body: d.body });
const rows = (sql: string, ...params: unknown[]) => r.app.database.ingestSqlite.prepare(sql).all(...params);
const one = (sql: string, ...params: unknown[]) => r.app.database.ingestSqlite.prepare(sql).pluck().get(...params);
/** receiver_event_conflicts_total as /metrics says it now. */
const conflictsCounted = async () => {
  const m = /^receiver_event_conflicts_total (\d+)$/m.exec(await (await fetch(`${r.url}/metrics`)).text());
  return m ? Number(m[1]) : 0;
};

describe('POST /webhooks over real HTTP', () => {
  it('stores the envelope exactly as received, as one row past the processing cursor and nothing else', async () => {
    const env = envelope();
    const body = `{ "spacing":  "kept", ${JSON.stringify(env).slice(1)}`;
    const res = await post(signDelivery(secret, body));
    expect(res.status).toBe(200);
    const [row] = rows('SELECT * FROM events WHERE id = ?', env.id) as Record<string, unknown>[];
    expect(row).toMatchObject({
      id: env.id,
      event_type: 'application.created',
      webhook_id: 'wh_test',
      source: 'default',
      created_at: env.created_at,
      envelope: body,
      application_id: (env.payload as { application: { id: string } }).application.id,
    });
    // No job: processing (WORKER_CONCURRENCY=0 here) will take it from its cursor.
    expect(one('SELECT COUNT(*) FROM jobs WHERE event_id = ?', env.id)).toBe(0);
    expect(one('SELECT COUNT(*) FROM events WHERE id = ? AND rowid > (SELECT last_event_rowid FROM processing_cursor)', env.id)).toBe(1);
  });

  it('reads the webhook-* headers as sent on the socket: repeated lines are joined, padding is trimmed', async () => {
    // node:http sends an array as one header line per value, as a proxy might.
    const send = (headers: Record<string, string | string[]>, body: string) =>
      new Promise<{ status: number; body: string }>((resolve, reject) => {
        const req = request(`${r.url}/webhooks`, { method: 'POST', headers }, (res) => {
          let text = '';
          res.on('data', (c: Buffer) => (text += c.toString()));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        });
        req.on('error', reject);
        req.end(body);
      });
    const body = JSON.stringify(envelope());
    const d = signDelivery(secret, body);
    const wrong = `v1,${Buffer.alloc(32, 7).toString('base64')}`;

    const twoLines = await send({ ...d.headers, 'webhook-signature': [wrong, d.headers['webhook-signature']!] }, body);
    expect(twoLines.status, twoLines.body).toBe(200);
    // The valid one on the first line: joined as "v1,<valid>, v1,<wrong>", the comma is the join's.
    const firstLine = await send({ ...d.headers, 'webhook-signature': [d.headers['webhook-signature']!, wrong] }, body);
    expect(firstLine.status, firstLine.body).toBe(200);
    const padded = await send({ ...d.headers, 'webhook-id': `  ${d.headers['webhook-id']}  ` }, body);
    expect(padded.status, padded.body).toBe(200);
    expect(JSON.parse(padded.body)).toMatchObject({ outcome: 'duplicate' });
    const onlyWrong = await send({ ...d.headers, 'webhook-signature': [wrong, wrong] }, body);
    expect(onlyWrong.status).toBe(401);
    const twoTimestamps = await send({ ...d.headers, 'webhook-timestamp': [d.headers['webhook-timestamp']!, d.headers['webhook-timestamp']!] }, body);
    expect(twoTimestamps.status).toBe(400);
    expect(JSON.parse(twoTimestamps.body)).toMatchObject({ error: 'malformed_header', message: 'webhook-timestamp header was sent more than once; a delivery has exactly one timestamp' });
    // Two ids (even two copies of the signed one): refused as malformed, not as a bad signature.
    const { 'webhook-id': signedId, ...others } = d.headers;
    for (const ids of [[signedId!, signedId!], ['msg_other', signedId!]]) {
      const twoIds = await send({ ...d.headers, 'webhook-id': ids }, body);
      expect(twoIds.status, twoIds.body).toBe(400);
      expect(JSON.parse(twoIds.body)).toMatchObject({ error: 'malformed_header', message: expect.stringMatching(/webhook-id header was sent more than once/) });
    }
    // The two lines spelled differently (Go and others canonicalize names: Webhook-Id), written on a
    // socket as they are (node:http's client would merge them into one name).
    {
      const lines = [...Object.entries(others).map(([k, v]) => `${k}: ${v}`), `Content-Length: ${Buffer.byteLength(body)}`, `Webhook-Id: ${signedId}`, 'webhook-id: msg_other'];
      const answer = await new Promise<string>((resolve, reject) => {
        const socket = connect(Number(new URL(r.url).port), '127.0.0.1');
        let text = '';
        socket.on('data', (c: Buffer) => (text += c.toString()));
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
        socket.end(`POST /webhooks HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n${lines.join('\r\n')}\r\n\r\n${body}`);
      });
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: 'malformed_header', message: expect.stringMatching(/webhook-id header was sent more than once/) });
    }
    // One id with a comma in it is an id like any other (here: not the signed one, so 401).
    const comma = await send({ ...d.headers, 'webhook-id': 'msg_a, msg_b' }, body);
    expect(comma.status).toBe(401);
  });

  it('dedupes on the envelope id: 3 deliveries with fresh webhook-ids give one row, to be processed once', async () => {
    const body = JSON.stringify(envelope());
    const id = JSON.parse(body).id as string;
    const outcomes: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await post(signDelivery(secret, body, { msgId: `msg_${randomUUID()}` }));
      expect(res.status).toBe(200);
      outcomes.push(((await res.json()) as { outcome: string }).outcome);
    }
    expect(outcomes).toEqual(['accepted', 'duplicate', 'duplicate']);
    expect(one('SELECT COUNT(*) FROM events WHERE id = ? AND rowid > (SELECT last_event_rowid FROM processing_cursor)', id)).toBe(1);
    expect(one('SELECT COUNT(*) FROM jobs WHERE event_id = ?', id)).toBe(0);
  });

  it('50 identical deliveries in parallel: every answer 2xx, one row, to be processed once', async () => {
    const d = signDelivery(secret, JSON.stringify(envelope()));
    const id = JSON.parse(d.body).id as string;
    const responses = await Promise.all(Array.from({ length: 50 }, () => post(d)));
    expect(responses.map((x) => x.status)).toEqual(Array(50).fill(200));
    const outcomes = await Promise.all(responses.map(async (x) => ((await x.json()) as { outcome: string }).outcome));
    expect(outcomes.filter((o) => o === 'accepted')).toHaveLength(1);
    expect(one('SELECT COUNT(*) FROM events WHERE id = ? AND rowid > (SELECT last_event_rowid FROM processing_cursor)', id)).toBe(1);
    expect(one('SELECT COUNT(*) FROM jobs WHERE event_id = ?', id)).toBe(0);
  });

  it('the same envelope serialized otherwise (key order, spacing) is a duplicate, not a conflict', async () => {
    const env = envelope();
    await post(signDelivery(secret, JSON.stringify(env)));
    const reordered = JSON.stringify(Object.fromEntries(Object.entries(env).reverse()), null, 2);
    const res = await post(signDelivery(secret, reordered));
    expect(await res.json()).toMatchObject({ outcome: 'duplicate' });
    expect(one('SELECT COUNT(*) FROM event_conflicts WHERE event_id = ?', env.id)).toBe(0);
  });

  it('a redelivery of a deeply nested event, serialized otherwise, is a duplicate, and the deliveries committed with it are not touched', async () => {
    // JSON.parse takes 20,000 levels; a recursive comparison overflowed the stack inside the
    // batch's transaction, which failed every delivery of the batch with 503 and /readyz with it.
    const deep = `{"id":"evt_${randomUUID()}","event_type":"application.created","payload":${'['.repeat(20_000)}${']'.repeat(20_000)}}`;
    expect((await post(signDelivery(secret, deep))).status).toBe(200);
    const other = envelope();
    const [again, mate] = await Promise.all([post(signDelivery(secret, `${deep}\n`)), post(signDelivery(secret, JSON.stringify(other)))]);
    expect([again.status, mate.status]).toEqual([200, 200]);
    expect(await again.json()).toMatchObject({ outcome: 'duplicate' });
    expect(await mate.json()).toMatchObject({ outcome: 'accepted' });
    expect((await fetch(`${r.url}/readyz`)).status).toBe(200);
  });

  it('one event sent to two endpoints of the organization (envelopes differing only in webhook_id) is a duplicate, not a conflict', async () => {
    // Spec 6: sent to each endpoint that takes it, with that endpoint's id as webhook_id (6.1).
    const conflictsBefore = await conflictsCounted();
    const env = envelope({ webhook_id: 'wh_first' });
    expect(await (await post(signDelivery(secret, JSON.stringify(env)))).json()).toMatchObject({ outcome: 'accepted' });
    const res = await post(signDelivery(secret, JSON.stringify({ ...env, webhook_id: 'wh_second' })));
    expect(await res.json()).toMatchObject({ outcome: 'duplicate' });
    expect(one('SELECT COUNT(*) FROM event_conflicts WHERE event_id = ?', env.id)).toBe(0);
    expect(await conflictsCounted()).toBe(conflictsBefore);
    // Only webhook_id is set aside: any other difference is still a conflict.
    const changed = JSON.stringify({ ...env, webhook_id: 'wh_second', created_at: '2020-01-01T00:00:00.000Z' });
    expect(await (await post(signDelivery(secret, changed))).json()).toMatchObject({ outcome: 'conflict' });
    expect(one('SELECT envelope FROM event_conflicts WHERE event_id = ?', env.id)).toBe(changed);
  });

  it('same id with a different body keeps the original and records the conflict', async () => {
    const conflictsBefore = await conflictsCounted();
    const env = envelope();
    await post(signDelivery(secret, JSON.stringify(env)));
    const changed = JSON.stringify({ ...env, event_type: 'application.status_changed' });
    const res = await post(signDelivery(secret, changed));
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ outcome: 'conflict' });
    expect(one('SELECT event_type FROM events WHERE id = ?', env.id)).toBe('application.created');
    expect(one('SELECT envelope FROM event_conflicts WHERE event_id = ?', env.id)).toBe(changed);
    expect(r.logs.lines.some((l) => l.outcome === 'conflict' && l.event_id === env.id)).toBe(true);
    // Counted once: other tests of this file (in any order) may have counted conflicts of their own.
    expect(await conflictsCounted()).toBe(conflictsBefore + 1);
  });

  it('stores a conflicting delivery once, however often the same signed delivery is repeated (a retry, a replay within its 5 minutes)', async () => {
    const env = envelope();
    expect((await post(signDelivery(secret, JSON.stringify(env)))).status).toBe(200);
    const changed = JSON.stringify({ ...env, payload: { note: 'x'.repeat(32 * 1024) } });
    const d = signDelivery(secret, changed);
    const conflictsBefore = await conflictsCounted();
    const answers = [];
    // Sent one after the other and several at once (one group commit).
    for (let i = 0; i < 3; i++) answers.push(await post(d));
    answers.push(...(await Promise.all([post(d), post(d), post(d)])));
    for (const res of answers) expect(await res.json()).toEqual({ outcome: 'conflict', id: env.id });
    expect(one('SELECT COUNT(*) FROM event_conflicts WHERE event_id = ?', env.id)).toBe(1);
    // Every delivery is still answered and counted as a conflict: only the copies are not kept.
    expect(await conflictsCounted()).toBe(conflictsBefore + 6);
    // The same bytes under another webhook-id are another delivery, and kept as such; so is another body.
    expect((await post(signDelivery(secret, changed))).status).toBe(200);
    expect((await post(signDelivery(secret, JSON.stringify({ ...env, payload: {} })))).status).toBe(200);
    expect(one('SELECT COUNT(*) FROM event_conflicts WHERE event_id = ?', env.id)).toBe(3);
  });

  it('numbers are compared as written: bodies differing only past 2^53 are a conflict, not a duplicate', async () => {
    const env = envelope();
    const body = (n: string) => JSON.stringify({ ...env, payload: { ...(env.payload as object), seq: 0 } }).replace('"seq":0', `"seq":${n}`);
    expect(await (await post(signDelivery(secret, body('9007199254740993')))).json()).toMatchObject({ outcome: 'accepted' });
    const later = body('9007199254740992');
    expect(await (await post(signDelivery(secret, later))).json()).toMatchObject({ outcome: 'conflict' });
    expect(one('SELECT envelope FROM event_conflicts WHERE event_id = ?', env.id)).toBe(later);
  });

  it('stores and acknowledges an unknown event type', async () => {
    const env = envelope({ event_type: 'offer.signed', payload: { anything: [1, 2, 3] } });
    const res = await post(signDelivery(secret, JSON.stringify(env)));
    expect(res.status).toBe(200);
    expect(one('SELECT event_type FROM events WHERE id = ?', env.id)).toBe('offer.signed');
    const line = r.logs.lines.find((l) => l.event_id === env.id);
    expect(line).toMatchObject({ level: 30, unknown_type: true, outcome: 'accepted' });
  });

  it('says the first delivery of each unknown event type at warn, once, so an operator hears of a new type', async () => {
    const told = () => r.logs.lines.filter((l) => l.level === 40 && typeof l.msg === 'string' && l.msg.startsWith('an event type this version does not know'));
    const before = told().length;
    for (const type of ['offer.extended', 'offer.extended', 'offer.withdrawn', 'application.created']) {
      const res = await post(signDelivery(secret, JSON.stringify(envelope({ event_type: type }))));
      expect(res.status).toBe(200);
    }
    expect(told().slice(before).map((l) => l.event_type)).toEqual(['offer.extended', 'offer.withdrawn']);
  });

  it('remembers an unknown event type by its first 100 characters: a type as long as the body is not kept whole in memory', async () => {
    const told = () => r.logs.lines.filter((l) => l.level === 40 && typeof l.msg === 'string' && l.msg.startsWith('an event type this version does not know'));
    const before = told().length;
    // Each type held whole (up to MAX_BODY_BYTES) kept about 1 MB per type alive with the default limit.
    const prefix = `long.${'t'.repeat(200)}`;
    for (const type of [`${prefix}.one`, `${prefix}.two`]) {
      const res = await post(signDelivery(secret, JSON.stringify(envelope({ event_type: type }))));
      expect(res.status).toBe(200);
    }
    expect(told().slice(before).map((l) => l.event_type)).toEqual([prefix.slice(0, 100)]);
  });

  it.each([
    ['not JSON', Buffer.from('this is <b>not</b> json'), 'body is not valid JSON'],
    ['JSON without an id', Buffer.from('{"event_type":"application.created"}'), 'envelope has no "id" string'],
    ['a JSON array', Buffer.from('[1,2]'), 'body is not a JSON object'],
    ['invalid UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), 'body is not valid UTF-8'],
    ['empty', Buffer.alloc(0), 'body is empty'],
    [
      'JSON after a byte order mark',
      Buffer.concat([Buffer.from([0xef, 0xbb, 0xbf]), Buffer.from('{"id":"evt_bom","event_type":"application.created"}')]),
      'body starts with a UTF-8 byte order mark (U+FEFF), which JSON sent over a network must not have (RFC 8259, 8.1)',
    ],
  ])('quarantines a signed body that is %s, whole, and answers 2xx', async (_label, body, reason) => {
    const msgId = `msg_${randomUUID()}`;
    const ts = Math.floor(Date.now() / 1000);
    // Signed over the raw bytes with node:crypto here, since invalid UTF-8 cannot go through the package's string API.
    const { createHmac } = await import('node:crypto');
    const key = Buffer.from(secret.slice(6), 'base64');
    const sig = createHmac('sha256', key).update(`${msgId}.${ts}.`).update(body).digest('base64');
    const res = await post({ body, headers: { 'webhook-id': msgId, 'webhook-timestamp': String(ts), 'webhook-signature': `v1,${sig}` } });
    expect(res.status).toBe(200);
    const [q] = rows('SELECT * FROM quarantine WHERE delivery_id = ?', msgId) as Record<string, unknown>[];
    expect(q).toMatchObject({ reason, source: 'default' });
    expect(Buffer.compare(q!.body as Buffer, body)).toBe(0);
    expect(JSON.parse(q!.headers as string)).toMatchObject({ 'webhook-id': msgId });
    const line = r.logs.lines.find((l) => l.delivery_id === msgId);
    expect(line).toMatchObject({ level: 40, outcome: 'quarantined' });
  });

  it('stores a quarantined delivery once, however often the same signed delivery is replayed within its 5 minutes', async () => {
    const body = `${'x'.repeat(32 * 1024)} not JSON`;
    const d = signDelivery(secret, body);
    const answers = [];
    // Sent one after the other and several at once (one group commit).
    for (let i = 0; i < 3; i++) answers.push(await post(d));
    answers.push(...(await Promise.all([post(d), post(d), post(d)])));
    for (const res of answers) expect(await res.json()).toEqual({ outcome: 'quarantined', reason: 'body is not valid JSON' });
    expect(one('SELECT COUNT(*) FROM quarantine WHERE delivery_id = ?', d.headers['webhook-id'])).toBe(1);
    // The same bytes under another webhook-id are another delivery, and kept as such.
    const again = signDelivery(secret, body);
    expect((await post(again)).status).toBe(200);
    expect(one('SELECT COUNT(*) FROM quarantine WHERE delivery_id = ?', again.headers['webhook-id'])).toBe(1);
  });

  it('answers 413 for a declared body over the limit', async () => {
    const big = JSON.stringify(envelope({ padding: 'x'.repeat(70 * 1024) }));
    const res = await post(signDelivery(secret, big));
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: 'body_too_large' });
  });

  it('answers 413 for a chunked body with no length as soon as the limit passes, without reading the rest', async () => {
    const d = signDelivery(secret, '{}');
    const result = await new Promise<{ status: number; sentBytes: number }>((resolve, reject) => {
      const req = request(`${r.url}/webhooks`, { method: 'POST', headers: { ...d.headers, 'transfer-encoding': 'chunked' } });
      let sent = 0;
      let answered = false;
      const chunk = Buffer.alloc(16 * 1024, 0x61);
      req.on('response', (res) => {
        answered = true;
        res.resume();
        resolve({ status: res.statusCode ?? 0, sentBytes: sent });
      });
      req.on('error', (err) => (answered ? undefined : reject(err)));
      // Bounded: at most 4 MiB, far more than the 64 KiB limit.
      const pump = () => {
        while (!answered && sent < 4 * 1024 * 1024) {
          sent += chunk.length;
          if (!req.write(chunk)) return req.once('drain', pump);
        }
        if (!answered) req.end();
      };
      pump();
    });
    expect(result.status).toBe(413);
    expect(result.sentBytes).toBeLessThan(4 * 1024 * 1024);
  });

  it('takes deliveries at /webhooks/ too (an endpoint registered with a trailing slash)', async () => {
    const env = envelope();
    const d = signDelivery(secret, JSON.stringify(env));
    const res = await fetch(`${r.url}/webhooks/`, { method: 'POST', headers: d.headers, body: d.body });
    expect(res.status).toBe(200);
    expect(one('SELECT count(*) FROM events WHERE id = ?', env.id)).toBe(1);
    expect((await fetch(`${r.url}/webhooks/`)).status).toBe(405);
  });

  it('answers 405 for other methods and 404 elsewhere, as JSON', async () => {
    const get = await fetch(`${r.url}/webhooks`);
    expect(get.status).toBe(405);
    expect(get.headers.get('allow')).toBe('POST');
    const nf = await fetch(`${r.url}/nope`);
    expect(nf.status).toBe(404);
    expect(await nf.json()).toMatchObject({ error: 'not_found' });
  });

  it('reports health and readiness', async () => {
    expect((await fetch(`${r.url}/healthz`)).status).toBe(200);
    const ready = await fetch(`${r.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', checks: { database: 'open', migrations: 'applied', writable: 'yes' } });
  });
});

describe('several sources (organizations) on one URL', () => {
  it('attributes each delivery to the source whose secret verifies it', async () => {
    const { dir, cleanup } = tempDir();
    const acme = newSecret();
    const globex = newSecret();
    const file = join(dir, 'config.json');
    writeFileSync(
      file,
      JSON.stringify({
        sources: [
          { name: 'acme', secrets: [acme], api_url: 'http://127.0.0.1:9', api_key: 'sk-acme.key' },
          { name: 'globex', secrets: { env: 'GLOBEX_SECRET' }, api_url: 'http://127.0.0.1:9', api_key: 'sk-globex.key' },
        ],
      }),
    );
    const multi = await startReceiver({ WORKER_CONCURRENCY: '0', CONFIG_FILE: file, GLOBEX_SECRET: globex });
    try {
      for (const [name, s] of [['acme', acme], ['globex', globex]] as const) {
        const env = envelope();
        const res = await postSigned(multi.url, s, JSON.stringify(env));
        expect(res.status).toBe(200);
        expect(multi.app.database.ingestSqlite.prepare('SELECT source FROM events WHERE id = ?').pluck().get(env.id)).toBe(name);
      }
    } finally {
      await multi.close();
      cleanup();
    }
  });
});

describe('log hygiene', () => {
  it('never logs the secret, a signature or candidate data', async () => {
    // Deliveries of its own, so that it does not depend on what other tests of this file sent before it:
    // accepted, duplicate, conflict, a wrong signature, and bodies quarantined with candidate data in them.
    const env = envelope();
    for (let i = 0; i < 3; i++) {
      await post(signDelivery(secret, JSON.stringify(env)));
      await post(signDelivery(secret, JSON.stringify({ ...env, event_type: 'application.status_changed' })));
      await post(signDelivery(newSecret(), JSON.stringify(envelope())));
      await post(signDelivery(secret, `not json ${JSON.stringify(env)}`));
    }
    const all = r.logs.raw.join('\n');
    expect(r.logs.raw.length).toBeGreaterThan(10);
    expect(all).not.toContain(secret.slice(6));
    expect(all).not.toMatch(/v1,[A-Za-z0-9+/]{43}=/);
    expect(all).not.toContain('ada@example.com');
    expect(all).not.toContain('Lovelace');
  });
});

describe('limits at their exact boundary (mutation audit)', () => {
  const LIMIT = 64 * 1024;
  /** A signed envelope of exactly `size` bytes. */
  const sized = (size: number) => {
    const env = envelope({ padding: '' });
    const text = JSON.stringify({ ...env, padding: 'p'.repeat(size - Buffer.byteLength(JSON.stringify(env))) });
    expect(Buffer.byteLength(text)).toBe(size);
    return { id: env.id as string, text };
  };
  /** POSTs over node:http, the body in 4 KiB chunks with no Content-Length. */
  const sendChunked = (d: { body: string; headers: Record<string, string> }) =>
    new Promise<{ status: number; connection: string | undefined; body: string }>((resolve, reject) => {
      const req = request(`${r.url}/webhooks`, { method: 'POST', headers: { ...d.headers, 'transfer-encoding': 'chunked' } }, (res) => {
        let text = '';
        res.on('data', (c: Buffer) => (text += c.toString()));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, connection: res.headers.connection, body: text }));
      });
      req.on('error', reject);
      const bytes = Buffer.from(d.body);
      for (let i = 0; i < bytes.length; i += 4096) req.write(bytes.subarray(i, i + 4096));
      req.end();
    });

  it('a body of exactly MAX_BODY_BYTES is stored, declared or chunked; one byte more, chunked, is 413 with the connection closed, and not stored', async () => {
    const declared = sized(LIMIT);
    const res = await post(signDelivery(secret, declared.text));
    expect(res.status).toBe(200);
    expect(await res.json()).toEqual({ outcome: 'accepted', id: declared.id });

    const chunked = sized(LIMIT);
    const answer = await sendChunked(signDelivery(secret, chunked.text));
    expect(answer.status, answer.body).toBe(200);
    expect(one('SELECT COUNT(*) FROM events WHERE id IN (?, ?)', declared.id, chunked.id)).toBe(2);

    const over = sized(LIMIT + 1);
    const refused = await sendChunked(signDelivery(secret, over.text));
    expect(refused.status).toBe(413);
    expect(JSON.parse(refused.body)).toMatchObject({ error: 'body_too_large' });
    expect(refused.connection).toBe('close');
    expect(one('SELECT COUNT(*) FROM events WHERE id = ?', over.id)).toBe(0);
  });

  it('a webhook-id of 256 characters is taken, one of 257 is refused as malformed (400)', async () => {
    const env = envelope();
    const ok = await post(signDelivery(secret, JSON.stringify(env), { msgId: 'm'.repeat(256) }));
    expect(ok.status).toBe(200);
    const long = await post(signDelivery(secret, JSON.stringify(envelope()), { msgId: 'm'.repeat(257) }));
    expect(long.status).toBe(400);
    expect(await long.json()).toMatchObject({ error: 'malformed_header', message: 'webhook-id header is longer than 256 characters' });
  });

  it('an envelope id of 255 characters is stored as an event, one of 256 is quarantined saying so', async () => {
    const id = `evt_${'i'.repeat(251)}`;
    const ok = await post(signDelivery(secret, JSON.stringify(envelope({ id }))));
    expect(await ok.json()).toEqual({ outcome: 'accepted', id });
    const msgId = `msg_${randomUUID()}`;
    const long = await post(signDelivery(secret, JSON.stringify(envelope({ id: `${id}i` })), { msgId }));
    expect(await long.json()).toMatchObject({ outcome: 'quarantined', reason: 'envelope "id" is longer than 255 characters' });
    expect(one('SELECT COUNT(*) FROM quarantine WHERE delivery_id = ?', msgId)).toBe(1);
  });

  it('a request that makes no URL (a Host that is no host, a backslash in the path) is a 400 naming the problem, logged, a POST counted as a refused delivery, and the receiver serves on', async () => {
    const raw = (requestLine: string, host: string) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect(Number(new URL(r.url).port), '127.0.0.1');
        let text = '';
        socket.on('data', (c: Buffer) => (text += c.toString()));
        socket.on('end', () => resolve(text));
        socket.on('error', reject);
        socket.end(`${requestLine}\r\nHost: ${host}\r\nContent-Length: 2\r\n\r\n{}`);
      });
    const refusedCount = async () => {
      const text = await (await fetch(`${r.url}/metrics`)).text();
      return Number(/^receiver_deliveries_received_total\{outcome="rejected:bad_request",source="unknown"\} (\d+)$/m.exec(text)?.[1]);
    };
    expect(await refusedCount()).toBe(0);
    const logged = r.logs.lines.length;
    for (const [line, host, named] of [
      ['POST /webhooks HTTP/1.1', 'bad host', /the Host header and the request path do not make a valid URL/],
      ['POST /webhooks HTTP/1.1', 'a/b', /the Host header and the request path do not make a valid URL/],
      ['POST /web\\hooks HTTP/1.1', '127.0.0.1', /^the request path contains a backslash$/],
    ] as const) {
      const answer = await raw(line, host);
      expect(answer, `${line} / Host: ${host}`).toMatch(/^HTTP\/1\.1 400 /);
      expect(answer).toMatch(/\r\ncontent-type: application\/json/i);
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({ error: 'bad_request', message: expect.stringMatching(named) });
    }
    // A GET is no delivery: answered and logged alike, not counted with the refused deliveries.
    expect(await raw('GET /healthz HTTP/1.1', 'bad host')).toMatch(/^HTTP\/1\.1 400 /);
    expect(await refusedCount()).toBe(3);
    const refused = r.logs.lines.slice(logged).filter((l) => String(l.msg).startsWith('request refused before routing'));
    expect(refused.map((l) => l.method)).toEqual(['POST', 'POST', 'POST', 'GET']);
    expect(refused.every((l) => l.level === 40 && !JSON.stringify(l).includes('bad host'))).toBe(true);
    const after = await post(signDelivery(secret, JSON.stringify(envelope())));
    expect(after.status).toBe(200);
  });
});

describe('a quarantined delivery keeps its headers, never its credentials (mutation audit)', () => {
  it('drops Authorization, Cookie and API-key headers a proxy or the sender added', async () => {
    const msgId = `msg_${randomUUID()}`;
    const d = signDelivery(secret, 'not json at all', { msgId });
    const headers = { ...d.headers, authorization: 'Bearer proxy-token-1', cookie: 'session=cookie-2', 'x-api-key': 'key-3', 'x-request-id': 'req-4' };
    const res = await post({ body: d.body, headers });
    expect(await res.json()).toMatchObject({ outcome: 'quarantined' });
    const stored = JSON.parse(one('SELECT headers FROM quarantine WHERE delivery_id = ?', msgId) as string) as Record<string, string>;
    expect(stored).toMatchObject({ 'webhook-id': msgId, 'x-request-id': 'req-4' });
    expect(Object.keys(stored)).not.toEqual(expect.arrayContaining(['authorization']));
    expect(JSON.stringify(stored)).not.toMatch(/proxy-token-1|cookie-2|key-3/);
  });
});
