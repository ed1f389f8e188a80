import { afterEach, describe, expect, it } from 'vitest';
import { startPair, type Pair } from '../helpers/pair.js';

let pair: Pair | undefined;
afterEach(async () => {
  await pair?.close();
  pair = undefined;
});

const HOURS_2 = 2 * 3_600_000;

/**
 * The machine's clock was two hours fast (an interview's result read, still processing, was
 * polled and rescheduled on it), then NTP set it right: the wall clock steps back two hours while
 * the receiver runs. `step()` moves both by 10 s of real time and lets everything due run.
 */
async function readsAfterClockStepsBack(opts: { whileStopped?: boolean } = {}) {
  const { p, c, app, reads } = await firstReadStillProcessing();
  const steppedAt = p.clock.now() - HOURS_2;
  p.clock.set(steppedAt);
  if (opts.whileStopped) await p.restartReceiver();
  // Real time since the step, in 10 s steps: 5 minutes at most.
  const readsAt: number[] = [];
  for (let i = 0; i < 30; i++) {
    p.clock.advance(10_000);
    await p.settle();
    readsAt.push(...reads().slice(1 + readsAt.length).map((r) => r.at - steppedAt));
  }
  return { readsAt, app, c, p, reads };
}

/** At 11:00 on the fast clock, an interview is completed and its result's first read says it is still processing. */
async function firstReadStillProcessing() {
  pair = await startPair({ startAt: Date.parse('2026-11-02T11:00:00Z') });
  const p = pair;
  const c = p.sandbox.control;
  c.setResultDelay(6 * 3_600_000);
  const app = c.createApplication({ jobId: c.createJob({}).id });
  c.completeInterview(app.id);
  await p.settle();
  const reads = () => p.calls.filter((x) => x.path === `/api/v2/applications/${app.id}/interview`);
  expect(reads()).toHaveLength(1);
  return { p, c, app, reads };
}

describe('the wall clock steps back while the receiver runs (NTP)', () => {
  it('a result read rescheduled before the step runs after its spacing, not hours later, and never sooner than 30 s apart', async () => {
    const { readsAt } = await readsAfterClockStepsBack();
    // The last read was just before the step: the next is due 30 s after it (not 2 h 30 s), then
    // 60 s, 2 min ... apart (pollDelay), all in the 5 minutes of real time that followed.
    expect(readsAt.length).toBeGreaterThanOrEqual(2);
    expect(readsAt[0]).toBeGreaterThanOrEqual(30_000);
    expect(readsAt[0]).toBeLessThanOrEqual(40_000);
    for (let i = 1; i < readsAt.length; i++) expect(readsAt[i]! - readsAt[i - 1]!).toBeGreaterThanOrEqual(30_000);
  });

  it('the same when the clock stepped back while the receiver was stopped', async () => {
    const { readsAt } = await readsAfterClockStepsBack({ whileStopped: true });
    expect(readsAt.length).toBeGreaterThanOrEqual(2);
    expect(readsAt[0]).toBeGreaterThanOrEqual(30_000);
    expect(readsAt[0]).toBeLessThanOrEqual(40_000);
    for (let i = 1; i < readsAt.length; i++) expect(readsAt[i]! - readsAt[i - 1]!).toBeGreaterThanOrEqual(30_000);
  });

  it('a result re-announced after the step is read again: the one fetched before it is not newer for being dated later', async () => {
    pair = await startPair({ startAt: Date.parse('2026-11-02T11:00:00Z') });
    const p = pair;
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    const scored = (eligible: boolean) => ({ status: 'completed', overall_score: eligible ? 4 : 2, is_eligible: eligible, ineligibility_reasons: eligible ? [] : ['work permit'], criteria_results: [] });
    const interviewDone = (eligible: boolean) =>
      c.emitEvent({ eventType: 'interview.completed', payload: { application: { id: app.id, external_id: null }, interview: { id: 'iv-1', result: { overall_score: eligible ? 4 : 2, is_eligible: eligible } } } });
    const db = p.receiver.app.database.ingestSqlite;
    c.injectFault({ target: 'interview', applicationId: app.id, status: 200, body: scored(false) });
    interviewDone(false);
    await p.settle();
    expect(db.prepare('SELECT is_eligible FROM interview_results WHERE application_id = ?').get(app.id)).toEqual({ is_eligible: 0 });

    // The clock steps back two hours; ten minutes later the interview is scored again: eligible.
    // (The sandbox shares the clock, so its created_at steps back too, unlike a real service's:
    // the application's fold is not looked at here, only the read.)
    p.clock.set(p.clock.now() - HOURS_2 + 10 * 60_000);
    c.clearFaults();
    c.injectFault({ target: 'interview', applicationId: app.id, status: 200, body: scored(true) });
    interviewDone(true);
    const isEligible = () => (db.prepare('SELECT is_eligible FROM interview_results WHERE application_id = ?').get(app.id) as { is_eligible: number }).is_eligible;
    for (let i = 0; i < 12 && isEligible() !== 1; i++) {
      await p.settle();
      if (isEligible() !== 1) p.clock.advance(10_000);
    }
    expect(db.prepare('SELECT is_eligible FROM interview_results WHERE application_id = ?').get(app.id)).toEqual({ is_eligible: 1 });
  });

  /**
   * The first read of an interview's result answers `fault`, then the clock steps back two hours;
   * 30 s steps of real time (at most `maxMs`) until the second read. The reads' statuses, and when
   * the second came after the step.
   */
  async function secondReadAfterStep(fault: { status: number; headers?: Record<string, string> }, maxMs: number) {
    pair = await startPair({ startAt: Date.parse('2026-11-02T11:00:00Z') });
    const p = pair;
    const c = p.sandbox.control;
    const app = c.createApplication({ jobId: c.createJob({}).id });
    c.injectFault({ target: 'interview', applicationId: app.id, ...fault });
    c.completeInterview(app.id);
    await p.settle();
    const reads = () => p.calls.filter((x) => x.path === `/api/v2/applications/${app.id}/interview`);
    expect(reads()).toHaveLength(1);
    const steppedAt = p.clock.now() - HOURS_2;
    p.clock.set(steppedAt);
    for (let i = 0; i < maxMs / 30_000 && reads().length < 2; i++) {
      p.clock.advance(30_000);
      await p.settle();
    }
    return { statuses: reads().map((r) => r.status), secondAfter: reads()[1] ? reads()[1]!.at - steppedAt : null };
  }

  it('a source the service asked to wait (429, Retry-After) is read again when the wait is over, not a step later', async () => {
    // The wait is 600 s and its jitter (a minute at most).
    const { statuses, secondAfter } = await secondReadAfterStep({ status: 429, headers: { 'Retry-After': '600' } }, 15 * 60_000);
    expect(statuses).toEqual([429, 200]);
    expect(secondAfter).toBeGreaterThanOrEqual(600_000);
    expect(secondAfter).toBeLessThanOrEqual(690_000);
  });

  it('a receiver restarted after a step it handled moves nothing again: a Retry-After the service gave since is waited out', async () => {
    const { p, c, app, reads } = await firstReadStillProcessing();
    // The step, seen and handled by the running receiver; its next read is answered 429, Retry-After 600.
    p.clock.set(p.clock.now() - HOURS_2);
    c.injectFault({ target: 'interview', applicationId: app.id, status: 429, headers: { 'Retry-After': '600' } });
    for (let i = 0; i < 10 && reads().length < 2; i++) {
      p.clock.advance(10_000);
      await p.settle();
    }
    expect(reads().map((r) => r.status)).toEqual([200, 429]);
    const throttledAt = reads()[1]!.at;
    // A minute later the receiver is restarted (a deploy): the event it received before the step
    // is still dated two hours ahead of the clock, which is no new step.
    p.clock.advance(60_000);
    await p.restartReceiver();
    for (let i = 0; i < 30 && reads().length < 3; i++) {
      await p.settle();
      if (reads().length < 3) p.clock.advance(30_000);
    }
    expect(reads()).toHaveLength(3);
    expect(reads()[2]!.at - throttledAt).toBeGreaterThanOrEqual(600_000);
  });

  it('a receiver restarted after a step it handled moves nothing again: a pause made since is probed a period after it, not at once', async () => {
    const { p, c, app, reads } = await firstReadStillProcessing();
    // The step, seen and handled by the running receiver; its next read is refused (401): the source pauses.
    p.clock.set(p.clock.now() - HOURS_2);
    c.injectFault({ target: 'interview', applicationId: app.id, status: 401 });
    for (let i = 0; i < 10 && reads().length < 2; i++) {
      p.clock.advance(10_000);
      await p.settle();
    }
    expect(reads().map((r) => r.status)).toEqual([200, 401]);
    const pausedAt = reads()[1]!.at;
    c.clearFaults();
    // Another interview is completed meanwhile: its read is due, held by the pause until the probe.
    const other = c.createApplication({ jobId: c.createJob({}).id });
    c.completeInterview(other.id);
    await p.settle();
    const allReads = () => p.calls.filter((x) => x.path.startsWith('/api/v2/applications/') && x.path.endsWith('/interview'));
    expect(allReads()).toHaveLength(2);
    // A minute later the receiver is restarted (the event received before the step is still dated
    // two hours ahead): the probe is still due 5 minutes after the pause.
    p.clock.advance(60_000);
    await p.restartReceiver();
    for (let i = 0; i < 20 && allReads().length < 3; i++) {
      await p.settle();
      if (allReads().length < 3) p.clock.advance(30_000);
    }
    // The probe, then (the key works) the rest at once.
    expect(allReads().length).toBeGreaterThanOrEqual(3);
    expect(allReads()[2]!.at - pausedAt).toBeGreaterThanOrEqual(5 * 60_000);
  });

  it('a source paused on a refused key is probed a period (5 min) after its last probe, not a step later', async () => {
    // The key works again after that one 401.
    const { statuses, secondAfter } = await secondReadAfterStep({ status: 401 }, 10 * 60_000);
    expect(statuses).toEqual([401, 200]);
    expect(secondAfter).toBeLessThanOrEqual(5 * 60_000 + 30_000);
  });
});
