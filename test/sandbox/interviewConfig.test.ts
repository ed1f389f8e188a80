import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GLOBEX_KEY, startSandbox, type Running } from './helpers.js';

describe('interview configuration generate operations (spec 4.2, 7, 9)', () => {
  let run: Running;
  beforeAll(async () => {
    run = await startSandbox();
  });
  afterAll(() => run.sandbox.stop());
  const newJob = async () => (await run.api('/api/v2/jobs', { method: 'POST', body: { title: 'Night Porter', description: 'Front desk, nights' } })).body;
  const generate = (jobId: string, what: 'criteria' | 'questions', body?: unknown, key?: string) =>
    run.api(`/api/v2/jobs/${jobId}/interview-config/${what}/generate`, { method: 'POST', ...(body === undefined ? {} : { body }), ...(key === undefined ? {} : { key }) });

  it('4.2: criteria/generate returns draft competencies and qualifications for the job', async () => {
    const job = await newJob();
    const res = await generate(job.id, 'criteria');
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ job_id: job.id, interview_config_id: job.interview_config_id });
    expect(res.body.criteria).toHaveLength(5);
    for (const [i, c] of res.body.criteria.entries()) {
      expect(c).toEqual({ name: expect.any(String), description: expect.any(String), type: expect.stringMatching(/^(competency|qualification)$/), is_required: expect.any(Boolean), sequence_number: i + 1 });
    }
    expect(res.body.criteria.some((c: any) => c.type === 'qualification' && c.is_required)).toBe(true);
    expect(JSON.stringify(res.body.criteria)).toContain('Night Porter');
    expect((await generate(job.id, 'criteria', { count: 8 })).body.criteria).toHaveLength(8);
  });

  it('4.2: questions/generate returns draft questions, each tied to a criterion', async () => {
    const job = await newJob();
    const res = await generate(job.id, 'questions', { count: 3 });
    expect(res.status).toBe(200);
    expect(res.body.questions).toHaveLength(3);
    expect(res.body.questions[0]).toEqual({ sequence_number: 1, question: expect.stringContaining('Night Porter'), criterion: expect.any(String), is_knockout: false });
    expect((await generate(job.id, 'questions')).body.questions).toHaveLength(6);
  });

  it('4.2: nothing is saved: a GET of the job (and the job list) is unchanged after both operations', async () => {
    const job = await newJob();
    const before = await run.api(`/api/v2/jobs/${job.id}`);
    const listBefore = await run.api('/api/v2/jobs?limit=200');
    await generate(job.id, 'criteria');
    await generate(job.id, 'questions');
    expect((await run.api(`/api/v2/jobs/${job.id}`)).body).toEqual(before.body);
    expect((await run.api('/api/v2/jobs?limit=200')).body).toEqual(listBefore.body);
  });

  it('4.2, 7, 9: a job not on the v3 engine (legacy) is 400 interview_version_mismatch', async () => {
    const legacy = run.sandbox.control.createJob({ legacy: true });
    for (const what of ['criteria', 'questions'] as const) {
      const res = await generate(legacy.id, what);
      expect(res.status).toBe(400);
      expect(res.body).toEqual([{ code: 'interview_version_mismatch', detail: expect.any(String), attr: null }]);
    }
  });

  it('4.2, 7: another organization\'s job is 404; a bad count is 400; GET is 405; invalid JSON is parse_error', async () => {
    const job = await newJob();
    expect((await generate(job.id, 'criteria', undefined, GLOBEX_KEY)).status).toBe(404);
    expect((await generate(job.id, 'criteria', { count: 0 })).body[0]).toMatchObject({ code: 'invalid_input', attr: 'count' });
    expect((await run.api(`/api/v2/jobs/${job.id}/interview-config/questions/generate`)).status).toBe(405);
    const broken = await run.api(`/api/v2/jobs/${job.id}/interview-config/questions/generate`, { method: 'POST', rawBody: '{', headers: { 'content-type': 'application/json' } });
    expect(broken.body[0].code).toBe('parse_error');
  });
});
