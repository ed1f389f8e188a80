import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { enqueue } from '../../src/queue/JobQueue.js';
import { messageIdFor } from '../../src/sinks/messageId.js';
import { runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { ACME_KEY, ACME_KEY_2, startPair, type Pair } from '../helpers/pair.js';

let pair: Pair;
afterEach(() => pair?.close());

const db = () => pair.receiver.app.database.ingestSqlite;
const row = (sql: string, ...p: unknown[]) => db().prepare(sql).get(...p) as Record<string, any> | undefined;
const all = (sql: string, ...p: unknown[]) => db().prepare(sql).all(...p) as Record<string, any>[];

/**
 * The application's interview completes and its result read is sent, held by the sandbox's read
 * delay; meanwhile the event is queued again as `replay --id` does, and both finish. Its event id.
 */
async function replayWhileItsReadRuns(p: Pair, applicationId: string): Promise<string> {
  const c = p.sandbox.control;
  c.setReadDelay(300);
  c.completeInterview(applicationId);
  const first = p.settle();
  const deadline = Date.now() + 10_000;
  while (c.reads().inFlight === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(c.reads().inFlight).toBe(1);
  const eventId = row("SELECT id FROM events WHERE event_type = 'interview.completed'")!.id as string;
  await enqueue(p.receiver.app.database.db, { kind: 'process_event', payload: { event_id: eventId, refetch: true }, eventId, source: 'default' }, p.clock.now());
  await Promise.all([first, p.receiver.app.worker.runUntilIdle()]);
  return eventId;
}

/** A pair whose receiver has one file sink, `archive`; `messages()` reads what it wrote. */
async function withArchive(prefix: string, body: (messages: () => Record<string, any>[]) => Promise<void>): Promise<void> {
  const { dir, cleanup } = tempDir(prefix);
  try {
    const file = join(dir, 'config.json');
    const out = join(dir, 'out.ndjson');
    writeFileSync(file, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: out }] }));
    pair = await startPair({ env: { CONFIG_FILE: file } });
    await body(() => readFileSync(out, 'utf8').trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, any>));
  } finally {
    await pair.close();
    pair = undefined as unknown as Pair;
    cleanup();
  }
}

/** A pair whose application's interview completes now and whose result reads answer "processing" for `ms`. */
async function interviewProcessingFor(ms: number) {
  pair = await startPair();
  const c = pair.sandbox.control;
  c.setResultDelay(ms);
  const app = c.createApplication({ jobId: c.createJob({}).id });
  c.completeInterview(app.id);
  const path = `/api/v2/applications/${app.id}/interview`;
  return { c, app, reads: () => pair.calls.filter((x) => x.path === path) };
}

describe('processing against the sandbox over real HTTP (spec 2.10, 3.6, 4.2, 6.4)', () => {
  it('takes an application through its whole life: every event stored, results fetched, state true', async () => {
    pair = await startPair();
    const { application } = pair.sandbox.control.runScenario('lifecycle', { externalId: 'ats-7', deleteAtEnd: false });
    await pair.settle();
    const types = all('SELECT event_type FROM events ORDER BY event_type').map((r) => r.event_type);
    expect(new Set(types)).toEqual(
      new Set(['application.created', 'application.status_changed', 'interview.completed', 'cv_evaluation.completed', 'insights.completed']),
    );
    expect(row('SELECT * FROM applications WHERE id = ?', application.id)).toMatchObject({ status: 'hired', external_id: 'ats-7', deleted_at: null });
    expect(all('SELECT to_status FROM application_status_history WHERE application_id = ? ORDER BY changed_at', application.id).map((r) => r.to_status)).toEqual([
      'screened',
      'interviewed',
      'hired',
    ]);
    for (const table of ['interview_results', 'cv_evaluation_results', 'insights_results']) {
      const r = row(`SELECT * FROM ${table} WHERE application_id = ?`, application.id);
      expect(r).toMatchObject({ state: 'ready', source: 'default' });
      expect(JSON.parse(r!.data)).toMatchObject({ application_id: application.id });
    }
    expect(row('SELECT outcome, is_eligible FROM interview_results WHERE application_id = ?', application.id)).toEqual({ outcome: 'completed', is_eligible: 1 });
    expect(all("SELECT state FROM event_processing WHERE state != 'settled'")).toEqual([]);
    expect(all("SELECT id FROM jobs WHERE state != 'done'")).toEqual([]);
  });

  it('reads a legacy interview (interview_v2.completed) from the v1 endpoint, not the v2 one', async () => {
    pair = await startPair();
    const { application } = pair.sandbox.control.runScenario('legacy');
    await pair.settle();
    const r = row('SELECT * FROM legacy_interview_results WHERE application_id = ?', application.id);
    expect(r).toMatchObject({ state: 'ready' });
    expect(JSON.parse(r!.data)).toMatchObject({ job_application_id: application.id });
    expect(pair.calls.map((c) => c.path)).toEqual([`/api/v1/applications/${application.id}/interview`]);
  });

  it('surfaces an ineligible candidate for review, never rejecting', async () => {
    pair = await startPair();
    const { application } = pair.sandbox.control.runScenario('ineligible');
    await pair.settle();
    const app = row('SELECT status, needs_review, review_reasons FROM applications WHERE id = ?', application.id)!;
    expect(app.needs_review).toBe(1);
    expect(app.status).toBe('screened');
    expect(JSON.parse(app.review_reasons).length).toBeGreaterThan(0);
    expect(row('SELECT is_eligible FROM interview_results WHERE application_id = ?', application.id)).toEqual({ is_eligible: 0 });
  });

  it('says which verdict flagged a candidate for review when it names no criterion', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    // Spec 6.4: insights carry is_eligible but no reasons; the interview's scoring then failed.
    c.injectFault({ target: 'insights', applicationId: app.id, status: 200, body: { overall_score: 2.1, hiring_recommendation: 'no', is_eligible: false } });
    c.emitEvent({ eventType: 'insights.completed', payload: { application: { id: app.id, external_id: null }, insights: { overall_score: 2.1, hiring_recommendation: 'no', is_eligible: false } } });
    c.injectFault({ target: 'interview', applicationId: app.id, status: 200, body: { status: 'unavailable', reason: 'scoring_failed', result: null } });
    c.emitEvent({ eventType: 'interview.completed', payload: { application: { id: app.id, external_id: null }, interview: { id: 'iv-1', result: { overall_score: 1, is_eligible: false } } } });
    await pair.settle();
    expect(row('SELECT state FROM interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'unavailable' });
    const flagged = row('SELECT needs_review, review_reasons FROM applications WHERE id = ?', app.id)!;
    expect(flagged.needs_review).toBe(1);
    // Events at one instant fold in id order: the two events' reasons come in either order.
    // The insights result, read after its event arrived, is the newer word of that verdict; the
    // interview's read gave none, so its event's stands.
    expect(new Set(JSON.parse(flagged.review_reasons))).toEqual(new Set([
      'is_eligible false in the interview.completed event (no criteria named)',
      'is_eligible false in the insights result (no criteria named)',
    ]));
  });

  it('a re-scored interview: the newest verdict decides needs_review, not every verdict ever said', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    const scored = (eligible: boolean) => ({ status: 'completed', overall_score: eligible ? 4 : 2, is_eligible: eligible, ineligibility_reasons: eligible ? [] : ['work permit'], criteria_results: [] });
    const interviewDone = (eligible: boolean) =>
      c.emitEvent({ eventType: 'interview.completed', payload: { application: { id: app.id, external_id: null }, interview: { id: 'iv-1', result: { overall_score: eligible ? 4 : 2, is_eligible: eligible } } } });
    const review = () => row('SELECT needs_review, review_reasons FROM applications WHERE id = ?', app.id);
    c.injectFault({ target: 'interview', applicationId: app.id, status: 200, body: scored(false) });
    interviewDone(false);
    await pair.settle();
    expect(review()).toEqual({ needs_review: 1, review_reasons: JSON.stringify(['work permit']) });

    // Scored again: eligible now. Its event and its read both say so.
    pair.clock.advance(3_600_000);
    c.clearFaults();
    c.injectFault({ target: 'interview', applicationId: app.id, status: 200, body: scored(true) });
    interviewDone(true);
    await pair.settle();
    expect(row('SELECT is_eligible FROM interview_results WHERE application_id = ?', app.id)).toEqual({ is_eligible: 1 });
    expect(review()).toEqual({ needs_review: 0, review_reasons: null });

    // Scored once more, ineligible, and this read fails (retried): until a read answers, the
    // newest event's verdict stands over the older read.
    pair.clock.advance(3_600_000);
    c.clearFaults();
    c.injectFault({ target: 'interview', applicationId: app.id, status: 400, times: 30 });
    interviewDone(false);
    await pair.settle();
    expect(row('SELECT is_eligible FROM interview_results WHERE application_id = ?', app.id)).toEqual({ is_eligible: 1 });
    expect(review()).toEqual({ needs_review: 1, review_reasons: JSON.stringify(['is_eligible false in the interview.completed event (no criteria named)']) });
  });

  it('polls a result that is processing no faster than every 30 s, then stores it when ready', async () => {
    pair = await startPair();
    pair.sandbox.control.setResultDelay(3 * 60_000);
    const { application } = pair.sandbox.control.runScenario('legacy'); // creates the job and application
    const c = pair.sandbox.control;
    const app2 = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app2.id);
    await pair.settle();
    // A duplicate event for the same result, as a replay or redelivery would cause.
    c.emitEvent({ eventType: 'interview.completed', payload: { application: { id: app2.id, external_id: null } } });
    for (let i = 0; i < 40 && row('SELECT state FROM interview_results WHERE application_id = ?', app2.id)?.state !== 'ready'; i++) {
      pair.clock.advance(10_000);
      await pair.settle();
    }
    expect(row('SELECT state, polls FROM interview_results WHERE application_id = ?', app2.id)).toMatchObject({ state: 'ready' });
    const polls = pair.calls.filter((x) => x.path === `/api/v2/applications/${app2.id}/interview`).map((x) => x.at);
    expect(polls.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < polls.length; i++) expect(polls[i]! - polls[i - 1]!).toBeGreaterThanOrEqual(30_000);
    // The service's side agrees (spec 8): the sandbox saw the same reads, 30 s apart at least.
    const seen = c.readGaps().find((g) => g.applicationId === app2.id && g.resource === 'interview');
    expect(seen).toMatchObject({ reads: polls.length });
    expect(seen!.shortestGapMs).toBeGreaterThanOrEqual(30_000);
    expect(application.id).toBeTruthy();
  });

  it('reads that failed during an outage do not stretch the polling of a result still processing: the next poll is 30 s more than the read has waited', async () => {
    const { c, app, reads } = await interviewProcessingFor(2 * 3_600_000);
    const until = async (n: number) => {
      for (let i = 0; i < 100 && reads().length < n; i++) {
        await pair.settle();
        if (reads().length < n) pair.clock.advance(5_000);
      }
    };
    await until(2); // processing, processing
    c.injectFault({ target: 'interview', applicationId: app.id, status: 503, times: 3 });
    await until(6); // three 503s, then processing again
    expect(reads().map((r) => r.status)).toEqual([200, 200, 503, 503, 503, 200]);
    const received = Date.parse(row('SELECT received_at FROM events WHERE application_id = ?', app.id)!.received_at as string);
    const last = reads()[5]!.at;
    const job = row("SELECT state, run_at FROM jobs WHERE kind = 'fetch_result'")!;
    expect(job.state).toBe('pending');
    // 30 s, 60 s, ...: the wait doubles with the time waited, whatever failed meanwhile (it was 16 min here).
    expect(Date.parse(job.run_at as string) - last).toBe(last - received + 30_000);
    expect(last - received).toBeLessThan(4 * 60_000);
  });

  it('the polling of a result processing for hours backs off to hourly at most: the result is read within the hour it is ready', async () => {
    const { app, reads } = await interviewProcessingFor(6 * 3_600_000);
    const completedAt = pair.clock.now();
    const ready = () => row('SELECT state FROM interview_results WHERE application_id = ?', app.id)?.state === 'ready';
    for (let i = 0; i < 200 && !ready(); i++) {
      await pair.settle();
      const next = row("SELECT run_at FROM jobs WHERE kind = 'fetch_result' AND state = 'pending'");
      if (next) pair.clock.set(Math.max(pair.clock.now() + 1, Date.parse(next.run_at as string)));
    }
    expect(ready()).toBe(true);
    const gaps = reads().slice(1).map((r, i) => r.at - reads()[i]!.at);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(30_000);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(60 * 60_000);
    expect(reads().at(-1)!.at - (completedAt + 6 * 3_600_000)).toBeLessThanOrEqual(60 * 60_000);
  });

  it('an outage of the service longer than the read\'s attempts gives nothing up: the read is retried hourly until it answers', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    // 40 failures: more than a read's 25 attempts, about 27 hours at the hourly backoff cap.
    c.injectFault({ target: 'interview', applicationId: app.id, status: 503, times: 40 });
    c.completeInterview(app.id);
    const path = `/api/v2/applications/${app.id}/interview`;
    const reads = () => pair!.calls.filter((x) => x.path === path);
    for (let i = 0; i < 200 && reads().filter((r) => r.status === 200).length === 0; i++) {
      await pair.settle();
      const next = row("SELECT run_at FROM jobs WHERE kind = 'fetch_result' AND state = 'pending'");
      if (next) pair.clock.set(Math.max(pair.clock.now() + 1, Date.parse(next.run_at as string)));
    }
    expect(reads().filter((r) => r.status === 503)).toHaveLength(40);
    expect(row("SELECT count(*) AS n FROM jobs WHERE state = 'dead'")).toEqual({ n: 0 });
    expect(row('SELECT state FROM interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'ready' });
    // Hourly at its longest: no read came sooner than the 30 s spacing, none later than an hour and a quarter.
    const gaps = reads().slice(1).map((r, i) => r.at - reads()[i]!.at);
    expect(Math.min(...gaps)).toBeGreaterThanOrEqual(30_000);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(75 * 60_000);
  });

  it('a readiness envelope with a status the spec does not list yet is not taken for the result: the read polls on, and the result is read once it comes', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    // Spec 3.6 lists `processing` and `unavailable`; a service that grows a third ("queued")
    // still answers the envelope's shape: no result in it.
    c.injectFault({ target: 'cv-evaluation', applicationId: app.id, status: 200, body: { status: 'queued', reason: 'waiting_for_cv', result: null } });
    c.completeCvEvaluation(app.id, { overallScore: 3.5 });
    await pair.settle();
    const result = () => row('SELECT state, reason, data FROM cv_evaluation_results WHERE application_id = ?', app.id);
    expect(result()).toEqual({ state: 'processing', reason: 'readiness status "queued", not one the spec lists (reason: waiting_for_cv)', data: null });
    expect(pair.receiver.logs.lines.filter((l) => l.msg === 'the service answered a readiness status this version does not know: read again later, as for processing')).toHaveLength(1);
    for (let i = 0; i < 10 && result()?.state === 'processing'; i++) {
      pair.clock.advance(30_000);
      await pair.settle();
    }
    expect(result()).toMatchObject({ state: 'ready', reason: null });
    expect(JSON.parse(result()!.data)).toMatchObject({ application_id: app.id });
  });

  it('a result holding result: null and a status the spec does not list is stored as the result, not polled as an envelope', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    // Spec 2.10 shows no CV evaluation fields beyond overall_score (6.4): its status and a `result`
    // key are the service's to choose. This is a result (it has a score), not the envelope of 3.6.
    const body = { id: 'cv-1', application_id: app.id, status: 'evaluated', overall_score: 3.5, result: null };
    c.injectFault({ target: 'cv-evaluation', applicationId: app.id, status: 200, body });
    c.completeCvEvaluation(app.id, { overallScore: 3.5 });
    await pair.settle();
    const result = row('SELECT state, reason, data FROM cv_evaluation_results WHERE application_id = ?', app.id);
    expect(result).toMatchObject({ state: 'ready', reason: null });
    expect(JSON.parse(result!.data)).toEqual(body);
  });

  it('gives up on a result still processing after the configured bound, visibly', async () => {
    pair = await startPair({ env: { RESULT_GIVE_UP_HOURS: '2' } });
    pair.sandbox.control.setResultDelay(24 * 3_600_000);
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id);
    await pair.settle();
    for (let i = 0; i < 12 && row('SELECT state FROM interview_results WHERE application_id = ?', app.id)?.state === 'processing'; i++) {
      await pair.settle();
      pair.clock.advance(30 * 60_000);
    }
    // Nothing was ever fetched: no data, and no time it was fetched at.
    expect(row('SELECT state, reason, data, fetched_at FROM interview_results WHERE application_id = ?', app.id)).toEqual({
      state: 'given_up',
      reason: 'still processing after 2 h',
      data: null,
      fetched_at: null,
    });
    expect(row("SELECT state FROM event_processing WHERE resource = 'interview'")).toEqual({ state: 'settled' });
  });

  it('never polls one result twice within 30 s, even with two events for it claimed together', async () => {
    pair = await startPair();
    pair.sandbox.control.setResultDelay(5 * 60_000);
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id);
    c.emitEvent({ eventType: 'interview.completed', payload: { application: { id: app.id, external_id: null } } });
    await pair.sandbox.control.idle();
    const w = pair.receiver.app.worker;
    for (let i = 0; i < 40 && row('SELECT state FROM interview_results WHERE application_id = ?', app.id)?.state !== 'ready'; i++) {
      // Two claimers at once, as with WORKER_CONCURRENCY > 1: both fetch jobs run together.
      await Promise.all([w.runUntilIdle(), w.runUntilIdle()]);
      pair.clock.advance(10_000);
    }
    const polls = pair.calls.filter((x) => x.path === `/api/v2/applications/${app.id}/interview`).map((x) => x.at);
    expect(polls.length).toBeGreaterThanOrEqual(3);
    for (let i = 1; i < polls.length; i++) expect(polls[i]! - polls[i - 1]!).toBeGreaterThanOrEqual(30_000);
  });

  it('re-reads a result announced again days later instead of giving it up, keeping the data meanwhile', async () => {
    pair = await startPair();
    const { application } = pair.sandbox.control.runScenario('lifecycle');
    await pair.settle();
    const before = row('SELECT state, data, polls FROM insights_results WHERE application_id = ?', application.id)!;
    expect(before.state).toBe('ready');
    pair.clock.advance(8 * 24 * 3_600_000);
    pair.sandbox.control.emitEvent({ eventType: 'insights.completed', payload: { application: { id: application.id, external_id: null } } });
    await pair.settle();
    const after = row('SELECT state, data, polls FROM insights_results WHERE application_id = ?', application.id)!;
    expect(after).toMatchObject({ state: 'ready', polls: before.polls + 1 });
    expect(after.data).not.toBeNull();
  });

  // Every unfinished InterviewCallStatus of spec 3.2: `processing` (the call is being scored) is not its result.
  it.each(['pending', 'in_progress', 'processing'])('keeps polling a legacy (v1) interview whose call has not finished yet (status %s)', async (status) => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const job = c.createJob({ legacy: true });
    const app = c.createApplication({ jobId: job.id });
    c.injectFault({ target: 'v1-interview', applicationId: app.id, status: 200, times: 1, body: { id: 'call-1', status, job_application_id: app.id, output: null } });
    c.completeInterview(app.id);
    await pair.settle();
    expect(row('SELECT state, reason FROM legacy_interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'processing', reason: `interview call ${status}` });
    pair.clock.advance(30_000);
    await pair.settle();
    expect(row('SELECT state FROM legacy_interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'ready' });
  });

  it.each([
    // Every PipelinePhase of spec 3.1 before the interview's outcome is known.
    ...['awaiting_booking', 'outreach', 'scheduled', 'calling', 'in_progress', 'evaluating'].map(
      (phase): [string, Record<string, unknown>, string] => [`no status, the unfinished pipeline_phase ${phase}`, { pipeline_phase: phase }, `interview call in phase ${phase}`],
    ),
    ['neither status nor pipeline_phase, no output yet', {}, 'interview call has no status, phase or output yet'],
  ] as [string, Record<string, unknown>, string][])('keeps polling a legacy (v1) interview with %s (status is optional, spec 2.3)', async (_what, fields, reason) => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const job = c.createJob({ legacy: true });
    const app = c.createApplication({ jobId: job.id });
    c.injectFault({ target: 'v1-interview', applicationId: app.id, status: 200, times: 1, body: { id: 'call-1', job_application_id: app.id, output: null, ...fields } });
    c.completeInterview(app.id);
    await pair.settle();
    expect(row('SELECT state, reason FROM legacy_interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'processing', reason });
    pair.clock.advance(30_000);
    await pair.settle();
    expect(row('SELECT state FROM legacy_interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'ready' });
  });

  // The call ended (status completed, spec 3.2) and its scoring is under way (phase evaluating, 3.1):
  // its output, the score, is still to come. The event says only that the interview finished (6.4).
  it('keeps polling a legacy (v1) interview whose call completed while its pipeline is still evaluating', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({ legacy: true }).id });
    c.injectFault({ target: 'v1-interview', applicationId: app.id, status: 200, times: 1, body: { id: 'call-1', status: 'completed', pipeline_phase: 'evaluating', job_application_id: app.id, output: null } });
    c.completeInterview(app.id);
    await pair.settle();
    expect(row('SELECT state, reason FROM legacy_interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'processing', reason: 'interview call in phase evaluating' });
    pair.clock.advance(30_000);
    await pair.settle();
    expect(row('SELECT state, overall_score IS NOT NULL AS scored FROM legacy_interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'ready', scored: 1 });
  });

  // Spec 2.3: the call detail names its application (`job_application_id`, required). One naming
  // another application (a cache or proxy that mixed up answers) is not this application's result.
  it('does not store a legacy (v1) call detail that names another application as this one\'s result: it reads again', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({ legacy: true }).id });
    const other = '0f0e0d0c-0000-4000-8000-00000000beef';
    c.injectFault({ target: 'v1-interview', applicationId: app.id, status: 200, times: 1, body: { id: 'call-9', status: 'completed', job_application_id: other, output: { overall_score: '1.00' } } });
    c.completeInterview(app.id);
    await pair.settle();
    expect(row('SELECT state, data FROM legacy_interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'processing', data: null });
    expect(row("SELECT last_error FROM jobs WHERE kind = 'fetch_result'")!.last_error).toMatch(/invalid response \(other_application\)/);
    pair.clock.advance(60_000);
    await pair.settle();
    const stored = row('SELECT state, data FROM legacy_interview_results WHERE application_id = ?', app.id)!;
    expect(stored.state).toBe('ready');
    expect(JSON.parse(stored.data as string)).toMatchObject({ job_application_id: app.id });
  });

  it('a replay through processing re-settles nothing: sinks are not sent the same events again', async () => {
    await withArchive('replay-', async (messages) => {
      pair.sandbox.control.runScenario('lifecycle');
      await pair.settle();
      await pair.receiver.app.fanOut.runUntilIdle();
      const before = messages().length;
      expect(before).toBe(7);
      // What `replay` (without --sink) does: a new process_event job for every stored event.
      const ids = all('SELECT id FROM events').map((r) => r.id as string);
      for (const id of ids) await enqueue(pair.receiver.app.database.db, { kind: 'process_event', payload: { event_id: id, refetch: true }, eventId: id, source: 'default' }, pair.clock.now());
      pair.clock.advance(60_000);
      await pair.settle();
      await pair.receiver.app.fanOut.runUntilIdle();
      expect(messages()).toHaveLength(before);
    });
  });

  it('an unknown event type named like a property of every object (constructor, __proto__) is folded and sent to the sinks as received', async () => {
    await withArchive('proto-type-', async (messages) => {
      const c = pair.sandbox.control;
      const app = c.createApplication({ jobId: c.createJob({}).id });
      const types = ['constructor', '__proto__', 'toString', 'hasOwnProperty'];
      for (const eventType of types) c.emitEvent({ eventType, payload: { application: { id: app.id, status: 'applied' } } });
      await pair.settle();
      await pair.receiver.app.fanOut.runUntilIdle();
      // Processing failed on each (a lookup found Object.prototype's member), retried until a dead letter; none reached the sink.
      expect(all("SELECT kind, state, last_error FROM jobs WHERE state != 'done'")).toEqual([]);
      expect(all("SELECT state FROM event_processing WHERE state != 'settled'")).toEqual([]);
      expect(messages().map((m) => m.event_type).filter((t) => types.includes(t)).sort()).toEqual([...types].sort());
      expect(pair.calls).toEqual([]);
    });
  });

  const interviewMessages = (messages: () => Record<string, any>[]) => messages().filter((m) => m.event_type === 'interview.completed');

  it('a dead-lettered fetch retried by the operator sends the completed result again, as revision 2 under a new webhook-id', async () => {
    await withArchive('revision-', async (messages) => {
      const c = pair.sandbox.control;
      const app = c.createApplication({ jobId: c.createJob({}).id });
      c.injectFault({ target: 'interview', applicationId: app.id, status: 400, times: 5 });
      c.completeInterview(app.id);
      await pair.settle();
      await pair.receiver.app.fanOut.runUntilIdle();
      const [first] = interviewMessages(messages);
      expect(first).toMatchObject({ revision: 1, result: { state: 'given_up', reason: expect.stringMatching(/^fetch failed: .*400/) } });
      const eventId = first!.id as string;
      expect(row("SELECT message_id FROM deliveries WHERE sink = 'archive' AND event_id = ?", eventId)).toEqual({ message_id: messageIdFor(eventId, 'archive') });

      // The operator fixes the cause and retries the dead letter (`dead-letters retry --kind fetch_result`).
      c.clearFaults();
      expect(await pair.receiver.app.queue.retryDeadLetters({ kind: 'fetch_result' })).toBe(1);
      pair.clock.advance(30_000);
      await pair.settle();
      await pair.receiver.app.fanOut.runUntilIdle();
      const sent = interviewMessages(messages);
      expect(sent).toHaveLength(2);
      expect(sent[1]).toMatchObject({ id: eventId, revision: 2, result: { state: 'ready' } });
      const second = messageIdFor(eventId, 'archive', 2);
      expect(second).not.toBe(messageIdFor(eventId, 'archive'));
      expect(row("SELECT message_id, state FROM deliveries WHERE sink = 'archive' AND event_id = ?", eventId)).toEqual({ message_id: second, state: 'delivered' });
    });
  });

  it('`replay` through processing asks the service again; a changed result goes to the sinks as the next revision, an unchanged one sends nothing', async () => {
    await withArchive('replay-refetch-', async (messages) => {
      const c = pair.sandbox.control;
      const app = c.createApplication({ jobId: c.createJob({}).id });
      c.completeInterview(app.id);
      await pair.settle();
      await pair.receiver.app.fanOut.runUntilIdle();
      const sent = () => interviewMessages(messages).map((m) => [m.revision, m.result.state]);
      expect(sent()).toEqual([[1, 'ready']]);
      const eventId = interviewMessages(messages)[0]!.id as string;
      const replay = async () => {
        const cli = runTs('src/cli/main.ts', ['replay', '--id', eventId, '--database', pair.receiver.dbPath], {});
        expect((await cli.exited).code).toBe(0);
        // The CLI queues on the wall clock; the pair runs on its own, so it catches up (and past the 30 s spacing).
        pair.clock.advance(Math.max(0, Date.now() - pair.clock.now()) + 30_000);
        await pair.settle();
        await pair.receiver.app.fanOut.runUntilIdle();
      };
      const polls = () => row('SELECT polls FROM interview_results WHERE application_id = ?', app.id)!.polls as number;

      // Nothing changed at the service: it is asked again, and the sinks are sent nothing.
      const before = polls();
      await replay();
      expect(polls()).toBe(before + 1);
      expect(sent()).toEqual([[1, 'ready']]);

      // The service's answer changed (the sandbox's own state machine never turns a ready result
      // unavailable, spec 3.6; a served answer stands in for a service that did): revision 2.
      c.injectFault({ target: 'interview', applicationId: app.id, status: 200, times: 1, body: { status: 'unavailable', reason: 'no_result', result: null } });
      await replay();
      expect(polls()).toBe(before + 2);
      expect(sent()).toEqual([[1, 'ready'], [2, 'unavailable']]);
    });
  });

  it('`replay --wait` waits for the result read it queued (here held by the 30 s poll spacing), and exits 1 when that read is dead-lettered', async () => {
    pair = await startPair();
    // The CLI queues on the wall clock: the pair starts there, so the spacing since the first read applies.
    pair.clock.advance(Date.now() - pair.clock.now());
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id);
    await pair.settle();
    const eventId = row("SELECT id FROM events WHERE event_type = 'interview.completed'")!.id as string;
    const fetches = () => all("SELECT id, state, last_error FROM jobs WHERE kind = 'fetch_result' ORDER BY id");
    expect(fetches().map((j) => j.state)).toEqual(['done']);

    const replayWaiting = async () => {
      const cli = runTs('src/cli/main.ts', ['replay', '--id', eventId, '--wait', '--timeout', '60', '--database', pair.receiver.dbPath], {});
      let exit: { code: number | null } | null = null;
      void cli.exited.then((e) => (exit = e));
      const deadline = Date.now() + 20_000;
      while (!row("SELECT id FROM jobs WHERE kind = 'process_event' AND state = 'pending'") && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      pair.clock.advance(Math.max(0, Date.now() - pair.clock.now()) + 1_000);
      await pair.settle();
      return { cli, exited: () => exit };
    };

    // Older work on the event that the replay did not cause (a delivery backing off for an hour)
    // is not waited for.
    const older = await enqueue(pair.receiver.app.database.db, { kind: 'sink:gone', payload: { event_id: eventId, sink: 'gone' }, eventId, source: 'sink:gone' }, Date.now() + 3_600_000);

    // The replay's read waits for the spacing: --wait must not say finished meanwhile.
    const first = await replayWaiting();
    expect(fetches().map((j) => [j.state, j.last_error])).toEqual([['done', null], ['pending', 'waiting for the 30 s poll spacing']]);
    await new Promise((r) => setTimeout(r, 1_000)); // several of the CLI's 200 ms polls
    expect(first.exited(), first.cli.stdout.join('')).toBeNull();
    pair.clock.advance(30_000);
    await pair.settle();
    expect((await first.cli.exited).code, first.cli.stderr.join('')).toBe(0);
    expect(first.cli.stdout.join('')).toMatch(/finished: 1 done, 0 dead/);
    expect(fetches().map((j) => j.state)).toEqual(['done', 'done']);
    expect(row('SELECT state FROM jobs WHERE id = ?', older)).toEqual({ state: 'pending' });

    // The read is refused for good (a 400 will not change on retry): the replay failed.
    pair.clock.advance(30_000);
    c.injectFault({ target: 'interview', applicationId: app.id, status: 400, times: 1 });
    const second = await replayWaiting();
    expect(fetches().map((j) => j.state)).toEqual(['done', 'done', 'dead']);
    expect((await second.cli.exited).code).toBe(1);
    expect(second.cli.stdout.join('')).toMatch(/finished: 0 done, 1 dead/);
  }, 60_000);

  it.each([
    ['interview_not_available', (c: Pair['sandbox']['control'], id: string) => c.optOut(id)],
    ['scoring_failed', (c: Pair['sandbox']['control'], id: string) => c.failScoring(id, 'interview')],
    ['no_result', (c: Pair['sandbox']['control'], id: string) => c.markUnavailable(id, 'interview', 'no_result')],
  ])('records the terminal unavailable reason %s', async (reason, make) => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    make(c, app.id);
    c.emitEvent({ eventType: 'interview.completed', payload: { application: { id: app.id, external_id: null } } });
    await pair.settle();
    expect(row('SELECT state, reason FROM interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'unavailable', reason });
    expect(row("SELECT state FROM event_processing WHERE resource = 'interview'")).toEqual({ state: 'settled' });
  });

  it.each(['..', '.'])('an application id %j, which no request can name, is a dead letter at once, saying why, with no request made', async (id) => {
    pair = await startPair();
    pair.sandbox.control.emitEvent({ eventType: 'interview.completed', payload: { application: { id, external_id: null } } });
    await pair.settle();
    expect(row("SELECT state, attempts, last_error FROM jobs WHERE kind = 'fetch_result'")).toEqual({
      state: 'dead',
      attempts: 1,
      last_error: `application id ${JSON.stringify(id)} cannot be read from the service: it must not be a dot-segment`,
    });
    expect(pair.calls.filter((x) => x.path.includes('/interview'))).toEqual([]);
  });

  it('retries a 404 a few spaced times, then dead-letters with the reason', async () => {
    pair = await startPair();
    const ghost = '00000000-0000-4000-8000-00000000dead';
    pair.sandbox.control.emitEvent({ eventType: 'cv_evaluation.completed', payload: { application: { id: ghost, external_id: null }, cv_evaluation: { id: 'x', overall_score: 3 } } });
    // Each retry as soon as it is due: the spacing measured is the receiver's, not this loop's.
    for (let i = 0; i < 10; i++) {
      await pair.settle();
      const next = row("SELECT run_at FROM jobs WHERE kind = 'fetch_result' AND state = 'pending'");
      if (next) pair.clock.set(Math.max(pair.clock.now() + 1, Date.parse(next.run_at as string)));
    }
    const job = row("SELECT state, attempts, last_error FROM jobs WHERE kind = 'fetch_result'")!;
    expect(job.state).toBe('dead');
    expect(job.last_error).toMatch(/HTTP 404 not_found/);
    const calls = pair.calls.filter((x) => x.path.includes(ghost)).map((x) => x.at);
    expect(calls).toHaveLength(4);
    // 1, 2, then 3 minutes (plus up to a quarter, jitter): about 7 minutes for the application to become readable.
    for (let i = 1; i < calls.length; i++) {
      expect(calls[i]! - calls[i - 1]!).toBeGreaterThanOrEqual(60_000 * i);
      expect(calls[i]! - calls[i - 1]!).toBeLessThanOrEqual(75_000 * i);
    }
  });

  it('a 400 whose detail echoes the candidate keeps their email and phone out of the logs and last_error', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    const detail = 'candidate cand.leak@example.com, +1 (555) 999-8888 / 0044 7700 900123: invalid';
    c.injectFault({ target: 'interview', applicationId: app.id, status: 400, times: 1, body: [{ code: 'invalid_input', detail, attr: null }] });
    c.completeInterview(app.id);
    await pair.settle();
    const job = row("SELECT state, last_error FROM jobs WHERE kind = 'fetch_result'")!;
    expect(job).toEqual({ state: 'dead', last_error: 'interview: HTTP 400 client_error (invalid_input: candidate [email], [phone] / [phone]: invalid)' });
    const logged = pair.receiver.logs.lines.filter((l) => l.msg === 'job dead-lettered');
    expect(logged.map((l) => l.err)).toEqual([job.last_error]);
    const raw = pair.receiver.logs.raw.join('\n');
    for (const leak of ['cand.leak@example.com', '999-8888', '7700 900123']) expect(raw).not.toContain(leak);
  });

  it('pauses a source whose key is revoked, loses nothing, and resumes with a working key', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    c.revokeKey(ACME_KEY);
    const apps = [0, 1, 2].map(() => c.createApplication({ jobId: c.createJob({}).id }));
    apps.forEach((a) => c.completeInterview(a.id));
    await pair.settle();
    // One 401 paused the source; the other jobs were not even tried.
    expect(pair.calls.filter((x) => x.status === 401)).toHaveLength(1);
    // Only reads from the service pause: the events are still folded into applications.
    expect(all('SELECT id FROM applications')).toHaveLength(3);
    expect(all("SELECT attempts FROM jobs WHERE kind = 'fetch_result' AND state = 'pending'").map((r) => r.attempts)).toEqual([0, 0, 0]);
    const ready = await (await fetch(`${pair.receiver.url}/readyz`)).json();
    expect(ready).toMatchObject({ status: 'ready', paused_sources: [{ source: 'default', status: 401 }] });
    // Not the service's error text: /readyz is unauthenticated.
    expect(Object.keys((ready as { paused_sources: object[] }).paused_sources[0]!).sort()).toEqual(['paused_at', 'source', 'status']);
    expect(pair.receiver.logs.lines.some((l) => l.level === 50 && /API key refused/.test(String(l.msg)))).toBe(true);
    const metrics = await (await fetch(`${pair.receiver.url}/metrics`)).text();
    expect(metrics).toMatch(/receiver_source_paused\{source="default"\} 1/);
    expect(metrics).toMatch(/receiver_jobs\{state="pending",kind="fetch_result"\} 3/);
    // The key never appears in logs, even when it is refused.
    expect(pair.receiver.logs.raw.join('\n')).not.toContain(ACME_KEY);

    // With a working key the restart (its workers' start) resumes at once, not at the pause's
    // next probe 5 min on: the read refused was held back to that probe and is due again (it keeps
    // its 30 s poll spacing); the two never tried run now.
    const before = pair.calls.length;
    // A job of that source waiting on something else (a Retry-After two hours on) keeps its time.
    const laterAt = new Date(pair.clock.now() + 2 * 3_600_000).toISOString();
    const later = await enqueue(pair.receiver.app.database.db, { kind: 'process_event', payload: { event_id: 'evt-later' }, eventId: 'evt-later', source: 'default', runAt: Date.parse(laterAt) }, pair.clock.now());
    await pair.restartReceiver({ HIRING_API_KEY: ACME_KEY_2 });
    await pair.receiver.app.startWorkers();
    // Its start did what is checked here; from now on only settle() runs jobs, so none is still
    // running in the background when it returns.
    await pair.receiver.app.worker.stop();
    expect(pair.receiver.logs.lines.some((l) => l.jobs === 1 && /the jobs they held back run now/.test(String(l.msg)))).toBe(true);
    expect(row('SELECT run_at FROM jobs WHERE id = ?', later)).toEqual({ run_at: laterAt });
    db().prepare('DELETE FROM jobs WHERE id = ?').run(later);
    await pair.settle();
    pair.clock.advance(30_000);
    await pair.settle();
    const readSince = (a: { id: string }) => pair.calls.slice(before).some((x) => x.path.includes(a.id) && x.status === 200);
    expect(apps.map(readSince)).toEqual([true, true, true]);
    pair.clock.advance(5 * 60_000);
    await pair.settle();
    for (const a of apps) expect(row('SELECT state FROM interview_results WHERE application_id = ?', a.id)).toEqual({ state: 'ready' });
    expect(all('SELECT * FROM source_pauses')).toEqual([]);
  });

  it('a key revoked for longer than RESULT_GIVE_UP_HOURS gives up nothing unread: with a working key, the results are read', async () => {
    pair = await startPair({ env: { RESULT_GIVE_UP_HOURS: '24' } });
    const c = pair.sandbox.control;
    c.revokeKey(ACME_KEY);
    const apps = [0, 1].map(() => c.createApplication({ jobId: c.createJob({}).id }));
    apps.forEach((a) => c.completeInterview(a.id));
    await pair.settle();
    // A day and more with the key refused: the probes are refused too, nothing is read.
    for (let h = 0; h < 26; h += 13) {
      pair.clock.advance(13 * 3_600_000);
      await pair.settle();
    }
    expect(pair.calls.filter((x) => x.status === 401).length).toBeGreaterThanOrEqual(3);
    expect(pair.calls.filter((x) => x.status === 200)).toEqual([]);
    for (const a of apps) expect(row('SELECT state FROM interview_results WHERE application_id = ?', a.id)).toEqual({ state: 'processing' });

    await pair.restartReceiver({ HIRING_API_KEY: ACME_KEY_2 });
    await pair.receiver.app.startWorkers();
    // Its start lifted the pause; from now on only settle() runs jobs.
    await pair.receiver.app.worker.stop();
    await pair.settle();
    pair.clock.advance(30_000);
    await pair.settle();
    // Read, not given up for the time the key was refused: the service had them ready all along.
    for (const a of apps) expect(row('SELECT state, reason FROM interview_results WHERE application_id = ?', a.id)).toEqual({ state: 'ready', reason: null });
    expect(all('SELECT * FROM source_pauses')).toEqual([]);
  });

  it('a source no longer configured is not paused for ever: past RESULT_GIVE_UP_HOURS its reads are dead letters, given up visibly', async () => {
    pair = await startPair({ env: { RESULT_GIVE_UP_HOURS: '1' } });
    const c = pair.sandbox.control;
    c.revokeKey(ACME_KEY); // the first read is refused, so the job waits, unread
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id);
    await pair.settle();
    // As if its source had been removed from the configuration since.
    db().prepare("UPDATE jobs SET source = 'gone' WHERE kind = 'fetch_result'").run();
    pair.clock.advance(5 * 60_000 + 1);
    await pair.settle();
    expect(all("SELECT source, status FROM source_pauses WHERE source = 'gone'")).toEqual([{ source: 'gone', status: 0 }]);
    // Said as what it is: no key was sent, and the runbook's "create a new key" would not help.
    const paused = pair.receiver.logs.lines.filter((l) => l.source === 'gone' && l.level === 50);
    expect(paused.length).toBeGreaterThan(0);
    for (const l of paused) expect(l.msg).toMatch(/^source gone is not configured \(renamed or removed since its events were stored\)/);
    pair.clock.advance(2 * 3_600_000);
    await pair.settle();
    const missing = 'source gone has no HIRING_API_URL / HIRING_API_KEY configured for 1 h';
    expect(row("SELECT state, last_error FROM jobs WHERE kind = 'fetch_result'")).toEqual({ state: 'dead', last_error: missing });
    expect(row('SELECT state, reason FROM interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'given_up', reason: `fetch failed: ${missing}` });
    expect(row("SELECT state FROM event_processing WHERE resource = 'interview'")).toEqual({ state: 'settled' });
    // Its read dead-lettered (the dead letter says so), nothing of the source waits: its pause ends
    // at its next probe (it stayed in /readyz, `status` and receiver_source_paused until a restart).
    pair.clock.advance(5 * 60_000 + 1);
    await pair.settle();
    expect(all("SELECT source FROM source_pauses WHERE source = 'gone'")).toEqual([]);
    const ready = await (await fetch(`${pair.receiver.url}/readyz`)).json();
    expect(ready).toMatchObject({ status: 'ready', paused_sources: [] });
  });

  it('retries 5xx with backoff and honours 429 Retry-After', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.injectFault({ target: 'interview', applicationId: app.id, status: 503, times: 1 });
    c.injectFault({ target: 'interview', applicationId: app.id, status: 429, times: 1, headers: { 'Retry-After': '120' } });
    c.completeInterview(app.id);
    await pair.settle();
    const after503 = row("SELECT state, run_at, last_error FROM jobs WHERE kind = 'fetch_result'")!;
    expect(after503).toMatchObject({ state: 'pending', last_error: expect.stringMatching(/HTTP 503/) });
    // Retried no sooner than the poll spacing (not at the 5 s backoff, only to wait again), and
    // meanwhile last_error still names the 503.
    expect(Date.parse(after503.run_at) - pair.clock.now()).toBeGreaterThanOrEqual(30_000);
    pair.clock.advance(10_000);
    await pair.settle();
    expect(row("SELECT last_error FROM jobs WHERE kind = 'fetch_result'")).toEqual({ last_error: expect.stringMatching(/HTTP 503/) });
    const logged = pair.receiver.logs.lines.find((l) => l.msg === 'job failed; will retry' && /HTTP 503/.test(String(l.err)));
    expect(logged?.retry_in_ms).toBeGreaterThanOrEqual(30_000);
    pair.clock.advance(50_000);
    await pair.settle();
    const job = row("SELECT run_at, last_error FROM jobs WHERE kind = 'fetch_result'")!;
    expect(job.last_error).toMatch(/HTTP 429/);
    // Never sooner than told; spread by up to a quarter so reads told together do not return together.
    const wait = Date.parse(job.run_at) - pair.clock.now();
    expect(wait).toBeGreaterThanOrEqual(120_000);
    expect(wait).toBeLessThanOrEqual(150_000);
    pair.clock.advance(119_000);
    await pair.settle();
    expect(pair.calls.filter((x) => x.path.endsWith('/interview'))).toHaveLength(2);
    pair.clock.advance(wait - 119_000);
    await pair.settle();
    expect(row('SELECT state FROM interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'ready' });
  });

  // The receiver's clock a month before and a month after the machine's: a wait counted on
  // Date.now() instead would be 0 (the date long past) or capped at a day, never the 10 minutes.
  it.each([
    ['behind', -30],
    ['ahead of', 30],
  ])('honours a Retry-After given as an HTTP-date, counted on the receiver\'s clock (a month %s the machine\'s)', async (_, days) => {
    pair = await startPair({ startAt: Math.trunc(Date.now() / 1000) * 1000 + days * 24 * 3_600_000 });
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id);
    const at = new Date(pair.clock.now() + 10 * 60_000).toUTCString(); // IMF-fixdate, RFC 9110 5.6.7
    c.injectFault({ target: 'interview', applicationId: app.id, status: 429, times: 1, headers: { 'Retry-After': at } });
    await pair.settle();
    const job = row("SELECT run_at, last_error FROM jobs WHERE kind = 'fetch_result'")!;
    expect(job.last_error).toMatch(/HTTP 429/);
    // Told 10 minutes, spread by at most a minute (retryAfterJitter).
    expect(Date.parse(job.run_at)).toBeGreaterThanOrEqual(Date.parse(at));
    expect(Date.parse(job.run_at)).toBeLessThanOrEqual(Date.parse(at) + 60_000);
  });

  it.each([429, 503])('a %i with Retry-After holds every read of the source until the wait has passed, not only the read it answered', async (status) => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const apps = [0, 1, 2].map(() => c.createApplication({ jobId: c.createJob({}).id }));
    c.injectFault({ target: 'interview', status, times: 1, headers: { 'Retry-After': '120' } });
    apps.forEach((a) => c.completeInterview(a.id));
    await pair.settle();
    // One read was told to wait; the other two were not sent meanwhile.
    expect(pair.calls.map((x) => x.status)).toEqual([status]);
    expect(pair.receiver.logs.lines.some((l) => l.level === 40 && /asked to slow down/.test(String(l.msg)) && l.wait_ms === 120_000)).toBe(true);
    pair.clock.advance(119_000);
    await pair.settle();
    expect(pair.calls.map((x) => x.status)).toEqual([status]);
    pair.clock.advance(31_000);
    await pair.settle();
    for (const a of apps) expect(row('SELECT state FROM interview_results WHERE application_id = ?', a.id)).toEqual({ state: 'ready' });
    expect(pair.calls.map((x) => x.status)).toEqual([status, 200, 200, 200]);
  });

  it('a replay while the event\'s read is still waiting replaces that read instead of adding a second one', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.injectFault({ target: 'interview', applicationId: app.id, status: 503, times: 1 });
    c.completeInterview(app.id);
    await pair.settle();
    expect(pair.calls.map((x) => x.status)).toEqual([503]);
    const eventId = row("SELECT id FROM events WHERE event_type = 'interview.completed'")!.id as string;
    const [waiting] = all("SELECT id, run_at FROM jobs WHERE kind = 'fetch_result' AND state = 'pending'");
    expect(Date.parse(waiting!.run_at)).toBeGreaterThan(pair.clock.now());
    // What `replay --id <event>` queues: the event through processing, asking the service again.
    await enqueue(pair.receiver.app.database.db, { kind: 'process_event', payload: { event_id: eventId, refetch: true }, eventId, source: 'default' }, pair.clock.now());
    await pair.settle();
    const reads = () => all("SELECT id, state, last_error, payload FROM jobs WHERE kind = 'fetch_result' AND event_id = ? ORDER BY id", eventId);
    // One read: the replay's, waiting only for the 30 s spacing since the 503 (not the 503's backoff).
    expect(reads()).toEqual([{ id: expect.any(Number), state: 'pending', last_error: 'waiting for the 30 s poll spacing', payload: expect.stringContaining('"refetch":true') }]);
    pair.clock.advance(30_000);
    await pair.settle();
    expect(pair.calls.map((x) => x.status)).toEqual([503, 200]);
    expect(reads().map((r) => r.state)).toEqual(['done']);
    expect(row('SELECT state FROM interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'ready' });
  });

  it('a replay while the event\'s read is running: that read, failing, ends there and the replay\'s read carries on (one read to retry, not two)', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.injectFault({ target: 'interview', applicationId: app.id, status: 404, times: 1 });
    const eventId = await replayWhileItsReadRuns(pair, app.id);
    const reads = () => all("SELECT state, last_error FROM jobs WHERE kind = 'fetch_result' AND event_id = ? ORDER BY id", eventId);
    // The 404'd read ended without a retry of its own; the replay's waits for the spacing.
    expect(reads()).toEqual([
      { state: 'done', last_error: null },
      { state: 'pending', last_error: 'waiting for the 30 s poll spacing' },
    ]);
    expect(pair.receiver.logs.lines.some((l) => /a newer read of the event \(a replay\) carries on/.test(String(l.msg)) && /HTTP 404/.test(String(l.outcome)))).toBe(true);
    c.setReadDelay(0);
    pair.clock.advance(30_000);
    await pair.settle();
    expect(pair.calls.map((x) => x.status)).toEqual([404, 200]);
    expect(reads().map((r) => r.state)).toEqual(['done', 'done']);
    expect(all("SELECT id FROM jobs WHERE state = 'dead'")).toEqual([]);
  });

  it('a 429 with Retry-After answering a read that yields to a replay\'s still holds every read of the source', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const [a, b] = [0, 1].map(() => c.createApplication({ jobId: c.createJob({}).id }));
    c.injectFault({ target: 'interview', applicationId: a!.id, status: 429, times: 1, headers: { 'Retry-After': '300' } });
    const eventId = await replayWhileItsReadRuns(pair, a!.id);
    c.setReadDelay(0);
    expect(pair.calls.map((x) => x.status)).toEqual([429]);
    expect(pair.receiver.logs.lines.some((l) => l.level === 40 && /asked to slow down/.test(String(l.msg)) && l.wait_ms === 300_000)).toBe(true);
    // The answered read ended (the replay's carries on); nothing of the source is read meanwhile.
    expect(all("SELECT state FROM jobs WHERE kind = 'fetch_result' AND event_id = ? ORDER BY id", eventId).map((r) => r.state)).toEqual(['done', 'pending']);
    c.completeInterview(b!.id);
    await pair.settle();
    pair.clock.advance(31_000);
    await pair.settle();
    pair.clock.advance(200_000);
    await pair.settle();
    expect(pair.calls.map((x) => x.status)).toEqual([429]);
    pair.clock.advance(75_000);
    await pair.settle();
    expect(pair.calls.map((x) => x.status)).toEqual([429, 200, 200]);
    for (const app of [a!, b!]) expect(row('SELECT state FROM interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'ready' });
  });

  it('a 503 without Retry-After holds only its own read', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const apps = [0, 1].map(() => c.createApplication({ jobId: c.createJob({}).id }));
    c.injectFault({ target: 'interview', applicationId: apps[0]!.id, status: 503, times: 1 });
    apps.forEach((a) => c.completeInterview(a.id));
    await pair.settle();
    expect(pair.calls.map((x) => x.status)).toEqual([503, 200]);
  });

  it('a paused source is probed with one read per period, whatever WORKER_CONCURRENCY; the first read that goes through releases the rest at once', async () => {
    pair = await startPair({ env: { WORKER_CONCURRENCY: '4' } });
    // Only settle() runs jobs: its claims take up to WORKER_CONCURRENCY jobs each, as the loop's do.
    await pair.receiver.app.worker.stop();
    const c = pair.sandbox.control;
    const apps = Array.from({ length: 6 }, () => c.createApplication({ jobId: c.createJob({}).id }));
    c.injectFault({ target: 'interview', status: 401, times: 1000 });
    apps.forEach((a) => c.completeInterview(a.id));
    await pair.settle();
    // The first claim's reads (up to 4) were sent before any answer said the key was refused.
    expect(new Set(pair.calls.map((x) => x.status))).toEqual(new Set([401]));
    // Each probe period: one request with the refused key, not one per free slot.
    for (let period = 1; period <= 3; period++) {
      const before = pair.calls.length;
      pair.clock.advance(5 * 60_000 + 1);
      await pair.settle();
      expect(pair.calls.slice(before).map((x) => x.status), `period ${period}`).toEqual([401]);
    }
    expect(all("SELECT attempts FROM jobs WHERE kind = 'fetch_result' AND state = 'pending'").map((r) => r.attempts)).toEqual([0, 0, 0, 0, 0, 0]);
    // The key works again: the next probe goes through, and every held read is made then, not a period later.
    c.clearFaults();
    const before = pair.calls.length;
    pair.clock.advance(5 * 60_000 + 1);
    const probeAt = pair.clock.now();
    await pair.settle();
    expect(pair.calls.slice(before).map((x) => [x.status, x.at])).toEqual(apps.map(() => [200, probeAt]));
    for (const a of apps) expect(row('SELECT state FROM interview_results WHERE application_id = ?', a.id)).toEqual({ state: 'ready' });
    expect(all('SELECT * FROM source_pauses')).toEqual([]);
  });

  it('a probe that only waited for the 30 s spacing does not lift the pause, and uses no period: the next read probes at once', async () => {
    pair = await startPair({ env: { WORKER_CONCURRENCY: '4' } });
    await pair.receiver.app.worker.stop();
    const c = pair.sandbox.control;
    c.revokeKey(ACME_KEY);
    const [a, b] = [0, 1].map(() => c.createApplication({ jobId: c.createJob({}).id }));
    c.completeInterview(a!.id);
    await pair.settle();
    const [pause] = all('SELECT source, paused_at FROM source_pauses');
    expect(pause).toMatchObject({ source: 'default' });
    // The same result announced again, and another application's: two more reads, held by the pause.
    c.emitEvent({ eventType: 'interview.completed', payload: { application: { id: a!.id, external_id: null } } });
    await pair.settle();
    pair.clock.advance(60_000);
    c.completeInterview(b!.id);
    await pair.settle();
    expect(all("SELECT id FROM jobs WHERE kind = 'fetch_result' AND state = 'pending'")).toHaveLength(3);
    // At the probe, the oldest held read is the re-announced one, and application a was read a
    // moment ago (as by a read beside it): it only waits for the spacing, which says nothing of
    // the key. The probe goes on to the next held read, which asks the service (refused).
    pair.clock.advance(4 * 60_000 + 1);
    db().prepare('UPDATE interview_results SET last_polled_at = ? WHERE application_id = ?').run(new Date(pair.clock.now() - 1_000).toISOString(), a!.id);
    const before = pair.calls.length;
    await pair.settle();
    expect(pair.calls.slice(before).map((x) => [x.status, x.path.includes(b!.id)])).toEqual([[401, true]]);
    expect(all("SELECT last_error FROM jobs WHERE kind = 'fetch_result' AND state = 'pending' ORDER BY id").map((r) => r.last_error)).toEqual(
      expect.arrayContaining(['waiting for the 30 s poll spacing']),
    );
    expect(all('SELECT source, paused_at FROM source_pauses')).toEqual([pause]);
    // The next period, one read again.
    const next = pair.calls.length;
    pair.clock.advance(5 * 60_000 + 1);
    await pair.settle();
    expect(pair.calls.slice(next).map((x) => x.status)).toEqual([401]);
  });

  it('does not follow a redirect: the bearer key never reaches the other host, and its Location is said by origin only', async () => {
    let hits = 0;
    const other = createServer((_req, res) => {
      hits++;
      res.end('{}');
    });
    await new Promise<void>((r) => other.listen(0, '127.0.0.1', () => r()));
    try {
      pair = await startPair();
      const c = pair.sandbox.control;
      const app = c.createApplication({ jobId: c.createJob({}).id });
      const port = (other.address() as AddressInfo).port;
      c.injectFault({ target: 'interview', applicationId: app.id, status: 302, times: 5, headers: { Location: `http://127.0.0.1:${port}/steal?login_hint=jane%40example.com&access_token=tok-LOCSECRET` } });
      c.completeInterview(app.id);
      await pair.settle();
      // Its first redirect puts the read back 5 minutes; its second, nothing else answered, pauses the source.
      pair.clock.advance(5 * 60_000);
      await pair.settle();
      expect(hits).toBe(0);
      expect(row("SELECT state, last_error FROM jobs WHERE kind = 'fetch_result'")).toMatchObject({ last_error: expect.stringMatching(/redirect not followed/) });
      // A sign-in redirect's query carries tokens and the user's address: logs, last_error and the
      // source's pause (which `status` shows) name the origin and a digest only.
      const said = [row("SELECT last_error FROM jobs WHERE kind = 'fetch_result'")!.last_error, row('SELECT detail FROM source_pauses')!.detail];
      for (const text of said) {
        expect(text).toContain(`(to http://127.0.0.1:${port}/… (url sha256 `);
        expect(text).not.toMatch(/tok-LOCSECRET|jane|steal/);
      }
      expect(pair.receiver.logs.raw.join('\n')).not.toMatch(/tok-LOCSECRET|jane|steal/);
      // The API URL is wrong, not this read: the source pauses (test/processing/redirectPause.test.ts), nothing is given up.
      expect(row("SELECT state, attempts FROM jobs WHERE kind = 'fetch_result'")).toEqual({ state: 'pending', attempts: 0 });
      expect(row('SELECT state FROM interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'processing' });
    } finally {
      other.close();
    }
  });

  it('reclaims a job whose worker died mid-job after its lease, and its effect lands once', async () => {
    pair = await startPair();
    const c = pair.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(app.id);
    await pair.sandbox.control.idle();
    const { queue, worker } = pair.receiver.app;
    await worker.runUntilIdle(2); // the process_event jobs (created + interview)
    // A worker claims the fetch and dies before finishing: its lease is never released.
    const [abandoned] = await queue.claim('dead-worker', 1, [], ['fetch_result']);
    expect(abandoned).toBeDefined();
    expect(await worker.runUntilIdle()).toBe(0);
    pair.clock.advance(60_001);
    expect(await worker.runUntilIdle()).toBe(1);
    expect(await queue.complete(abandoned!)).toBe(false);
    expect(row('SELECT state, polls FROM interview_results WHERE application_id = ?', app.id)).toEqual({ state: 'ready', polls: 1 });
    expect(all("SELECT event_id FROM event_processing WHERE state = 'settled' AND resource = 'interview'")).toHaveLength(1);
    expect(row("SELECT state, attempts FROM jobs WHERE kind = 'fetch_result'")).toEqual({ state: 'done', attempts: 2 });
  });
});
