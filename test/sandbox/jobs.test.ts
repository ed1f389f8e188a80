import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/sandbox/clock.js';
import { GLOBEX_ORG, startSandbox, type Running } from './helpers.js';

describe('jobs and pagination (spec 2.2, 2.6, 4.2, 4.6, 8)', () => {
  let run: Running;
  const clock = createManualClock(Date.parse('2025-01-01T00:00:00Z'));
  beforeAll(async () => {
    run = await startSandbox({ clock });
    // 205 jobs in Globex: enough to see the default page of 50 and the clamp at 200.
    for (let i = 0; i < 205; i++) {
      clock.advance(1000);
      run.sandbox.control.createJob({ organizationId: GLOBEX_ORG, title: `Job ${String(i).padStart(3, '0')}`, status: i % 5 === 0 ? 'closed' : 'active' });
    }
  });
  afterAll(() => run.sandbox.stop());
  const globex = 'sk-globex01.sandboxGlobexKeyOne000000000';

  it('8: limit defaults to 50; count is the total; next/previous are absolute URLs', async () => {
    const first = await run.api('/api/v2/jobs', { key: globex });
    expect(first.status).toBe(200);
    expect(first.body.count).toBe(205);
    expect(first.body.results).toHaveLength(50);
    expect(first.body.previous).toBeNull();
    const next = new URL(first.body.next);
    expect(next.origin).toBe(run.url);
    expect(next.searchParams.get('offset')).toBe('50');
    const second = await run.api(next.pathname + next.search, { key: globex });
    expect(second.body.results).toHaveLength(50);
    expect(second.body.previous).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/api\/v2\/jobs\?/);
  });

  it('8: a limit above 200 is clamped to 200, not rejected', async () => {
    const res = await run.api('/api/v2/jobs?limit=1000', { key: globex });
    expect(res.status).toBe(200);
    expect(res.body.results).toHaveLength(200);
    expect(new URL(res.body.next).searchParams.get('limit')).toBe('200');
  });

  it('2.2: following next until null visits every job exactly once', async () => {
    const seen = new Set<string>();
    let path: string | null = '/api/v2/jobs?limit=60&ordering=title';
    for (let pages = 0; path !== null && pages < 10; pages++) {
      const res = await run.api(path, { key: globex });
      for (const j of res.body.results) seen.add(j.id);
      path = res.body.next === null ? null : new URL(res.body.next).pathname + new URL(res.body.next).search;
    }
    expect(path).toBeNull();
    expect(seen.size).toBe(205);
  });

  it('4.2: sorts by created_at or title (leading - descends), searches title and description, filters by status', async () => {
    const byTitle = await run.api('/api/v2/jobs?ordering=-title&limit=2', { key: globex });
    expect(byTitle.body.results.map((j: any) => j.title)).toEqual(['Job 204', 'Job 203']);
    const oldest = await run.api('/api/v2/jobs?ordering=created_at&limit=1', { key: globex });
    expect(oldest.body.results[0].title).toBe('Job 000');
    const search = await run.api('/api/v2/jobs?search=job%2019', { key: globex });
    expect(search.body.results.map((j: any) => j.title).sort()).toEqual(Array.from({ length: 10 }, (_, i) => `Job 19${i}`));
    const own = await run.api('/api/v2/jobs', { method: 'POST', body: { title: 'Forklift Operator', description: 'Zeppelin hangar logistics' } });
    const byDescription = await run.api('/api/v2/jobs?search=ZEPPELIN');
    expect(byDescription.body.results.map((j: any) => j.id)).toEqual([own.body.id]);
    const closed = await run.api('/api/v2/jobs?status=closed&limit=200', { key: globex });
    expect(closed.body.count).toBe(41);
    expect(closed.body.results.every((j: any) => j.status === 'closed')).toBe(true);
    const bad = await run.api('/api/v2/jobs?ordering=salary', { key: globex });
    expect(bad.status).toBe(400);
    expect(bad.body[0]).toMatchObject({ code: 'invalid_input', attr: 'ordering' });
  });

  it('4.2: the status filter takes the job status enum (unknown is 400, attr status); filters combine with search and ordering', async () => {
    const bad = await run.api('/api/v2/jobs?status=open', { key: globex });
    expect(bad.status).toBe(400);
    expect(bad.body[0]).toMatchObject({ code: 'invalid_input', attr: 'status' });
    const combined = await run.api('/api/v2/jobs?status=closed&search=job%2000&ordering=-title', { key: globex });
    expect(combined.body.results.map((j: any) => j.title)).toEqual(['Job 005', 'Job 000']);
    expect((await run.api('/api/v2/jobs?search=%20%20', { key: globex })).body.count).toBe(205);
  });

  it('2.6: a created job has every field of the list item and shows up only in its organization', async () => {
    const res = await run.api('/api/v2/jobs', { method: 'POST', body: { title: 'Night Nurse', description: 'Ward 4', salary: { min: '20.00', max: '25.00', currency: 'EUR', frequency: 'per_hour' } } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body).sort()).toEqual(
      ['additional_information', 'created_at', 'cv_requirement', 'description', 'employment_type', 'external_id', 'external_id_source', 'id', 'interview_config_id', 'is_multilingual', 'is_public', 'language', 'location', 'salary', 'status', 'title'].sort(),
    );
    const acme = await run.api('/api/v2/jobs?search=night%20nurse');
    expect(acme.body.results.map((j: any) => j.id)).toEqual([res.body.id]);
    expect((await run.api('/api/v2/jobs?search=night%20nurse', { key: globex })).body.count).toBe(0);
  });

  it('4.6: POST /jobs with Idempotency-Key replays (Idempotent-Replay: true); a different body is 409', async () => {
    const headers = { 'Idempotency-Key': 'job-create-1' };
    const first = await run.api('/api/v2/jobs', { method: 'POST', headers, body: { title: 'Barista', description: 'Coffee' } });
    expect(first.status).toBe(201);
    expect(first.headers.get('idempotent-replay')).toBeNull();
    const replay = await run.api('/api/v2/jobs', { method: 'POST', headers, body: { description: 'Coffee', title: 'Barista' } });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replay')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect((await run.api('/api/v2/jobs?search=barista')).body.count).toBe(1);
    const conflict = await run.api('/api/v2/jobs', { method: 'POST', headers, body: { title: 'Head Barista' } });
    expect(conflict.status).toBe(409);
    expect(conflict.body[0].code).toBe('idempotency_key_conflict');
    // The key decides before the new body is validated (an invalid body is still a conflict).
    const invalid = await run.api('/api/v2/jobs', { method: 'POST', headers, body: {} });
    expect([invalid.status, invalid.body[0].code]).toEqual([409, 'idempotency_key_conflict']);
  });

  it('4.6: a body nested 20,000 levels deep is answered the same with an Idempotency-Key as without (not a 500)', async () => {
    const deep = `${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}`;
    const post = (headers: Record<string, string>) =>
      fetch(`${run.url}/api/v2/jobs`, { method: 'POST', headers: { authorization: `Bearer ${globex}`, 'content-type': 'application/json', ...headers }, body: `{"title":"Deep","extra":${deep}}` });
    const without = await post({});
    const withKey = await post({ 'Idempotency-Key': 'job-deep-1' });
    expect(withKey.status, await withKey.clone().text()).toBe(without.status);
    expect(withKey.status).toBe(201);
    // The same body again under the key: replayed, so its fingerprint was made.
    const again = await post({ 'Idempotency-Key': 'job-deep-1' });
    expect(again.headers.get('idempotent-replay')).toBe('true');
  });
});

describe('jobs created at the same instant (spec 4.2 ordering)', () => {
  it('-created_at (the default) lists them newest first and created_at oldest first, page by page', async () => {
    // Ties on created_at fell to the jobs' random ids: with a manual clock (or jobs made within a
    // millisecond) the default "newest first" came out in an order that changed from run to run.
    const run = await startSandbox({ clock: createManualClock(Date.parse('2025-06-01T00:00:00Z')) });
    try {
      const titles = ['one', 'two', 'three', 'four', 'five', 'six'];
      for (const title of titles) expect((await run.api('/api/v2/jobs', { method: 'POST', body: { title } })).status).toBe(201);
      const list = async (query: string) => (await run.api(`/api/v2/jobs?${query}`)).body.results.map((j: { title: string }) => j.title);
      expect(await list('')).toEqual([...titles].reverse());
      expect(await list('ordering=created_at')).toEqual(titles);
      const pages: string[] = [];
      for (let offset = 0; offset < titles.length; offset += 2) pages.push(...(await list(`limit=2&offset=${offset}`)));
      expect(pages).toEqual([...titles].reverse());
    } finally {
      await run.sandbox.stop();
    }
  });
});
