import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createManualClock, type ManualClock } from '../../src/sandbox/clock.js';
import { GLOBEX_KEY, startSandbox, type Running } from './helpers.js';

describe('v2 scoring reads (spec 2.10, 3.6, 4.2)', () => {
  let run: Running;
  let clock: ManualClock;
  beforeEach(async () => {
    clock = createManualClock(Date.parse('2025-05-01T08:00:00Z'));
    run = await startSandbox({ clock, resultDelayMs: 90_000 });
  });
  afterEach(() => run.sandbox.stop());
  const read = (id: string, resource: string, key?: string) => run.api(`/api/v2/applications/${id}/${resource}`, key === undefined ? {} : { key });
  const newApplication = (legacy = false) => {
    const job = run.sandbox.control.createJob({ legacy });
    return run.sandbox.control.createApplication({ jobId: job.id }).id;
  };

  it('3.6: before any result, every read is 200 processing with a reason and result null (never 404)', async () => {
    const id = newApplication();
    // Each with its own reason, as docs/sandbox.md lists them.
    const reasons = { interview: 'interview_not_completed', 'cv-evaluation': 'cv_evaluation_pending', insights: 'insights_pending' };
    for (const [resource, reason] of Object.entries(reasons)) {
      const res = await read(id, resource);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: 'processing', reason, result: null });
    }
  });

  it('4.2: an unknown application or another organization\'s is 404 not_found', async () => {
    const id = newApplication();
    for (const resource of ['interview', 'cv-evaluation', 'insights']) {
      expect((await read('00000000-0000-4000-8000-000000000000', resource)).body[0].code).toBe('not_found');
      const foreign = await read(id, resource, GLOBEX_KEY);
      expect(foreign.status).toBe(404);
      expect(foreign.body[0].code).toBe('not_found');
    }
  });

  it('3.6: after interview.completed the read stays processing until the result delay has passed, then is the full result', async () => {
    const id = newApplication();
    run.sandbox.control.completeInterview(id, { competencyScores: [4, 5, 3] });
    expect((await read(id, 'interview')).body).toMatchObject({ status: 'processing', result: null });
    clock.advance(89_999);
    expect((await read(id, 'interview')).body.status).toBe('processing');
    clock.advance(1);
    const res = await read(id, 'interview');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ application_id: id, status: 'completed', overall_score: 4, is_eligible: true, ineligibility_reasons: [] });
    expect(res.body).not.toHaveProperty('result');
    for (const c of res.body.criteria_results) {
      expect(['scored', 'not_assessed']).toContain(c.outcome);
      if (c.type === 'competency') expect([1, 2, 3, 4, 5]).toContain(c.score);
      if (c.type === 'qualification') expect(typeof c.passed).toBe('boolean');
    }
  });

  it('2.10: an ineligible candidate has is_eligible false and names exactly the failed required criteria', async () => {
    const id = newApplication();
    run.sandbox.control.setResultDelay(0);
    run.sandbox.control.completeInterview(id, { failedQualifications: ['Weekend availability'], notAssessed: ['Right to work'] });
    const res = await read(id, 'interview');
    expect(res.body.is_eligible).toBe(false);
    expect(res.body.ineligibility_reasons).toEqual(['Weekend availability']);
    const notAssessed = res.body.criteria_results.find((c: any) => c.name === 'Right to work');
    expect(notAssessed).toMatchObject({ outcome: 'not_assessed', passed: null });
    run.sandbox.control.completeInsights(id);
    expect((await read(id, 'insights')).body).toMatchObject({ is_eligible: false, ineligibility_reasons: ['Weekend availability'], hiring_recommendation: expect.any(String) });
  });

  it('2.10: non-completed interview outcomes have overall_score null and nothing assessed', async () => {
    for (const outcome of ['unreachable', 'failed', 'opted_out'] as const) {
      const id = newApplication();
      run.sandbox.control.completeInterview(id, { outcome });
      clock.advance(90_000);
      const res = await read(id, 'interview');
      expect(res.body).toMatchObject({ status: outcome, overall_score: null, is_eligible: true });
      expect(res.body.criteria_results.every((c: any) => c.outcome === 'not_assessed')).toBe(true);
    }
  });

  it('3.6: terminal unavailable with reason interview_not_available (legacy job, opt-out), scoring_failed, no_result', async () => {
    const legacy = newApplication(true);
    run.sandbox.control.completeInterview(legacy);
    clock.advance(90_000);
    expect((await read(legacy, 'interview')).body).toEqual({ status: 'unavailable', reason: 'interview_not_available', result: null });
    const optedOut = newApplication();
    run.sandbox.control.optOut(optedOut);
    expect((await read(optedOut, 'interview')).body).toEqual({ status: 'unavailable', reason: 'interview_not_available', result: null });
    const failed = newApplication();
    run.sandbox.control.failScoring(failed);
    expect((await read(failed, 'interview')).body).toEqual({ status: 'unavailable', reason: 'scoring_failed', result: null });
    run.sandbox.control.markUnavailable(failed, 'cv-evaluation', 'no_result');
    expect((await read(failed, 'cv-evaluation')).body).toEqual({ status: 'unavailable', reason: 'no_result', result: null });
  });

  it('3.6: unavailable is terminal and a ready result never turns unavailable: the control API refuses both (409), the read does not change', async () => {
    const failed = newApplication();
    run.sandbox.control.failScoring(failed);
    expect(() => run.sandbox.control.completeInterview(failed)).toThrow(/unavailable \(scoring_failed\): that is terminal/);
    run.sandbox.control.markUnavailable(failed, 'cv-evaluation', 'no_result');
    expect(() => run.sandbox.control.completeCvEvaluation(failed)).toThrow(/terminal/);
    const optedOut = newApplication();
    run.sandbox.control.optOut(optedOut);
    expect(() => run.sandbox.control.completeInterview(optedOut)).toThrow(/terminal/);
    const ready = newApplication();
    run.sandbox.control.completeInterview(ready);
    expect(() => run.sandbox.control.failScoring(ready)).toThrow(/is ready: it cannot become unavailable/);
    expect(() => run.sandbox.control.optOut(ready)).toThrow(/is ready/);
    clock.advance(90_000);
    expect((await read(failed, 'interview')).body).toEqual({ status: 'unavailable', reason: 'scoring_failed', result: null });
    expect((await read(ready, 'interview')).body).toMatchObject({ status: 'completed' });
    // A ready result may be replaced by another one (a new completion).
    expect(() => run.sandbox.control.completeInterview(ready, { eligible: false })).not.toThrow();
  });

  it('CV evaluation and insights turn from processing into their result objects', async () => {
    const id = newApplication();
    run.sandbox.control.completeInterview(id, { competencyScores: [5, 5, 4] });
    run.sandbox.control.completeCvEvaluation(id, { overallScore: 3.5 });
    run.sandbox.control.completeInsights(id);
    clock.advance(90_000);
    const cv = await read(id, 'cv-evaluation');
    expect(cv.body).toMatchObject({ application_id: id, status: 'completed', overall_score: 3.5 });
    const insights = await read(id, 'insights');
    expect(insights.body).toMatchObject({ application_id: id, overall_score: 4.09, hiring_recommendation: 'yes', is_eligible: true, interview_overall_score: 4.67, cv_overall_score: 3.5 });
    // Without an interview result, nothing says the candidate is ineligible: is_eligible mirrors the interview's, true.
    const noInterview = newApplication();
    run.sandbox.control.completeCvEvaluation(noInterview, { overallScore: 2 });
    run.sandbox.control.completeInsights(noInterview);
    clock.advance(90_000);
    expect((await read(noInterview, 'insights')).body).toMatchObject({ overall_score: 2, is_eligible: true, ineligibility_reasons: [], interview_overall_score: null });
  });

  it('fault injection: a read answers 500, 429 with Retry-After, or 302 the given number of times, then normally', async () => {
    const id = newApplication();
    run.sandbox.control.injectFault({ target: 'interview', applicationId: id, status: 500, times: 2 });
    run.sandbox.control.injectFault({ target: 'insights', status: 429, headers: { 'Retry-After': '30' } });
    run.sandbox.control.injectFault({ target: 'cv-evaluation', status: 302, headers: { Location: 'https://portal.example.com/login' } });
    const first = await read(id, 'interview');
    expect(first.status).toBe(500);
    expect(first.body[0].code).toBe('error');
    expect((await read(id, 'interview')).status).toBe(500);
    expect((await read(id, 'interview')).status).toBe(200);
    const throttled = await read(id, 'insights');
    expect(throttled.status).toBe(429);
    expect(throttled.headers.get('retry-after')).toBe('30');
    const redirect = await read(id, 'cv-evaluation');
    expect(redirect.status).toBe(302);
    expect(redirect.headers.get('location')).toBe('https://portal.example.com/login');
    expect((await read(id, 'cv-evaluation')).status).toBe(200);
  });

  it('an injected 429 without a body or headers answers what spec 7 shows: an error array with a code of its table, no Retry-After', async () => {
    const id = newApplication();
    run.sandbox.control.injectFault({ target: 'interview', status: 429 });
    const res = await read(id, 'interview');
    expect([res.status, res.headers.get('retry-after')]).toEqual([429, null]);
    expect(res.body).toEqual([{ code: 'error', detail: expect.any(String), attr: null }]);
  });
});
