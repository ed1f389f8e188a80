import { writeFileSync } from 'node:fs';
import { connect } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { startReceiver, type TestReceiver } from '../helpers/receiver.js';
import { newSecret, signDelivery } from '../helpers/signing.js';
import { count, sinkFileIds, stuckJobs } from './helpers/db.js';
import { deliver, makeClient, makeEvent, type Answer } from './helpers/events.js';
import { registerSecret, reportFigures, saveLogLines, sleep, workspace } from './helpers/run.js';

const STREAM = 150;
const WARM = 60;
/** Deliveries pipelined on one connection while the disk has room for about two of them. */
const BURST = 8;

const { dir, cleanups } = workspace('reliability-full-');

/**
 * Signed deliveries pipelined on one keep-alive connection, written at once: the receiver reads
 * them together, so they join one group commit. Their answers in order (bounded by `timeoutMs`).
 */
function pipelined(port: number, secret: string, envelopes: Record<string, unknown>[], timeoutMs = 15_000): Promise<Answer[]> {
  const started = performance.now();
  const request = Buffer.concat(
    envelopes.map((e) => {
      const d = signDelivery(secret, JSON.stringify(e));
      const head = ['POST /webhooks HTTP/1.1', 'Host: 127.0.0.1', ...Object.entries(d.headers).map(([k, v]) => `${k}: ${v}`), `Content-Length: ${Buffer.byteLength(d.body)}`, '', ''];
      return Buffer.from(head.join('\r\n') + d.body);
    }),
  );
  return new Promise((resolve, reject) => {
    const sock = connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const answers: Answer[] = [];
    const end = (err?: Error) => {
      clearTimeout(timer);
      sock.destroy();
      if (answers.length === envelopes.length) resolve(answers);
      else reject(err ?? new Error(`${answers.length} of ${envelopes.length} pipelined deliveries answered`));
    };
    const timer = setTimeout(() => end(new Error(`pipelined deliveries not all answered within ${timeoutMs} ms`)), timeoutMs);
    sock.on('data', (d: Buffer) => {
      buf = Buffer.concat([buf, d]);
      for (;;) {
        const head = buf.indexOf('\r\n\r\n');
        if (head < 0) return;
        const headText = buf.subarray(0, head).toString('latin1');
        const length = Number(/\r\ncontent-length: (\d+)/i.exec(headText)?.[1] ?? NaN);
        if (!Number.isFinite(length) || buf.length < head + 4 + length) return;
        answers.push({ status: Number(/^HTTP\/1\.1 (\d{3})/.exec(headText)?.[1] ?? 0), body: buf.subarray(head + 4, head + 4 + length).toString('utf8'), ms: performance.now() - started });
        buf = buf.subarray(head + 4 + length);
        if (answers.length === envelopes.length) return end();
      }
    });
    sock.on('error', end);
    sock.on('close', () => end());
    sock.write(request);
  });
}

describe('disk full', () => {
  it(`max_page_count pinned on both of the receiver's connections, in the middle of a batch of ${BURST} and under ${STREAM} concurrent deliveries: 503, nothing half-written, the process keeps serving, recovery after`, async () => {
    const secret = newSecret();
    registerSecret(secret);
    const sinkPath = join(dir, 'archive.ndjson');
    const configPath = join(dir, 'config.json');
    writeFileSync(configPath, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: sinkPath }] }));
    // In-process: max_page_count is per connection, so it is set on the receiver's own two
    // connections (ingest and queue), as a full disk would hit both.
    const r: TestReceiver = await startReceiver(
      { WEBHOOK_SECRET: secret, CONFIG_FILE: configPath, WORKER_CONCURRENCY: '4', WRITE_TIMEOUT_MS: '1000' },
      { leaseMs: 2000, sinks: { pollIntervalMs: 50 } },
    );
    cleanups.push(async () => {
      // Saved after close(), so the shutdown's lines are scanned too.
      await r.close();
      saveLogLines('disk-full-inprocess', r.logs.raw);
    });
    const { ingestSqlite, sqlite } = r.app.database;
    const q = (sql: string, ...p: unknown[]) => count(ingestSqlite, sql, ...p);
    const agent = makeClient(16);
    cleanups.push(() => agent.destroy());
    const padded = (i: number, tag: string): Record<string, unknown> => ({ ...makeEvent('application.created', i, tag), padding: 'p'.repeat(20_000) });

    // Stored just before the disk fills, so the workers are mid-way through them when it does.
    const pagesBeforeWarm = ingestSqlite.pragma('page_count', { simple: true }) as number;
    const warmEvents = Array.from({ length: WARM }, (_, i) => padded(i, 'full-warm'));
    const warm = await Promise.all(warmEvents.map((e) => deliver(agent, r.url, secret, e)));
    expect(warm.every((a) => a.status === 200)).toBe(true);

    // The disk fills in the middle of a group commit: BURST deliveries read together (one batch)
    // with room left on the ingest connection for about two of them (pages per event measured over
    // the warm-up, the workers' rows included). A batch is one transaction, so it fails whole: a
    // batch written item by item would leave its first events stored behind their 503.
    const pages = ingestSqlite.pragma('page_count', { simple: true }) as number;
    const pagesPerEvent = Math.ceil((pages - pagesBeforeWarm) / WARM);
    ingestSqlite.pragma(`max_page_count = ${pages + 2 * pagesPerEvent}`);
    sqlite.pragma(`max_page_count = ${pages}`);
    const burstEvents = Array.from({ length: BURST }, (_, i) => padded(i, 'full-burst'));
    const burst = await pipelined(Number(new URL(r.url).port), secret, burstEvents);
    const burstStored = burstEvents.filter((e) => q('SELECT COUNT(*) FROM events WHERE id = ?', e.id) > 0).length;
    // Then no room at all, on both connections, under a stream of concurrent deliveries.
    const fullPages = ingestSqlite.pragma('page_count', { simple: true }) as number;
    ingestSqlite.pragma(`max_page_count = ${fullPages}`);
    sqlite.pragma(`max_page_count = ${fullPages}`);
    const events = [...burstEvents, ...Array.from({ length: STREAM }, (_, i) => padded(i, 'full'))];
    const answers: Answer[] = [...burst, ...new Array<Answer>(STREAM)];
    let next = BURST;
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (next < events.length) {
          const i = next++;
          answers[i] = await deliver(agent, r.url, secret, events[i]!);
        }
      }),
    );
    // Let the workers run into the full disk too (claims, completions, sink records).
    await sleep(1500);

    const okIds = events.filter((_, i) => answers[i]!.status === 200).map((e) => e.id as string);
    const refusedIdx = answers.map((a, i) => (a.status === 503 ? i : -1)).filter((i) => i >= 0);
    const halfWritten = () => ({
      // An event processing has taken (at or before its cursor) was folded, or handed to a process_event job.
      eventsSkipped: q(
        `SELECT COUNT(*) FROM events e WHERE e.rowid <= (SELECT last_event_rowid FROM processing_cursor)
           AND NOT EXISTS (SELECT 1 FROM event_processing p WHERE p.event_id = e.id)
           AND NOT EXISTS (SELECT 1 FROM jobs j WHERE j.event_id = e.id AND j.kind = 'process_event')`,
      ),
      jobsWithoutEvent: q('SELECT COUNT(*) FROM jobs j WHERE j.event_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM events e WHERE e.id = j.event_id)'),
      integrity: ingestSqlite.pragma('integrity_check', { simple: true }),
    });
    const whileFull = halfWritten();
    const refusedStored = refusedIdx.filter((i) => q('SELECT COUNT(*) FROM events WHERE id = ?', events[i]!.id) > 0).length;
    const okStored = okIds.filter((id) => q('SELECT COUNT(*) FROM events WHERE id = ?', id) === 1).length;
    const metrics = await (await fetch(`${r.url}/metrics`)).text();
    const workerErrors = r.logs.lines.filter((l) => /SQLITE_FULL|database or disk is full/.test(String(l.err ?? '')) && l.msg !== 'ingest transaction failed').length;
    const healthy = (await fetch(`${r.url}/healthz`)).status;

    // Recovery: space again; the refused deliveries are redelivered and everything is processed and fanned out.
    ingestSqlite.pragma('max_page_count = 1073741823');
    sqlite.pragma('max_page_count = 1073741823');
    const redelivered = await Promise.all(refusedIdx.map((i) => deliver(agent, r.url, secret, events[i]!)));
    const all = [...warm, ...events];
    const deadline = Date.now() + 30_000;
    let inFile = 0;
    let open = 1;
    while (Date.now() < deadline) {
      inFile = new Set(sinkFileIds(sinkPath)).size;
      open = q("SELECT COUNT(*) FROM jobs WHERE state IN ('pending', 'running')");
      if (inFile >= all.length && open === 0) break;
      await sleep(200);
    }
    const after = halfWritten();
    const settled = q("SELECT COUNT(*) FROM event_processing WHERE state = 'settled'");
    const stuck = stuckJobs(ingestSqlite, new Date().toISOString());
    // Events: the warm-up's and the stream's; acknowledged at the first try or when redelivered.
    const allIds = [...warmEvents, ...events].map((e) => e.id as string);
    const ackedIds = [
      ...warm.map((a, i) => (a.status === 200 ? (warmEvents[i]!.id as string) : null)),
      ...okIds,
      ...refusedIdx.map((i, k) => (redelivered[k]!.status === 200 ? (events[i]!.id as string) : null)),
    ].filter((id): id is string => id !== null);
    const ackedStored = ackedIds.filter((id) => q('SELECT COUNT(*) FROM events WHERE id = ?', id) === 1);
    const fileIdSet = new Set(sinkFileIds(sinkPath));
    reportFigures('disk-full', {
      events_sent: allIds.length,
      deliveries: WARM + BURST + STREAM + redelivered.length,
      acknowledged: ackedIds.length,
      stored: ackedStored.length,
      delivered: ackedIds.filter((id) => fileIdSet.has(id)).length,
      burst: { pages_per_event: pagesPerEvent, statuses: burst.map((a) => a.status), stored: burstStored },
      acknowledged_while_full: okIds.length,
      refused_503: refusedIdx.length,
      other: answers.filter((a) => a.status !== 200 && a.status !== 503).length,
      stored_while_full: okStored,
      refused_but_stored: refusedStored,
      recovered: redelivered.filter((a) => a.status === 200).length,
      processed: settled,
      lost: ackedIds.length - ackedStored.filter((id) => fileIdSet.has(id)).length,
      worker_errors_while_full: workerErrors,
      while_full: whileFull,
      stuck,
    });

    expect(answers.filter((a) => a.status !== 200 && a.status !== 503)).toEqual([]);
    expect(refusedIdx.length).toBeGreaterThan(STREAM / 2);
    expect(answers.filter((a) => a.status === 503).every((a) => JSON.parse(a.body).error === 'storage_unavailable')).toBe(true);
    expect(metrics).toMatch(/receiver_storage_errors_total\{reason="SQLITE_FULL"\} [1-9]/);
    expect(healthy).toBe(200);
    // Nothing half-written: no event skipped by processing, every job has its event; refused ones left nothing.
    expect(whileFull).toEqual({ eventsSkipped: 0, jobsWithoutEvent: 0, integrity: 'ok' });
    // The burst met the full disk (not vacuous), and none of its refused deliveries was stored (refusedStored).
    expect(burst.filter((a) => a.status === 503).length).toBeGreaterThan(BURST / 2);
    expect(refusedStored).toBe(0);
    expect(okStored).toBe(okIds.length);
    // Recovery: everything refused goes through; everything is processed and in the file sink.
    expect(redelivered.every((a) => a.status === 200 && JSON.parse(a.body).outcome === 'accepted')).toBe(true);
    expect(after).toEqual({ eventsSkipped: 0, jobsWithoutEvent: 0, integrity: 'ok' });
    expect(q('SELECT COUNT(*) FROM events')).toBe(all.length);
    expect(settled).toBe(all.length);
    expect(inFile).toBe(all.length);
    expect(stuck).toMatchObject({ runningExpired: 0, pendingDue: 0, dead: 0, eventsNotTaken: 0 });
  });
});
