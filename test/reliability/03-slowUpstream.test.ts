import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/childServer.js';
import { newSecret, signDelivery } from '../helpers/signing.js';
import { count, withDb } from './helpers/db.js';
import { deliver, makeClient, makeEvent, post, type Answer } from './helpers/events.js';
import { startHiringStub } from './helpers/hiringStub.js';
import { startReceiverProcess, stopReceiverProcess } from './helpers/receiverProcess.js';
import { percentile, registerSecret, registerSensitive, reportFigures, sleep, workspace } from './helpers/run.js';

const UPSTREAM_DELAY_MS = 8000;
const RATE_PER_S = 100;
const STREAM = 300; // 3 s at 100/s, well inside the 8 s stall

const { dir, cleanups } = workspace('reliability-slow-');

describe('slow upstream', () => {
  it(`scoring GETs answered after ${UPSTREAM_DELAY_MS / 1000} s hold every worker; acknowledgement p99 of ${STREAM} deliveries at ${RATE_PER_S}/s meanwhile stays under 100 ms`, async () => {
    const secret = newSecret();
    const apiKey = 'sk-slow0001.slowUpstreamKey000000000';
    registerSecret(secret);
    registerSensitive('api_key', apiKey);
    const stub = await startHiringStub({ delayMs: UPSTREAM_DELAY_MS });
    cleanups.push(() => stub.close());
    const dbPath = join(dir, 'receiver.db');
    const receiver = await startReceiverProcess('slow-upstream', {
      WEBHOOK_SECRET: secret,
      HIRING_API_URL: stub.url,
      HIRING_API_KEY: apiKey,
      DATABASE_PATH: dbPath,
      PORT: String(await freePort()),
      WORKER_CONCURRENCY: '4',
    });
    cleanups.push(() => stopReceiverProcess(receiver));
    const agent = makeClient(64);
    cleanups.push(() => agent.destroy());

    // Warm-up (JIT, connections, first pages of the file), not measured.
    for (let i = 0; i < 200; i += 10) {
      await Promise.all(Array.from({ length: 10 }, (_, j) => deliver(agent, receiver.url, secret, makeEvent('application.created', i + j, 'slow-warm'))));
    }
    // Eight interviews: every worker (4) ends up waiting on a scoring GET.
    for (let i = 0; i < 8; i++) expect((await deliver(agent, receiver.url, secret, makeEvent('interview.completed', i, 'slow'))).status).toBe(200);
    const interviewsAckedAt = Date.now();
    const stallDeadline = interviewsAckedAt + 10_000;
    while (stub.open < 4 && Date.now() < stallDeadline) await sleep(20);
    expect(stub.open).toBe(4);
    // The four reads start together once the deliveries stop, not one at a time behind a read
    // the service answers 8 s later: the stream below must fit inside the stall.
    const stallReadyMs = Date.now() - interviewsAckedAt;
    expect(stub.firstAnsweredAt).toBeNull();

    // Open loop: each delivery is sent on its schedule and timed from it, so a stall is not hidden.
    // Signed beforehand, so the sender's own work is not in the figure.
    const stream = Array.from({ length: STREAM }, (_, i) => {
      const e = makeEvent('application.created', i, 'slow-stream');
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
    const streamEndedAt = Date.now();
    const stillStuck = stub.open;
    const firstAnswer = stub.firstAnsweredAt;
    const lat = answers.map((a) => a.lateMs);
    const stored = withDb(dbPath, (db) => answers.filter((a) => count(db, 'SELECT COUNT(*) FROM events WHERE id = ?', a.id) === 1).length);
    reportFigures('slow-upstream', {
      deliveries: STREAM,
      acknowledged: answers.filter((a) => a.status === 200).length,
      stored,
      p50_ms: +percentile(lat, 50).toFixed(2),
      p99_ms: +percentile(lat, 99).toFixed(2),
      max_ms: +Math.max(...lat).toFixed(2),
      over_100ms: lat.filter((l) => l >= 100).length,
      upstream_requests_open_at_end: stillStuck,
      stall_ready_ms: stallReadyMs,
      lost: answers.filter((a) => a.status === 200).length - stored,
    });

    expect(answers.every((a) => a.status === 200)).toBe(true);
    expect(stored).toBe(STREAM);
    // The workers were stuck for the whole measurement.
    expect(stillStuck).toBe(4);
    expect(firstAnswer === null || firstAnswer > streamEndedAt).toBe(true);
    expect(percentile(lat, 99)).toBeLessThan(100);
  });
});
