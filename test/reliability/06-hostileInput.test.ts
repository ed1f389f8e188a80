import { randomBytes, randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/childServer.js';
import { startReceiver } from '../helpers/receiver.js';
import { newSecret, signDelivery } from '../helpers/signing.js';
import { count, sinkFileIds } from './helpers/db.js';
import { deliver, makeClient, makeEvent, post } from './helpers/events.js';
import { startHiringStub } from './helpers/hiringStub.js';
import { bodyArb, extraHeadersArb, idArb, SIG_MODES, sign, timestampArb, type SigMode } from './helpers/hostile.js';
import { buildRequest, rawRequest } from './helpers/rawHttp.js';
import { rssOf, startReceiverProcess, stopReceiverProcess } from './helpers/receiverProcess.js';
import { registerSecret, registerSensitive, reportFigures, saveLogLines, sleep, suiteSeed, workspace } from './helpers/run.js';

const FUZZ_RUNS = 300;

const { dir, cleanups } = workspace('reliability-hostile-');

const protoSnapshot = () => ({
  object: Object.getOwnPropertyNames(Object.prototype).sort(),
  array: Object.getOwnPropertyNames(Array.prototype).sort(),
  func: Object.getOwnPropertyNames(Function.prototype).sort(),
});
const polluted = () =>
  ({} as Record<string, unknown>).polluted !== undefined ||
  ([] as unknown as Record<string, unknown>).polluted !== undefined ||
  (Object.create(Object.prototype) as Record<string, unknown>).polluted !== undefined;

/** Until every stored event is taken by processing (folds queue the jobs) and no job is due or running (bounded). */
async function waitIdle(q: (sql: string) => number, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  const busy = () =>
    q('SELECT COUNT(*) FROM events WHERE rowid > (SELECT last_event_rowid FROM processing_cursor)') > 0 ||
    q("SELECT COUNT(*) FROM jobs WHERE state IN ('pending', 'running') AND run_at <= strftime('%Y-%m-%dT%H:%M:%fZ', 'now')") > 0;
  while (Date.now() < deadline && busy()) await sleep(100);
}

describe('hostile input', () => {
  it(`fuzzer (${FUZZ_RUNS} runs) over signatures, timestamps, ids, duplicate/huge/unicode headers and hostile bodies: 0 accepted forgeries, 0 answers of 500, the process stays up, no prototype polluted`, async () => {
    const secret = newSecret();
    const otherSecret = newSecret();
    registerSecret(secret);
    registerSecret(otherSecret);
    const stub = await startHiringStub();
    cleanups.push(() => stub.close());
    const r = await startReceiver({ WEBHOOK_SECRET: secret, HIRING_API_URL: stub.url, HIRING_API_KEY: 'sk-fuzz0001.hostileKey000000000000', WORKER_CONCURRENCY: '2' });
    cleanups.push(async () => {
      // Saved after close(), so the shutdown's lines are scanned too.
      await r.close();
      saveLogLines('hostile-fuzz-inprocess', r.logs.raw);
    });
    registerSensitive('api_key', 'sk-fuzz0001.hostileKey000000000000');
    const port = Number(new URL(r.url).port);
    const before = protoSnapshot();
    const seed = suiteSeed();
    const tally = { runs: 0, accepted: 0, acceptedForgeries: 0, status500: 0, noResponse: 0, byStatus: {} as Record<string, number> };
    const forgeries: string[] = [];

    await fc.assert(
      fc.asyncProperty(bodyArb(), idArb(), timestampArb(), fc.constantFrom(...SIG_MODES), extraHeadersArb(), async (body, id, { ts, acceptable }, mode: SigMode, extra) => {
        const idS = id ?? '';
        const tsS = ts ?? '';
        const valid = sign(secret, idS, tsS, body);
        const signatures: Record<SigMode, string | null> = {
          valid,
          valid_among_garbage: `v1,${randomBytes(32).toString('base64')} v2,abc v1a,xyz ${valid} v1,`,
          wrong_secret: sign(otherSecret, idS, tsS, body),
          random: `v1,${randomBytes(32).toString('base64')}`,
          mutated: `${valid.slice(0, 10)}${valid[10] === 'A' ? 'B' : 'A'}${valid.slice(11)}`,
          other_body: sign(secret, idS, tsS, Buffer.concat([body, Buffer.from(' ')])),
          other_id: sign(secret, `${idS}x`, tsS, body),
          other_timestamp: sign(secret, idS, String(Number(tsS) + 1), body),
          truncated: valid.slice(0, -2),
          v2_prefix: valid.replace(/^v1,/, 'v2,'),
          empty: '',
          missing: null,
          garbage: `${randomBytes(60).toString('latin1').replace(/[\r\n\0]/g, '')}`,
        };
        const signature = signatures[mode];
        const headers: [string, string][] = [['content-type', 'application/json']];
        if (id !== null) headers.push(['webhook-id', id]);
        if (ts !== null) headers.push(['webhook-timestamp', ts]);
        if (signature !== null) headers.push(['webhook-signature', signature]);
        for (const h of extra) headers.push([h.name, h.value]);
        const duplicatedSigned = extra.some((h) => /^webhook-(id|timestamp)$/i.test(h.name));
        const mayAccept =
          (mode === 'valid' || mode === 'valid_among_garbage') && acceptable && id !== null && idS.trim() !== '' && idS.length <= 256 && !duplicatedSigned;

        const a = await rawRequest(port, buildRequest('/webhooks', headers.map(([k, v]) => [k, v.replace(/[\r\n]/g, '')]), body), 10_000);
        tally.runs++;
        tally.byStatus[String(a.status)] = (tally.byStatus[String(a.status)] ?? 0) + 1;
        if (a.status === null) tally.noResponse++;
        if (a.status !== null && a.status >= 500) tally.status500++;
        if (a.status !== null && a.status >= 200 && a.status < 300) {
          tally.accepted++;
          if (!mayAccept) {
            tally.acceptedForgeries++;
            forgeries.push(`${mode} id=${JSON.stringify(id)} ts=${JSON.stringify(ts)} extra=${JSON.stringify(extra.map((h) => h.name))}`);
          }
        }
        return a.status !== null && a.status < 500 && !(a.status >= 200 && a.status < 300 && !mayAccept);
      }),
      { numRuns: FUZZ_RUNS, seed, endOnFailure: true },
    );

    // Let the workers process whatever was accepted (hostile bodies included), then look at the prototypes.
    const q = (sql: string) => count(r.app.database.ingestSqlite, sql);
    await waitIdle(q, 15_000);
    // Processing reached them all, so the prototype checks below come after every fold.
    const notTaken = q('SELECT COUNT(*) FROM events WHERE rowid > (SELECT last_event_rowid FROM processing_cursor)');
    const health = await fetch(`${r.url}/healthz`);
    reportFigures('hostile-fuzz', {
      seed,
      runs: tally.runs,
      accepted: tally.accepted,
      accepted_forgeries: tally.acceptedForgeries,
      status_500: tally.status500,
      no_response: tally.noResponse,
      by_status: tally.byStatus,
      // Rows, not events of a stream: the fuzzer's inputs are not counted in the suite's totals.
      stored_rows: q('SELECT COUNT(*) FROM events'),
      quarantined: q('SELECT COUNT(*) FROM quarantine'),
      dead_jobs: q("SELECT COUNT(*) FROM jobs WHERE state = 'dead'"),
    });
    expect(forgeries).toEqual([]);
    expect(tally.status500).toBe(0);
    expect(tally.noResponse).toBe(0);
    expect(tally.accepted).toBeGreaterThan(FUZZ_RUNS / 10); // the oracle is not vacuous: authentic ones do get in
    expect(health.status).toBe(200);
    expect(notTaken).toBe(0);
    expect(r.logs.lines.filter((l) => l.msg === 'unhandled error')).toEqual([]);
    expect(polluted()).toBe(false);
    expect(protoSnapshot()).toEqual(before);
  });

  it('signed payloads with __proto__ / constructor.prototype keys (envelope, payload, candidate, fetched result) are stored byte-exact, processed and fanned out; ({}).polluted stays undefined in the receiver process', async () => {
    const secret = newSecret();
    registerSecret(secret);
    const hostile = JSON.parse('{"__proto__":{"polluted":"result"},"constructor":{"prototype":{"polluted":"result"}}}') as Record<string, unknown>;
    const stub = await startHiringStub({ extra: hostile });
    cleanups.push(() => stub.close());
    const sinkPath = join(dir, 'proto.ndjson');
    const configPath = join(dir, 'proto-config.json');
    writeFileSync(configPath, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: sinkPath }] }));
    const r = await startReceiver({ WEBHOOK_SECRET: secret, HIRING_API_URL: stub.url, HIRING_API_KEY: 'sk-fuzz0002.protoKey00000000000000', CONFIG_FILE: configPath });
    cleanups.push(async () => {
      // Saved after close(), so the shutdown's lines are scanned too.
      await r.close();
      saveLogLines('hostile-proto-inprocess', r.logs.raw);
    });
    const before = protoSnapshot();
    const p = `"__proto__":{"polluted":"yes","isAdmin":true},"constructor":{"prototype":{"polluted":"yes"}}`;
    const bodies = ['application.created', 'application.status_changed', 'interview.completed', 'insights.completed'].map((type) => {
      const appId = randomUUID();
      return `{"id":"evt_${randomUUID()}","event_type":"${type}","created_at":"${new Date().toISOString()}",${p},"payload":{${p},"previous_status":"applied","application":{"id":"${appId}","status":"screened",${p}},"candidate":{"first_name":"Proto",${p}},"interview":{"result":{${p},"is_eligible":true}},"insights":{${p},"is_eligible":true}}}`;
    });
    const agent = makeClient(4);
    cleanups.push(() => agent.destroy());
    for (const body of bodies) {
      const d = signDelivery(secret, body);
      const a = await post(agent, r.url, '/webhooks', d.headers, body);
      expect(a.status).toBe(200);
      expect(JSON.parse(a.body).outcome).toBe('accepted');
    }
    const q = (sql: string, ...params: unknown[]) => count(r.app.database.ingestSqlite, sql, ...params);
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline && new Set(sinkFileIds(sinkPath)).size < bodies.length) await sleep(100);
    const ids = bodies.map((b) => (JSON.parse(b) as { id: string }).id);
    const envelopeOf = (id: string) => r.app.database.ingestSqlite.prepare('SELECT envelope FROM events WHERE id = ?').pluck().get(id);
    const exactIds = ids.filter((id, i) => envelopeOf(id) === bodies[i]);
    const storedExact = exactIds.length;
    const inSink = new Set(sinkFileIds(sinkPath));
    reportFigures('hostile-proto', {
      events_sent: bodies.length,
      // Every one was answered 200 accepted (asserted as they were sent).
      acknowledged: bodies.length,
      stored: storedExact,
      processed: q("SELECT COUNT(*) FROM event_processing WHERE state = 'settled'"),
      delivered: inSink.size,
      api_reads: stub.calls.length,
      polluted: polluted(),
      // Not stored exactly as sent, or not in the file sink.
      lost: ids.length - exactIds.filter((id) => inSink.has(id)).length,
    });
    expect(storedExact).toBe(bodies.length);
    expect(q("SELECT COUNT(*) FROM event_processing WHERE state = 'settled'")).toBe(bodies.length);
    expect(new Set(sinkFileIds(sinkPath))).toEqual(new Set(ids));
    expect(stub.calls.length).toBe(2); // the interview and the insights results, each with __proto__ keys
    expect(q("SELECT COUNT(*) FROM jobs WHERE state = 'dead'")).toBe(0);
    expect(polluted()).toBe(false);
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
    expect(protoSnapshot()).toEqual(before);
  });

  it('a 50 MB body (declared, and chunked) is refused (413; a sender that keeps blasting may see a reset instead) and the connection closed early, without being buffered (MAX_BODY_BYTES 1 MiB: receiver RSS growth < 12 MB, client written < 12 MB)', async () => {
    const LIMIT = 1024 * 1024;
    const secret = newSecret();
    registerSecret(secret);
    const port = await freePort();
    const receiver = await startReceiverProcess('hostile-50mb', {
      WEBHOOK_SECRET: secret,
      HIRING_API_URL: 'http://127.0.0.1:9',
      HIRING_API_KEY: 'sk-fuzz0003.bigBodyKey0000000000000',
      DATABASE_PATH: join(dir, 'big.db'),
      PORT: String(port),
      WORKER_CONCURRENCY: '0',
      // The default, said here because the bounds below are set from it.
      MAX_BODY_BYTES: String(LIMIT),
    });
    cleanups.push(() => stopReceiverProcess(receiver));
    // Warm the process up so the baseline is its steady state.
    const agent = makeClient(4);
    cleanups.push(() => agent.destroy());
    for (let i = 0; i < 50; i++) await deliver(agent, receiver.url, secret, makeEvent('application.created', i, 'big-warm'));
    await sleep(300);

    const TOTAL = 50 * 1024 * 1024;

    const send = (chunked: boolean, pauseMs: number) =>
      new Promise<{ status: number | null; written: number; closedEarly: boolean; ms: number }>((resolve) => {
        const started = Date.now();
        const sock = connect(port, '127.0.0.1');
        const body = Buffer.alloc(64 * 1024, 0x61);
        const d = signDelivery(secret, 'x');
        const head = [
          'POST /webhooks HTTP/1.1',
          'Host: 127.0.0.1',
          ...Object.entries(d.headers).map(([k, v]) => `${k}: ${v}`),
          chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${TOTAL}`,
          '',
          '',
        ].join('\r\n');
        let written = 0;
        let response = '';
        let ended = false;
        const finish = () => {
          if (ended) return;
          ended = true;
          clearTimeout(timer);
          sock.destroy();
          const m = /^HTTP\/1\.1 (\d{3})/.exec(response);
          resolve({ status: m ? Number(m[1]) : null, written, closedEarly: written < TOTAL, ms: Date.now() - started });
        };
        const timer = setTimeout(finish, 30_000);
        sock.on('data', (c: Buffer) => (response += c.toString('latin1')));
        sock.on('error', finish);
        sock.on('close', finish);
        sock.write(head);
        const pump = (): void => {
          while (!ended && written < TOTAL) {
            const chunk = chunked ? Buffer.concat([Buffer.from(`${body.length.toString(16)}\r\n`), body, Buffer.from('\r\n')]) : body;
            written += body.length;
            if (!sock.write(chunk)) return void sock.once('drain', pump);
          }
          if (!ended && chunked) sock.write('0\r\n\r\n');
        };
        setTimeout(pump, pauseMs);
      });

    // A sender that waits for an early answer (as Expect: 100-continue clients do) reads the 413;
    // one that blasts on may see the connection reset instead (the server closes with unread
    // bytes in flight, so the kernel answers them with RST): refused either way, never stored.
    const results: Record<string, unknown>[] = [];
    for (const [mode, chunked, pauseMs] of [['declared, waits', false, 200], ['declared, blasts', false, 0], ['chunked, blasts', true, 0]] as const) {
      const base = rssOf(receiver.pid);
      let peak = base;
      const sampler = setInterval(() => {
        try {
          peak = Math.max(peak, rssOf(receiver.pid));
        } catch {
          // exited: the assertions below catch it
        }
      }, 5);
      const res = await send(chunked, pauseMs);
      await sleep(200);
      clearInterval(sampler);
      const growthMb = (peak - base) / 1024 / 1024;
      results.push({ mode, status: res.status, client_wrote_mb: +(res.written / 1048576).toFixed(1), closed_early: res.closedEarly, ms: res.ms, rss_growth_mb: +growthMb.toFixed(1) });
      if (pauseMs > 0) expect(res.status).toBe(413);
      else expect([413, null]).toContain(res.status);
      expect(res.closedEarly).toBe(true);
      // Bounded by the limit, not by the body: what the receiver read (at most LIMIT) plus what the
      // loopback's socket buffers took (a few MB). A receiver that buffered 16 MB before refusing
      // measured 21.6 MB written and +16.3 MB RSS here; this one 4.3 MB and +2.7 MB, once +11.6 MB
      // on a loaded host (a heap grown by garbage not yet collected). The RSS bound sits between
      // those: 12 MB, below the 16 MB receiver and far below one that buffers the whole 50 MB.
      expect(res.written).toBeLessThan(12 * 1024 * 1024);
      expect(growthMb).toBeLessThan(12);
    }
    // Still serving.
    expect((await deliver(agent, receiver.url, secret, makeEvent('application.created', 999, 'big-after'))).status).toBe(200);
    expect(receiver.proc.exitCode).toBeNull();
    reportFigures('hostile-50mb', { results });
  });

  it('a client trickling one byte per second is cut off within REQUEST_TIMEOUT_MS (2 s) + 2 s, while other clients are served meanwhile', async () => {
    const secret = newSecret();
    registerSecret(secret);
    const port = await freePort();
    const REQUEST_TIMEOUT_MS = 2000;
    const receiver = await startReceiverProcess('hostile-slowloris', {
      WEBHOOK_SECRET: secret,
      HIRING_API_URL: 'http://127.0.0.1:9',
      HIRING_API_KEY: 'sk-fuzz0004.slowClientKey00000000000',
      DATABASE_PATH: join(dir, 'slow.db'),
      PORT: String(port),
      REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      WORKER_CONCURRENCY: '0',
    });
    cleanups.push(() => stopReceiverProcess(receiver));
    const agent = makeClient(4);
    cleanups.push(() => agent.destroy());
    const MAX_TRICKLE_S = 40; // bounded: the test ends even if the server never cuts it off

    const trickle = new Promise<{ cutAfterMs: number | null; bytesSent: number; response: string }>((resolve) => {
      const body = JSON.stringify(makeEvent('application.created', 0, 'slow'));
      const d = signDelivery(secret, body);
      const sock = connect(port, '127.0.0.1');
      const started = Date.now();
      let sent = 0;
      let response = '';
      let ended = false;
      let timer: NodeJS.Timeout;
      const finish = (cut: boolean) => {
        if (ended) return;
        ended = true;
        clearInterval(timer);
        sock.destroy();
        resolve({ cutAfterMs: cut ? Date.now() - started : null, bytesSent: sent, response });
      };
      sock.on('data', (c: Buffer) => (response += c.toString('latin1')));
      sock.on('close', () => finish(true));
      sock.on('error', () => finish(true));
      sock.write(
        ['POST /webhooks HTTP/1.1', 'Host: 127.0.0.1', ...Object.entries(d.headers).map(([k, v]) => `${k}: ${v}`), `Content-Length: ${Buffer.byteLength(body)}`, '', ''].join('\r\n'),
      );
      timer = setInterval(() => {
        if (sent >= MAX_TRICKLE_S) return finish(false);
        sock.write(body.slice(sent, sent + 1));
        sent++;
      }, 1000);
    });

    // Meanwhile, other senders are served as usual.
    const others: { status: number; ms: number }[] = [];
    let trickleDone = false;
    void trickle.then(() => (trickleDone = true));
    for (let i = 0; i < 200 && !trickleDone; i++) {
      const a = await deliver(agent, receiver.url, secret, makeEvent('application.created', i + 1, 'slow-others'));
      others.push({ status: a.status, ms: a.ms });
      await sleep(100);
    }
    const t = await trickle;
    reportFigures('hostile-slow-client', {
      request_timeout_ms: REQUEST_TIMEOUT_MS,
      cut_after_ms: t.cutAfterMs,
      bytes_trickled: t.bytesSent,
      answer: t.response.split('\r\n')[0] || null,
      others_served: others.filter((o) => o.status === 200).length,
      others_max_ms: Math.round(Math.max(...others.map((o) => o.ms))),
    });
    expect(others.length).toBeGreaterThan(5);
    expect(others.every((o) => o.status === 200 && o.ms < 500)).toBe(true);
    expect(t.cutAfterMs).not.toBeNull();
    // Told why, as README says (Node's answer, written by the parser-refusal listener since it exists).
    expect(t.response.split('\r\n')[0]).toBe('HTTP/1.1 408 Request Timeout');
    // Node checks request deadlines every `connectionsCheckingInterval` (30 s unless the server sets it):
    // the cut must come within a second or two of REQUEST_TIMEOUT_MS, not 30 s later.
    expect(t.cutAfterMs!).toBeLessThan(REQUEST_TIMEOUT_MS + 2000);
    expect(receiver.proc.exitCode).toBeNull();
  });
});
