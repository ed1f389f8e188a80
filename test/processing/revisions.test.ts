import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { createFetchDeadLetterHandler } from '../../src/handlers/fetchResult.js';
import { DEFAULT_PROCESSING, type ProcessingContext } from '../../src/handlers/ProcessingContext.js';
import { enqueue, type ClaimedJob } from '../../src/queue/JobQueue.js';
import { messageIdFor } from '../../src/sinks/messageId.js';
import { freePort } from '../helpers/testPort.js';
import { ACME_KEY, startPair, type Pair } from '../helpers/pair.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret, postSigned } from '../helpers/signing.js';

// Revisions of a message (README "The message", `revision`): when they are sent, and when not.
// Written from a review's reproductions of defects in the first version of revisions.

let pair: Pair | undefined;
const cleanups: (() => void)[] = [];
afterEach(async () => {
  await pair?.close();
  pair = undefined;
  for (const c of cleanups.splice(0)) c();
});

/** A pair whose receiver writes every message to a file sink; `interviews()` reads the interview.completed ones. */
async function withArchive(extraSinks: Record<string, unknown>[] = []) {
  const { dir, cleanup } = tempDir('revisions-');
  cleanups.push(cleanup);
  const file = join(dir, 'config.json');
  const out = join(dir, 'out.ndjson');
  writeFileSync(file, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: out }, ...extraSinks] }));
  pair = await startPair({ env: { CONFIG_FILE: file } });
  const interviews = () =>
    readFileSync(out, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>).filter((m) => m.event_type === 'interview.completed');
  return { p: pair, interviews, dir };
}

const deadLetterTheRead = async (p: Pair) => {
  const c = p.sandbox.control;
  const app = c.createApplication({ jobId: c.createJob({}).id });
  c.injectFault({ target: 'interview', applicationId: app.id, status: 400, times: 5 });
  c.completeInterview(app.id);
  await p.settle();
  return app;
};

/** An application whose interview completed, its event read and sent to the sinks. */
const interviewSent = async (p: Pair) => {
  const c = p.sandbox.control;
  const app = c.createApplication({ jobId: c.createJob({}).id });
  c.completeInterview(app.id);
  await p.settle();
  await p.receiver.app.fanOut.runUntilIdle();
  return { c, app };
};

const replayThroughProcessing = (p: Pair, eventId: string) =>
  enqueue(p.receiver.app.database.db, { kind: 'process_event', payload: { event_id: eventId, refetch: true }, eventId, source: 'default' }, p.clock.now());

/** One application's deletion and the events that give it an external_id, delivered signed over HTTP. */
function deletionFixture(p: Pair, dir: string) {
  const id = 'b2c4e6a8-0000-4000-8000-00000000d001';
  const at = (m: number) => new Date(Date.parse('2026-11-02T08:00:00Z') + m * 60_000).toISOString();
  const cand = { first_name: 'Ada', last_name: 'Lovelace', email: 'ada@example.com' };
  const job = { id: 'job-9', title: 'Engineer' };
  const sqlite = p.receiver.app.database.ingestSqlite;
  return {
    at,
    application: (status: string) => ({ application: { id, external_id: 'ats-77', status, created_at: at(0) }, candidate: cand, job }),
    snapshot: { id, status: 'screened', created_at: at(0), candidate: cand, job },
    deliver: async (eventId: string, minute: number, eventType: string, payload: Record<string, unknown>) => {
      const body = JSON.stringify({ id: eventId, created_at: at(minute), webhook_id: 'wh_1', event_type: eventType, payload });
      expect((await postSigned(p.receiver.url, p.secret, body, { timestampSeconds: Math.floor(p.clock.now() / 1000) })).status).toBe(200);
      await p.settle();
      await p.receiver.app.fanOut.runUntilIdle();
    },
    deletions: () =>
      readFileSync(join(dir, 'out.ndjson'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>)
        .filter((m) => m.event_type === 'job_application.deleted').map((m) => [m.revision, m.external_id]),
    /** As an event settled before deletions kept a digest left its row. */
    forgetDigest: (eventId: string) => sqlite.prepare('UPDATE event_processing SET result_digest = NULL WHERE event_id = ?').run(eventId),
    digestOf: (eventId: string) => (sqlite.prepare('SELECT result_digest FROM event_processing WHERE event_id = ?').get(eventId) as { result_digest: string | null }).result_digest,
  };
}

describe('message revisions', () => {
  it('revision 2 is sent even when it is made while revision 1 is still in flight to an http sink', async () => {
    const received: { revision: number; state: string }[] = [];
    let release: () => void = () => {};
    let arrived: () => void = () => {};
    const firstArrived = new Promise<void>((r) => (arrived = r));
    const consumer = createServer((req: IncomingMessage, res: ServerResponse) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        const m = JSON.parse(body);
        if (m.event_type !== 'interview.completed') return void res.writeHead(200).end();
        received.push({ revision: m.revision, state: m.result?.state });
        if (received.length === 1) {
          release = () => res.writeHead(200).end();
          arrived();
        } else res.writeHead(200).end();
      });
    });
    await new Promise<void>((r) => consumer.listen(0, '127.0.0.1', () => r()));
    cleanups.push(() => consumer.close());
    const url = `http://127.0.0.1:${(consumer.address() as AddressInfo).port}/hook`;
    const { p } = await withArchive([{ name: 'crm', type: 'http', url, secret: newSecret() }]);
    await deadLetterTheRead(p);
    const sending = p.receiver.app.fanOut.runUntilIdle(); // revision 1 (given_up); the consumer holds it
    await firstArrived;
    p.sandbox.control.clearFaults();
    expect(await p.receiver.app.queue.retryDeadLetters({ kind: 'fetch_result' })).toBe(1);
    p.clock.advance(30_000);
    await p.settle(); // the result is ready now: revision 2
    release();
    await sending;
    await p.receiver.app.fanOut.runUntilIdle();
    expect(received).toEqual([{ revision: 1, state: 'given_up' }, { revision: 2, state: 'ready' }]);
    const db = p.receiver.app.database.ingestSqlite;
    expect(db.prepare("SELECT state FROM deliveries WHERE sink = 'crm' AND event_id IN (SELECT id FROM events WHERE event_type = 'interview.completed')").get()).toEqual({ state: 'delivered' });
  });

  it('a dead letter retried after RESULT_GIVE_UP_HOURS still asks the service, and sends what it answers', async () => {
    const { p, interviews } = await withArchive();
    await deadLetterTheRead(p);
    await p.receiver.app.fanOut.runUntilIdle();
    p.clock.advance(8 * 24 * 3_600_000); // the operator comes back 8 days later
    p.sandbox.control.clearFaults();
    const before = p.calls.length;
    expect(await p.receiver.app.queue.retryDeadLetters({ kind: 'fetch_result' })).toBe(1);
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    expect(p.calls.length).toBeGreaterThan(before);
    expect(interviews().map((m) => [m.revision, m.result.state])).toEqual([[1, 'given_up'], [2, 'ready']]);
  });

  it.each(['dead-letter retry', 'replay'])('a %s 8 days after the event (past RESULT_GIVE_UP_HOURS) answered "processing" polls on: its give-up window starts when the operator asked', async (how) => {
    const { p } = await withArchive();
    const c = p.sandbox.control;
    const db = p.receiver.app.database.ingestSqlite;
    let app: { id: string };
    if (how === 'replay') {
      app = c.createApplication({ jobId: c.createJob({}).id });
      c.completeInterview(app.id);
      await p.settle();
    } else {
      app = await deadLetterTheRead(p);
    }
    p.clock.advance(8 * 24 * 3_600_000);
    c.clearFaults();
    c.injectFault({ target: 'interview', applicationId: app.id, status: 200, times: 1, body: { status: 'processing', reason: null, result: null } });
    if (how === 'replay') {
      const { id } = db.prepare("SELECT id FROM events WHERE event_type = 'interview.completed'").get() as { id: string };
      await replayThroughProcessing(p, id);
    } else {
      expect(await p.receiver.app.queue.retryDeadLetters({ kind: 'fetch_result' })).toBe(1);
    }
    await p.settle();
    const state = () => (db.prepare('SELECT state FROM interview_results WHERE application_id = ?').get(app.id) as { state: string }).state;
    expect(state()).toBe('processing');
    p.clock.advance(60_000);
    await p.settle();
    expect(state()).toBe('ready');
  });

  it('a replay whose read passes through "processing" and ends with the same result sends nothing', async () => {
    const { p, interviews } = await withArchive();
    const { c, app } = await interviewSent(p);
    c.injectFault({ target: 'interview', applicationId: app.id, status: 200, times: 1, body: { status: 'processing', reason: null, result: null } });
    await replayThroughProcessing(p, interviews()[0]!.id as string);
    for (let i = 0; i < 4; i++) {
      p.clock.advance(60_000);
      await p.settle();
    }
    await p.receiver.app.fanOut.runUntilIdle();
    expect(p.calls.filter((x) => x.path.endsWith('/interview')).length).toBeGreaterThanOrEqual(3);
    expect(interviews().map((m) => m.revision)).toEqual([1]);
  });

  it('a replay of an event whose result a later event changed sends it again as revision 2', async () => {
    const { p, interviews } = await withArchive();
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id, { eligible: true });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const first = interviews()[0]!;
    p.clock.advance(60_000);
    c.completeInterview(app.id, { eligible: false });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    await replayThroughProcessing(p, first.id as string);
    p.clock.advance(60_000);
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const ofFirst = interviews().filter((m) => m.id === first.id);
    expect(ofFirst.map((m) => [m.revision, m.result.data?.is_eligible])).toEqual([[1, true], [2, false]]);
  });

  it.each(['dead-letter retry', 'replay'])(
    'a %s of an event whose read was dead-lettered asks the service again, even when a later event of the same result has read it since',
    async (how) => {
      const { p, interviews } = await withArchive();
      const c = p.sandbox.control;
      const db = p.receiver.app.database.ingestSqlite;
      const app = await deadLetterTheRead(p); // event A: its read dead-lettered, given_up
      await p.receiver.app.fanOut.runUntilIdle();
      const [a] = interviews();
      c.clearFaults();
      // Event B of the same application: its read succeeds, after A arrived.
      p.clock.advance(60_000);
      c.completeInterview(app.id);
      await p.settle();
      await p.receiver.app.fanOut.runUntilIdle();
      const stored = () => JSON.parse((db.prepare('SELECT data FROM interview_results WHERE application_id = ?').get(app.id) as { data: string }).data) as Record<string, unknown>;
      const read = stored();
      expect(interviews().map((m) => [m.id === a!.id ? 'A' : 'B', m.revision, m.result.state])).toEqual([['A', 1, 'given_up'], ['B', 1, 'ready']]);
      // The service's result changes since (a re-score, its event not here yet).
      const rescored = { ...read, overall_score: read.overall_score === 1.5 ? 2.5 : 1.5 };
      c.injectFault({ target: 'interview', applicationId: app.id, status: 200, times: 3, body: rescored });
      p.clock.advance(60_000);
      const before = p.calls.length;
      if (how === 'replay') await replayThroughProcessing(p, a!.id as string);
      else expect(await p.receiver.app.queue.retryDeadLetters({ kind: 'fetch_result' })).toBe(1);
      await p.settle();
      await p.receiver.app.fanOut.runUntilIdle();
      expect(p.calls.slice(before).map((x) => [x.path, x.status])).toEqual([[`/api/v2/applications/${app.id}/interview`, 200]]);
      expect(stored().overall_score).toBe(rescored.overall_score);
      const ofA = interviews().filter((m) => m.id === a!.id);
      expect(ofA.map((m) => [m.revision, m.result.state, m.result.data?.overall_score ?? null])).toEqual([[1, 'given_up', null], [2, 'ready', rescored.overall_score]]);
    },
  );

  it('a replay whose read gets the result clears the dead letter of the read it replaced: the dead-letter alert ends, and no later `dead-letters retry --all` reads it again', async () => {
    const { p, interviews } = await withArchive();
    const db = p.receiver.app.database.ingestSqlite;
    const dead = () => db.prepare("SELECT kind, event_id FROM jobs WHERE state = 'dead' ORDER BY id").all();
    await deadLetterTheRead(p);
    await deadLetterTheRead(p); // another application's read: its dead letter stays
    await p.receiver.app.fanOut.runUntilIdle();
    const [a, b] = interviews();
    expect(dead()).toEqual([{ kind: 'fetch_result', event_id: a!.id }, { kind: 'fetch_result', event_id: b!.id }]);
    p.sandbox.control.clearFaults();
    // What `status` says of a given_up result: read it again with `replay`.
    await replayThroughProcessing(p, a!.id as string);
    p.clock.advance(60_000);
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    expect(interviews().filter((m) => m.id === a!.id).map((m) => [m.revision, m.result.state])).toEqual([[1, 'given_up'], [2, 'ready']]);
    expect(dead()).toEqual([{ kind: 'fetch_result', event_id: b!.id }]);
  });

  it('a deletion sent before its application was known is sent again with the external_id once the creation arrives', async () => {
    const { p, dir } = await withArchive();
    const { deliver, deletions, application, snapshot, at } = deletionFixture(p, dir);
    // Deliveries are unordered (spec 6.1): the deletion (its snapshot has no external_id, 6.4)
    // arrives first; the creation's delivery, retried, hours later.
    await deliver('evt_del', 30, 'job_application.deleted', snapshot);
    expect(deletions()).toEqual([[1, null]]);
    p.clock.advance(3 * 3_600_000);
    await deliver('evt_created', 0, 'application.created', application('applied'));
    await deliver('evt_screened', 10, 'application.status_changed', { ...application('screened'), previous_status: 'applied' });
    // Sent again, as revision 2, with the correlation id; the status change changes nothing of it.
    expect(deletions()).toEqual([[1, null], [2, 'ats-77']]);
    expect(p.receiver.app.database.ingestSqlite.prepare('SELECT status, external_id, deleted_at FROM applications').get()).toEqual({ status: 'screened', external_id: 'ats-77', deleted_at: at(30) });
  });

  // Deletions settled before they kept a digest of their external_id have result_digest NULL
  // (the start-up backfill fills only events with a result): the external_id stored before the
  // next fold is what they were sent with.
  it('a deletion settled before deletions kept a digest is sent again when a later event gives the external_id', async () => {
    const { p, dir } = await withArchive();
    const { deliver, deletions, application, snapshot, forgetDigest } = deletionFixture(p, dir);
    await deliver('evt_del', 30, 'job_application.deleted', snapshot);
    forgetDigest('evt_del');
    p.clock.advance(3 * 3_600_000);
    await deliver('evt_created', 0, 'application.created', application('applied'));
    expect(deletions()).toEqual([[1, null], [2, 'ats-77']]);
  });

  it('a deletion settled before deletions kept a digest, whose external_id stays, is not sent again', async () => {
    const { p, dir } = await withArchive();
    const { deliver, deletions, application, snapshot, forgetDigest, digestOf } = deletionFixture(p, dir);
    await deliver('evt_created', 0, 'application.created', application('applied'));
    await deliver('evt_del', 30, 'job_application.deleted', snapshot);
    forgetDigest('evt_del');
    await deliver('evt_screened', 10, 'application.status_changed', { ...application('screened'), previous_status: 'applied' });
    expect(deletions()).toEqual([[1, 'ats-77']]);
    expect(digestOf('evt_del')).not.toBeNull(); // filled in, without a revision
  });

  it('a replay after the application was deleted keeps the result read before: no revision, nothing erased', async () => {
    const { p, interviews } = await withArchive();
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id, { eligible: true });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const row = () => p.receiver.app.database.sqlite.prepare('SELECT state, reason, data IS NOT NULL AS has_data, overall_score FROM interview_results WHERE application_id = ?').get(app.id);
    const before = row();
    expect(before).toMatchObject({ state: 'ready', has_data: 1 });
    c.deleteApplication(app.id);
    await p.settle();
    const first = interviews()[0]!;
    await replayThroughProcessing(p, first.id as string);
    p.clock.advance(60_000);
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    // The service was asked (a replay reads again) and answered 404 for the deleted application.
    expect(p.calls.filter((x) => x.path === `/api/v2/applications/${app.id}/interview`).length).toBe(2);
    expect(row()).toEqual(before);
    expect(interviews().filter((m) => m.id === first.id).map((m) => [m.revision, m.result.state])).toEqual([[1, 'ready']]);
  });

  it('a result first read after the deletion is final: unavailable, application_deleted', async () => {
    const { p, interviews } = await withArchive();
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.injectFault({ target: 'interview', applicationId: app.id, status: 503, times: 1 });
    c.completeInterview(app.id);
    c.deleteApplication(app.id);
    for (let i = 0; i < 3; i++) {
      await p.settle();
      p.clock.advance(60_000);
    }
    await p.receiver.app.fanOut.runUntilIdle();
    expect(interviews().map((m) => [m.revision, m.result.state, m.result.reason])).toEqual([[1, 'unavailable', 'application_deleted']]);
  });

  it('a read given up on 404s before the deletion arrived (deliveries are unordered) settles as unavailable, application_deleted once it does', async () => {
    const { p, interviews } = await withArchive();
    const c = p.sandbox.control;
    const sqlite = p.receiver.app.database.ingestSqlite;
    const result = (id: string) => sqlite.prepare('SELECT state, reason FROM interview_results WHERE application_id = ?').get(id) as { state: string; reason: string };
    const deadJobs = () => sqlite.prepare("SELECT COUNT(*) FROM jobs WHERE state = 'dead'").pluck().get();
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.injectFault({ target: 'interview', applicationId: app.id, status: 404, times: 20 });
    c.completeInterview(app.id);
    for (let i = 0; i < 8; i++) {
      await p.settle();
      p.clock.advance(5 * 60_000);
    }
    expect(result(app.id)).toEqual({ state: 'given_up', reason: expect.stringMatching(/^fetch failed: interview: HTTP 404 not_found.*gave up after 4 tries/) });
    expect(deadJobs()).toBe(1);
    await p.receiver.app.fanOut.runUntilIdle();

    c.clearFaults();
    c.deleteApplication(app.id); // job_application.deleted, delivered after the read gave up
    for (let i = 0; i < 3; i++) {
      await p.settle();
      p.clock.advance(60_000);
    }
    await p.receiver.app.fanOut.runUntilIdle();
    expect(result(app.id)).toEqual({ state: 'unavailable', reason: 'application_deleted' });
    expect(deadJobs()).toBe(0);
    expect(interviews().map((m) => [m.revision, m.result.state])).toEqual([
      [1, 'given_up'],
      [2, 'unavailable'],
    ]);
  });

  it('a read waiting out its retry after a 404 settles as unavailable, application_deleted as soon as the deletion is folded, without another request', async () => {
    const { p, interviews } = await withArchive();
    const c = p.sandbox.control;
    const sqlite = p.receiver.app.database.ingestSqlite;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.injectFault({ target: 'interview', applicationId: app.id, status: 404, times: 20 });
    c.completeInterview(app.id);
    await p.settle(); // the first 404: the read is to be tried again a minute later
    const read = () => sqlite.prepare("SELECT state, run_at FROM jobs WHERE kind = 'fetch_result'").get() as { state: string; run_at: string };
    expect(read().state).toBe('pending');
    expect(Date.parse(read().run_at)).toBeGreaterThanOrEqual(p.clock.now() + 60_000);
    const interviewReads = () => p.calls.filter((call) => call.path.endsWith(`/applications/${app.id}/interview`)).length;
    const readsBefore = interviewReads();

    // The deletion arrives while the read waits; the clock does not move.
    c.deleteApplication(app.id);
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    expect(sqlite.prepare('SELECT state, reason FROM interview_results WHERE application_id = ?').get(app.id)).toEqual({ state: 'unavailable', reason: 'application_deleted' });
    expect(read().state).toBe('done');
    expect(interviewReads()).toBe(readsBefore);
    expect(interviews().map((m) => [m.revision, m.result.state, m.result.reason])).toEqual([[1, 'unavailable', 'application_deleted']]);
  });

  it("a read settled by the deletion without a request is no probe of its paused source: the pause stands, the next held read probes", async () => {
    const { p } = await withArchive();
    // Only settle() runs jobs from here.
    await p.receiver.app.worker.stop();
    const c = p.sandbox.control;
    const sqlite = p.receiver.app.database.ingestSqlite;
    const a = c.createApplication({ jobId: c.createJob({}).id });
    c.injectFault({ target: 'interview', applicationId: a.id, status: 404, times: 20 });
    c.completeInterview(a.id);
    await p.settle(); // the first 404: a's read is to be tried again a minute later
    // The key is revoked: another application's read is refused, and the source is paused.
    c.revokeKey(ACME_KEY);
    const b = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(b.id);
    await p.settle();
    const pauses = () => sqlite.prepare('SELECT source, paused_at FROM source_pauses').all();
    const [pause] = pauses();
    expect(pause).toMatchObject({ source: 'default' });
    // a's deletion is folded (folds are not held by the pause): a's read is due, and at the next
    // probe it settles without a request, which says nothing of the key.
    c.deleteApplication(a.id);
    await p.settle();
    const before = p.calls.length;
    p.clock.advance(5 * 60_000 + 1);
    await p.settle();
    expect(sqlite.prepare('SELECT state, reason FROM interview_results WHERE application_id = ?').get(a.id)).toEqual({ state: 'unavailable', reason: 'application_deleted' });
    // It was taken as a read that went through: the source was resumed with its key still
    // refused, every held read let out (b's refused again, a new pause at this probe's time).
    expect(pauses()).toEqual([pause]);
    expect(p.calls.slice(before).map((x) => [x.status, x.path.includes(b.id)])).toEqual([[401, true]]);
  });

  it('a deletion folded between a 404 read and its dead letter: the dead letter itself settles the read as unavailable, application_deleted', async () => {
    const { p } = await withArchive();
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.injectFault({ target: 'interview', applicationId: app.id, status: 404, times: 20 });
    c.completeInterview(app.id);
    await p.settle(); // the first 404: the read is to be tried again
    const sqlite = p.receiver.app.database.ingestSqlite;
    const job = sqlite.prepare("SELECT * FROM jobs WHERE kind = 'fetch_result'").get() as ClaimedJob;
    expect(job.state).toBe('pending');
    // The deletion arrives and is folded while that read is (as it were) failing for the last time:
    // claimed by a worker, so the fold does not make it due (a pending one would settle at once).
    sqlite.prepare("UPDATE jobs SET state = 'running', lease_owner = 'w', lease_token = 't', lease_expires_at = ? WHERE id = ?").run(new Date(p.clock.now() + 3_600_000).toISOString(), job.id);
    c.deleteApplication(app.id);
    await c.idle();
    await p.receiver.app.worker.runUntilIdle();
    expect(sqlite.prepare('SELECT deleted_at FROM applications WHERE id = ?').pluck().get(app.id)).not.toBeNull();
    const { database, fanOut } = p.receiver.app;
    const ctx: ProcessingContext = { db: database.db, sqlite: database.sqlite, clock: p.clock, clients: new Map(), onSettled: fanOut.onSettled, ...DEFAULT_PROCESSING };
    // As the worker leaves it just before calling the handler: dead.
    sqlite.prepare("UPDATE jobs SET state = 'dead' WHERE id = ?").run(job.id);
    await createFetchDeadLetterHandler(ctx)(job, 'interview: HTTP 404 not_found (not_found: Not found.); gave up after 4 tries');
    expect(sqlite.prepare('SELECT state, reason FROM interview_results WHERE application_id = ?').get(app.id)).toEqual({ state: 'unavailable', reason: 'application_deleted' });
    // A final answer, not a dead letter for an operator.
    expect(sqlite.prepare('SELECT state FROM jobs WHERE id = ?').pluck().get(job.id)).toBe('done');
  });

  it('a replay to a sink after a later event changed the result sends the next revision under a new id, never the new body under the old one', async () => {
    const { dir, cleanup } = tempDir('revisions-second-');
    cleanups.push(cleanup);
    const { p, interviews } = await withArchive([{ name: 'second', type: 'file', path: join(dir, 'second.ndjson') }]);
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id, { eligible: true });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const first = interviews()[0]!;
    const messageId = () =>
      p.receiver.app.database.sqlite.prepare("SELECT message_id FROM deliveries WHERE event_id = ? AND sink = 'archive'").pluck().get(first.id) as string;
    const firstId = messageId();
    p.clock.advance(60_000);
    c.completeInterview(app.id, { eligible: false });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    // The operator replays the first event to the sink (what `replay --sink archive --id` queues).
    const { db } = p.receiver.app.database;
    // Both sinks' lanes find the result changed: one revision is made, not one per sink.
    await db.transaction().execute((trx) => p.receiver.app.fanOut.enqueueDeliveries(trx, first.id as string, { sinks: ['archive', 'second'] }));
    await p.receiver.app.fanOut.runUntilIdle();
    expect(p.receiver.app.database.sqlite.prepare('SELECT revision FROM event_processing WHERE event_id = ?').pluck().get(first.id)).toBe(2);
    const second = readFileSync(join(dir, 'second.ndjson'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>).filter((m) => m.id === first.id);
    expect(second.map((m) => [m.revision, m.result.data?.is_eligible])).toEqual([[1, true], [2, false]]);
    const ofFirst = interviews().filter((m) => m.id === first.id);
    expect(ofFirst.map((m) => [m.revision, m.result.data?.is_eligible])).toEqual([[1, true], [2, false]]);
    expect(messageId()).not.toBe(firstId);
    expect(p.receiver.app.database.sqlite.prepare("SELECT state FROM deliveries WHERE event_id = ? AND sink = 'archive'").pluck().get(first.id)).toBe('delivered');
    // A second replay, with nothing changed since, is the same revision under the same id.
    const secondId = messageId();
    await db.transaction().execute((trx) => p.receiver.app.fanOut.enqueueDeliveries(trx, first.id as string, { sinks: ['archive'] }));
    await p.receiver.app.fanOut.runUntilIdle();
    expect(interviews().filter((m) => m.id === first.id).map((m) => [m.revision, m.result.data?.is_eligible])).toEqual([[1, true], [2, false], [2, false]]);
    expect(messageId()).toBe(secondId);
    // Every (event, revision) went out with one body only.
    const bodies = new Map<string, Set<string>>();
    for (const m of interviews()) {
      const key = `${m.id as string}#${m.revision as number}`;
      bodies.set(key, (bodies.get(key) ?? new Set()).add(JSON.stringify(m.result)));
    }
    for (const [key, set] of bodies) expect(set.size, key).toBe(1);
  });
});

// A folder beside the test's receiver for a second sink's file: made on first use in a test and
// removed with that test's other folders (afterEach), so the next test to ask gets a new one.
let _d0: string | undefined;
const dir0 = () => {
  if (!_d0) {
    const t = tempDir('revision-edges-x-');
    cleanups.push(() => {
      t.cleanup();
      _d0 = undefined;
    });
    _d0 = t.dir;
  }
  return _d0;
};
// Edge cases of revisions found by a review of the change that made them (each failed before its fix).
describe('revisions: one webhook-id carries one body, and nothing waits for ever', () => {
  it('a 404 after the deletion, over a row a re-poll left "processing", makes the data read before ready again: nothing waits', async () => {
    const { p, interviews } = await withArchive();
    const { c, app } = await interviewSent(p);
    const first = interviews()[0]!;
    // A replay through processing; the service answers "processing" once (re-scoring).
    c.injectFault({ target: 'interview', applicationId: app.id, status: 200, times: 1, body: { status: 'processing', reason: null, result: null } });
    await replayThroughProcessing(p, first.id as string);
    p.clock.advance(31_000);
    await p.settle();
    const sqlite = p.receiver.app.database.sqlite;
    expect(sqlite.prepare('SELECT state FROM interview_results WHERE application_id = ?').pluck().get(app.id)).toBe('processing');
    // The application is deleted before the next poll: that poll answers 404.
    c.deleteApplication(app.id);
    await p.settle();
    for (let i = 0; i < 10; i++) {
      p.clock.advance(5 * 60_000);
      await p.settle();
      await p.receiver.app.fanOut.runUntilIdle();
    }
    const row = sqlite.prepare('SELECT state, data IS NOT NULL AS has_data FROM interview_results WHERE application_id = ?').get(app.id);
    const ep = sqlite.prepare('SELECT state, revision FROM event_processing WHERE event_id = ?').get(first.id);
    const del = sqlite.prepare("SELECT state, message_id FROM deliveries WHERE event_id = ? AND sink = 'archive'").get(first.id);
    const jobs = sqlite.prepare("SELECT id, state, last_error, run_at FROM jobs WHERE event_id = ? AND kind = 'sink:archive'").all(first.id);
    // Expected: the result read before the deletion is kept final, the event settled on it, nothing waits.
    expect(row).toMatchObject({ state: 'ready' });
    expect(del).toMatchObject({ state: 'delivered' });
  });

  it('a refetch that gives the same result makes no revision: a replay to the sink sends that result under the same webhook-id', async () => {
    const { p, interviews } = await withArchive();
    await interviewSent(p);
    const first = interviews()[0]!;
    const sqlite = p.receiver.app.database.sqlite;
    const msgId = () => sqlite.prepare("SELECT message_id FROM deliveries WHERE event_id = ? AND sink = 'archive'").pluck().get(first.id);
    const id1 = msgId();
    await replayThroughProcessing(p, first.id as string);
    p.clock.advance(60_000);
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    expect(interviews().length).toBe(1); // same result: no revision, nothing sent
    const { db } = p.receiver.app.database;
    await db.transaction().execute((trx) => p.receiver.app.fanOut.enqueueDeliveries(trx, first.id as string, { sinks: ['archive'] }));
    await p.receiver.app.fanOut.runUntilIdle();
    const sent = interviews().filter((m) => m.id === first.id);
    expect(msgId()).toBe(id1);
    // The same revision and result; only result.fetched_at says it was read again since.
    const withoutReadTime = (m: Record<string, any>) => JSON.stringify({ ...m, result: { ...m.result, fetched_at: null } });
    expect(sent.map(withoutReadTime)).toEqual([withoutReadTime(first), withoutReadTime(first)]);
    expect(sent[1]!.result.fetched_at > sent[0]!.result.fetched_at).toBe(true);
  });

  it('a refetch that gives the same result with its fields in another order makes no revision', async () => {
    const { p, interviews } = await withArchive();
    const { c, app } = await interviewSent(p);
    const sqlite = p.receiver.app.database.sqlite;
    const stored = sqlite.prepare('SELECT data FROM interview_results WHERE application_id = ?').pluck().get(app.id) as string;
    // The same object, every object's keys in reverse order (as another server of the service, or
    // the same one after a restart, may serialize it): JSON objects are unordered.
    const reorder = (v: unknown): unknown =>
      Array.isArray(v) ? v.map(reorder) : v !== null && typeof v === 'object' ? Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reorder(x)])) : v;
    const body = reorder(JSON.parse(stored)) as Record<string, unknown>;
    expect(JSON.stringify(body)).not.toBe(stored);
    c.injectFault({ target: 'interview', applicationId: app.id, status: 200, times: 1, body });
    await replayThroughProcessing(p, interviews()[0]!.id as string);
    p.clock.advance(60_000);
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    expect(p.calls.filter((x) => x.path.endsWith('/interview')).length).toBe(2);
    expect(interviews().map((m) => m.revision)).toEqual([1]);
  });

  it('events settled before migration 007 (no result_digest) get the digest of their stored result when the workers start: a later change is their next revision', async () => {
    const { p, interviews, dir } = await withArchive();
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id, { eligible: true });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const first = interviews()[0]!;
    const digestOf = () => p.receiver.app.database.sqlite.prepare('SELECT result_digest FROM event_processing WHERE event_id = ?').pluck().get(first.id);
    const sent = digestOf();
    p.receiver.app.database.sqlite.prepare('UPDATE event_processing SET result_digest = NULL WHERE event_id = ?').run(first.id); // as settled before 007
    // The port the sandbox delivers to stays the same across the restarts.
    const env = { CONFIG_FILE: join(dir, 'config.json'), PORT: new URL(p.receiver.url).port };
    await p.restartReceiver({ ...env, WORKER_CONCURRENCY: '1' }); // the upgrade's first start, with workers
    expect(digestOf()).toBe(sent);
    await p.restartReceiver(env); // back to the test's own stepping (no background workers)
    p.clock.advance(60_000);
    c.completeInterview(app.id, { eligible: false });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const { db } = p.receiver.app.database;
    await db.transaction().execute((trx) => p.receiver.app.fanOut.enqueueDeliveries(trx, first.id as string, { sinks: ['archive'] }));
    await p.receiver.app.fanOut.runUntilIdle();
    expect(interviews().filter((m) => m.id === first.id).map((m) => [m.revision, m.result.data?.is_eligible])).toEqual([[1, true], [2, false]]);
  });

  it('a revision that cannot be made (a storage error) holds back only its own message: the rest of the file-sink batch goes out', async () => {
    const { p, interviews } = await withArchive();
    const c = p.sandbox.control;
    const a1 = c.createApplication({ jobId: c.createJob({}).id });
    const a2 = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(a1.id, { eligible: true });
    c.completeInterview(a2.id, { eligible: true });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const [e1, e2] = interviews();
    p.clock.advance(60_000);
    c.completeInterview(a1.id, { eligible: false });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const sqlite = p.receiver.app.database.sqlite;
    // Any failure of revise's write (SQLITE_BUSY past the retries, disk full, ...): simulated by a trigger.
    sqlite.exec(`CREATE TRIGGER fail_revise BEFORE UPDATE OF revision ON event_processing WHEN NEW.event_id = '${e1!.id}' BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END`);
    const before = interviews().length;
    const { db } = p.receiver.app.database;
    await db.transaction().execute(async (trx) => {
      await p.receiver.app.fanOut.enqueueDeliveries(trx, e1!.id as string, { sinks: ['archive'] });
      await p.receiver.app.fanOut.enqueueDeliveries(trx, e2!.id as string, { sinks: ['archive'] });
    });
    await p.receiver.app.fanOut.runUntilIdle();
    const jobs = sqlite.prepare("SELECT event_id = ? AS stale, state, attempts, last_error FROM jobs WHERE kind = 'sink:archive' AND state <> 'done'").all(e1!.id);
    expect(interviews().length - before).toBe(1); // e2 (unchanged) goes out regardless of e1
    expect(jobs).toEqual([{ stale: 1, state: 'pending', attempts: 0, last_error: expect.stringMatching(/^could not make the next revision: simulated write failure/) }]);
  });

  it('an older revision\'s request failing after the next revision was delivered does not mark the pair failing', async () => {
    const received: { revision: number; eligible: unknown }[] = [];
    let release: (code: number) => void = () => {};
    let arrived: () => void = () => {};
    const firstArrived = new Promise<void>((r) => (arrived = r));
    const consumer = createServer((req: IncomingMessage, res: ServerResponse) => {
      let body = '';
      req.on('data', (d) => (body += d));
      req.on('end', () => {
        const m = JSON.parse(body);
        if (m.event_type !== 'interview.completed') return void res.writeHead(200).end();
        received.push({ id: m.id, revision: m.revision, eligible: m.result?.data?.is_eligible } as any);
        if (received.length === 2) {
          release = (code) => res.writeHead(code).end();
          arrived();
        } else res.writeHead(200).end();
      });
    });
    const port = await freePort();
    await new Promise<void>((r) => consumer.listen(port, '127.0.0.1', () => r()));
    cleanups.push(() => consumer.close());
    const { p, interviews } = await withArchive([{ name: 'crm', type: 'http', url: `http://127.0.0.1:${port}/hook`, secret: newSecret() }]);
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id, { eligible: true });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle(); // revision 1 to both sinks
    const e = interviews()[0]!;
    const { db, sqlite } = p.receiver.app.database;
    // The operator replays E to crm; the consumer holds that request (revision 1, still current).
    await db.transaction().execute((trx) => p.receiver.app.fanOut.enqueueDeliveries(trx, e.id as string, { sinks: ['crm'] }));
    const crm = p.receiver.app.fanOut.worker('crm')!;
    const first = crm.runUntilIdle();
    await firstArrived;
    // Meanwhile a later event changes the result, and a replay to the archive finds E stale: revision 2.
    p.clock.advance(60_000);
    c.completeInterview(app.id, { eligible: false });
    await p.settle();
    await db.transaction().execute((trx) => p.receiver.app.fanOut.enqueueDeliveries(trx, e.id as string, { sinks: ['archive'] }));
    await p.receiver.app.fanOut.worker('archive')!.runUntilIdle();
    await crm.runUntilIdle(); // crm's follow-up job: revision 2 delivered
    const row = () => sqlite.prepare("SELECT state, message_id, last_status_code FROM deliveries WHERE event_id = ? AND sink = 'crm'").get(e.id);
    const afterRev2 = row();
    release(400); // the held revision-1 request is refused (permanent)
    await first;
    const jobs = sqlite.prepare("SELECT id, state, attempts, run_at, last_error FROM jobs WHERE event_id = ? AND kind = 'sink:crm'").all(e.id);
    expect(row()).toMatchObject({ state: 'delivered' });
  });

  it('a delivery whose sink no longer takes the event (its filters changed after it was queued) is not sent: a dead letter that says why', async () => {
    const { p, interviews, dir } = await withArchive([{ name: 'crm', type: 'file', path: join(dir0(), 'crm.ndjson'), events: ['interview.*'] }]);
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id, { eligible: true });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const e = interviews()[0]!;
    p.clock.advance(60_000);
    c.completeInterview(app.id, { eligible: false });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const { db } = p.receiver.app.database;
    await db.transaction().execute((trx) => p.receiver.app.fanOut.enqueueDeliveries(trx, e.id as string, { sinks: ['crm'] }));
    // The operator narrows crm's filter and restarts before the replayed delivery ran.
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: join(dir, 'out.ndjson') }, { name: 'crm', type: 'file', path: join(dir0(), 'crm.ndjson'), events: ['insights.*'] }] }));
    await p.restartReceiver({ CONFIG_FILE: join(dir, 'config.json') });
    await p.receiver.app.fanOut.runUntilIdle();
    const sqlite = p.receiver.app.database.sqlite;
    const row = sqlite.prepare("SELECT state FROM deliveries WHERE event_id = ? AND sink = 'crm'").get(e.id);
    expect(sqlite.prepare("SELECT last_error FROM deliveries WHERE event_id = ? AND sink = 'crm'").pluck().get(e.id)).toMatch(/filters no longer take this event/);
    const open = sqlite.prepare("SELECT count(*) FROM jobs WHERE event_id = ? AND kind = 'sink:crm' AND state IN ('pending','running')").pluck().get(e.id);
    expect(open).toBe(0);
    expect(row).toEqual({ state: 'dead' });
    // A dead letter like any other: listed, and retried with `dead-letters retry` once the filters take it again.
    expect(sqlite.prepare("SELECT last_error FROM jobs WHERE event_id = ? AND kind = 'sink:crm' AND state = 'dead'").pluck().all(e.id)).toEqual([
      expect.stringMatching(/filters no longer take this event/),
    ]);
    expect(readFileSync(join(dir0(), 'crm.ndjson'), 'utf8').split('\n').filter((l) => l.includes(e.id as string))).toHaveLength(1); // revision 1 only

    // A replay to the archive makes revision 2, which crm's filters leave out. Then the operator
    // widens crm again and retries its dead letter: crm gets revision 2, recorded as delivered.
    await p.receiver.app.database.db.transaction().execute((trx) => p.receiver.app.fanOut.enqueueDeliveries(trx, e.id as string, { sinks: ['archive'] }));
    await p.receiver.app.fanOut.runUntilIdle();
    expect(sqlite.prepare('SELECT revision FROM event_processing WHERE event_id = ?').pluck().get(e.id)).toBe(2);
    writeFileSync(join(dir, 'config.json'), JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: join(dir, 'out.ndjson') }, { name: 'crm', type: 'file', path: join(dir0(), 'crm.ndjson'), events: ['interview.*'] }] }));
    await p.restartReceiver({ CONFIG_FILE: join(dir, 'config.json') });
    expect(await p.receiver.app.queue.retryDeadLetters({ kind: 'sink:crm' })).toBe(1);
    await p.receiver.app.fanOut.runUntilIdle();
    const crmLines = readFileSync(join(dir0(), 'crm.ndjson'), 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>).filter((m) => m.id === e.id);
    expect(crmLines.map((m) => [m.revision, m.result.data?.is_eligible])).toEqual([[1, true], [2, false]]);
    const after = p.receiver.app.database.sqlite.prepare("SELECT state, message_id FROM deliveries WHERE event_id = ? AND sink = 'crm'").get(e.id) as { state: string; message_id: string };
    expect(after.state).toBe('delivered');
    expect(after.message_id).toBe(messageIdFor(e.id as string, 'crm', 2));
  });
  it('a pre-007 event whose result row another event is reading again (processing) at the first start gets the digest of the ready data it keeps', async () => {
    const { p, interviews, dir } = await withArchive();
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id, { eligible: true });
    await p.settle();
    await p.receiver.app.fanOut.runUntilIdle();
    const first = interviews()[0]!;
    const sqlite0 = p.receiver.app.database.sqlite;
    sqlite0.prepare('UPDATE event_processing SET result_digest = NULL WHERE event_id = ?').run(first.id); // settled before 007
    // A later interview event of the same application: its first read answers "processing".
    p.clock.advance(60_000);
    c.injectFault({ target: 'interview', applicationId: app.id, status: 200, times: 1, body: { status: 'processing', reason: null, result: null } });
    c.completeInterview(app.id, { eligible: false });
    await p.settle();
    expect(p.receiver.app.database.sqlite.prepare('SELECT state FROM interview_results WHERE application_id = ?').pluck().get(app.id)).toBe('processing');
    // The upgrade's first start with workers: the backfill runs.
    const env = { CONFIG_FILE: join(dir, 'config.json'), PORT: new URL(p.receiver.url).port };
    await p.restartReceiver({ ...env, WORKER_CONCURRENCY: '1' });
    await p.restartReceiver(env);
    const digest = () => p.receiver.app.database.sqlite.prepare('SELECT result_digest FROM event_processing WHERE event_id = ?').pluck().get(first.id);
    expect(digest()).not.toBeNull();
    // The later event's read completes with another result.
    for (let i = 0; i < 4; i++) {
      p.clock.advance(5 * 60_000);
      await p.settle();
    }
    await p.receiver.app.fanOut.runUntilIdle();
    // A replay of the first event to the archive.
    const { db } = p.receiver.app.database;
    await db.transaction().execute((trx) => p.receiver.app.fanOut.enqueueDeliveries(trx, first.id as string, { sinks: ['archive'] }));
    await p.receiver.app.fanOut.runUntilIdle();
    const sent = interviews().filter((m) => m.id === first.id).map((m) => [m.revision, m.result.data?.is_eligible]);
    // Expected: [[1, true], [2, false]] — the changed result under a new revision (new webhook-id).
    expect(sent).toEqual([[1, true], [2, false]]);
  });

  it('a read dead-lettered while what follows it could not commit is given up by the next sweep (the workers\' start), and its event reaches the sinks', async () => {
    const { p, interviews, dir } = await withArchive();
    const out = join(dir, 'out.ndjson');
    const sqlite = p.receiver.app.database.ingestSqlite;
    // The dead letter commits; its follow-up (given_up, the settle) fails, as under a write lock
    // held past the wait or a full disk.
    sqlite.exec(`CREATE TRIGGER fail_give_up BEFORE UPDATE OF state ON interview_results WHEN NEW.state = 'given_up'
      BEGIN SELECT RAISE(ABORT, 'disk I/O error (simulated)'); END`);
    const app = await deadLetterTheRead(p);
    const state = () => ({
      result: sqlite.prepare('SELECT state FROM interview_results WHERE application_id = ?').get(app.id),
      event: sqlite.prepare("SELECT ep.state FROM event_processing ep JOIN events e ON e.id = ep.event_id WHERE e.event_type = 'interview.completed'").get(),
      jobs: sqlite.prepare("SELECT state FROM jobs WHERE kind = 'fetch_result'").all(),
    });
    expect(state()).toEqual({ result: { state: 'processing' }, event: { state: 'awaiting_result' }, jobs: [{ state: 'dead' }] });
    expect(p.receiver.logs.lines.some((l) => l.level === 50 && /what follows its dead letter failed/.test(String(l.msg)) && /disk I\/O error/.test(String(l.err)))).toBe(true);
    expect(p.receiver.logs.lines.some((l) => /runs again after its lease/.test(String(l.msg)))).toBe(false);

    sqlite.exec('DROP TRIGGER fail_give_up');
    await p.receiver.app.startWorkers();
    await p.receiver.app.worker.stop();
    expect(state()).toEqual({ result: { state: 'given_up' }, event: { state: 'settled' }, jobs: [{ state: 'dead' }] });
    expect(p.receiver.logs.lines.some((l) => l.level === 40 && l.reads === 1 && /given up now, and their events settled/.test(String(l.msg)))).toBe(true);
    // The sink lanes the start began deliver it (bounded wait for the line).
    const deadline = Date.now() + 10_000;
    const lines = () => readFileSync(out, 'utf8').split('\n').filter((l) => l.includes('"interview.completed"'));
    while (lines().length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(interviews().map((m) => m.result?.state)).toEqual(['given_up']);
  });
});
