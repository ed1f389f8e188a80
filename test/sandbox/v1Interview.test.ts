import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/sandbox/clock.js';
import { GLOBEX_KEY, startSandbox, type Running } from './helpers.js';

/** Decimal string with at most `int` integer digits and exactly `frac` decimals (spec 2.3). */
const decimal = (int: number, frac: number) => new RegExp(`^-?\\d{1,${int}}\\.\\d{${frac}}$`);

function expectRequired(obj: Record<string, unknown>, fields: string[]): void {
  for (const f of fields) expect(obj, f).toHaveProperty(f);
}

describe('v1 interview read (spec 2.3, 4.1)', () => {
  let run: Running;
  beforeAll(async () => {
    run = await startSandbox();
  });
  afterAll(() => run.sandbox.stop());
  const read = (id: string, key?: string) => run.api(`/api/v1/applications/${id}/interview`, key === undefined ? {} : { key });

  it('2.3: a completed interview has every required field and nested object, with decimals at the stated precision', async () => {
    for (const legacy of [false, true]) {
      const { application } = run.sandbox.control.runScenario(legacy ? 'legacy' : 'ineligible');
      const res = await read(application.id);
      expect(res.status).toBe(200);
      const d = res.body;
      expectRequired(d, ['attempt_number', 'candidate', 'created_at', 'id', 'interview_flow', 'interviewer_name', 'job_application_id', 'output', 'updated_at']);
      expect(d.job_application_id).toBe(application.id);
      expectRequired(d.candidate, ['id', 'created_at']);
      expect(d.candidate.email).toBe(application.candidate.email);
      expectRequired(d.interview_flow, ['id', 'job_posting_id', 'job_posting_title', 'interview_mode', 'intro', 'outro', 'language', 'retries_limit']);
      const out = d.output;
      expectRequired(out, ['criteria_scores', 'duration_minutes', 'id', 'questions', 'recording_audio_url', 'recording_status', 'recording_video_url', 'transcript']);
      expect(out.overall_score).toMatch(decimal(3, 2));
      expect(Number(out.overall_score)).toBeGreaterThanOrEqual(0);
      expect(Number(out.overall_score)).toBeLessThanOrEqual(5);
      expect(out.recording_duration_sec).toMatch(decimal(8, 2));
      expect(out.strengths.length).toBeGreaterThanOrEqual(2);
      expect(out.weaknesses.length).toBeLessThanOrEqual(5);
      expect(out.red_flags.length).toBeLessThanOrEqual(3);

      const n = out.transcript.length;
      expect(n).toBeGreaterThan(0);
      out.transcript.forEach((t: any, i: number) => {
        expectRequired(t, ['content', 'id', 'index', 'role', 'words']);
        expect(t.index).toBe(i);
        expect(t.start_sec).toMatch(decimal(9, 3));
        expect(t.end_sec).toMatch(decimal(9, 3));
        for (const w of t.words) expect(Object.keys(w).sort()).toEqual(['end', 'start', 'word']);
      });
      // The loops below check each nested object they meet: each must meet some.
      expect(out.transcript.flatMap((t: any) => t.words).length, 'transcript words').toBeGreaterThan(0);
      expect(out.questions.flatMap((q: any) => q.transcript_indices).length, 'questions and their transcript_indices').toBeGreaterThan(0);
      expect(out.criteria_scores.flatMap((cs: any) => cs.highlights).length, 'highlights').toBeGreaterThan(0);
      expect(out.criteria_scores.some((cs: any) => cs.criteria.is_knockout), 'a knockout criterion').toBe(true);
      for (const q of out.questions) {
        expectRequired(q, ['id', 'interview_flow_question_id', 'question', 'score', 'score_reasoning']);
        for (const idx of q.transcript_indices) expect(idx >= 0 && idx < n, `index ${idx} of ${n}`).toBe(true);
      }
      const range = { binary: [0, 1], out_of_5: [0, 5], percentage: [0, 100] } as const;
      const itemIds = new Set(out.transcript.map((t: any) => t.id));
      const systems = new Set<string>();
      for (const cs of out.criteria_scores) {
        expectRequired(cs, ['criteria', 'highlights', 'id', 'reasoning', 'weighted_score']);
        expectRequired(cs.criteria, ['criteria', 'description', 'id']);
        systems.add(cs.criteria.score_system);
        const [lo, hi] = range[cs.criteria.score_system as keyof typeof range];
        if (cs.score !== null) expect(cs.score >= lo && cs.score <= hi, `${cs.criteria.score_system} ${cs.score}`).toBe(true);
        expect(cs.weight).toMatch(decimal(3, 2));
        if (cs.weighted_score !== null) expect(cs.weighted_score).toMatch(decimal(8, 2));
        if (cs.criteria.is_knockout) expect(cs.criteria.knockout_threshold).not.toBeNull();
        for (const h of cs.highlights) {
          expectRequired(h, ['highlight', 'id', 'reason_explanation', 'reason_summary', 'transcript_item_id']);
          expect(h.highlight_time).toMatch(decimal(7, 3));
          expect(itemIds.has(h.transcript_item_id)).toBe(true);
        }
      }
      expect(systems.has('binary') && systems.has('out_of_5')).toBe(true);
      if (legacy) expect(systems.has('percentage')).toBe(true);
      else expect(d.pipeline_phase).toBe('knocked_out');
    }
  });

  it('4.1: repeated reads are identical; another organization gets 404; no interview yet is 404', async () => {
    const { application } = run.sandbox.control.runScenario('lifecycle');
    expect((await read(application.id)).body).toEqual((await read(application.id)).body);
    expect((await read(application.id, GLOBEX_KEY)).status).toBe(404);
    const job = run.sandbox.control.createJob();
    const fresh = run.sandbox.control.createApplication({ jobId: job.id });
    expect((await read(fresh.id)).body[0].code).toBe('not_found');
  });

  it('opted-out candidate: status and phase opted_out, the reason in last_activity_note, output null', async () => {
    const { application } = run.sandbox.control.runScenario('opted_out');
    const res = await read(application.id);
    expect(res.body).toMatchObject({ status: 'opted_out', pipeline_phase: 'opted_out', output: null, last_activity_note: expect.stringContaining('opted out') });
  });

  it('scoring failed: the v1 read shows the call that took place, ended failed, with its transcript and no scores (v2 says unavailable/scoring_failed)', async () => {
    const { application } = run.sandbox.control.runScenario('scoring_failed');
    expect((await run.api(`/api/v2/applications/${application.id}/interview`)).body).toEqual({ status: 'unavailable', reason: 'scoring_failed', result: null });
    const res = await read(application.id);
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ status: 'failed', pipeline_phase: 'failed', job_application_id: application.id, last_activity_note: expect.stringContaining('scoring failed') });
    expectRequired(res.body, ['attempt_number', 'candidate', 'created_at', 'id', 'interview_flow', 'interviewer_name', 'job_application_id', 'output', 'updated_at']);
    const out = res.body.output;
    expectRequired(out, ['criteria_scores', 'duration_minutes', 'id', 'questions', 'recording_audio_url', 'recording_status', 'recording_video_url', 'transcript']);
    expect(out.transcript.length).toBeGreaterThan(0);
    expect(out).toMatchObject({ recording_status: 'completed', overall_score: null, summary: null, strengths: null, questions: [], criteria_scores: [] });
    expect((await read(application.id)).body).toEqual(res.body);
    // Only the interview's scoring concerns the call: a failed CV evaluation leaves v1 without one.
    const other = run.sandbox.control.createApplication({ jobId: run.sandbox.control.createJob().id });
    run.sandbox.control.failScoring(other.id, 'cv-evaluation');
    expect((await read(other.id)).status).toBe(404);
  });

  it('resultDelayMs: a finished call reads as still being evaluated (status processing, phase evaluating, no output) until its scores are ready, legacy or not', async () => {
    const clock = createManualClock(Date.parse('2026-03-01T09:00:00Z'));
    const slow = await startSandbox({ clock, resultDelayMs: 60_000 });
    try {
      for (const name of ['legacy', 'ineligible'] as const) {
        const { application } = slow.sandbox.control.runScenario(name);
        const early = await slow.api(`/api/v1/applications/${application.id}/interview`);
        expect(early.status).toBe(200);
        expect(early.body).toMatchObject({ status: 'processing', pipeline_phase: 'evaluating', output: null, job_application_id: application.id });
        clock.advance(60_000);
        const ready = await slow.api(`/api/v1/applications/${application.id}/interview`);
        expect(ready.body.status).toBe('completed');
        expect(ready.body.pipeline_phase).toBe(name === 'ineligible' ? 'knocked_out' : 'completed');
        expect(ready.body.output).not.toBeNull();
      }
    } finally {
      await slow.sandbox.stop();
    }
  });
});
