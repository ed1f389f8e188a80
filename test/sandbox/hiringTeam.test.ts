import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ACME_KEY_2, ACME_ORG, GLOBEX_KEY, GLOBEX_ORG, startSandbox, type Running } from './helpers.js';

describe('hiring teams (spec 2.7, 3.5, 4.4)', () => {
  let run: Running;
  let jobId: string;
  beforeEach(async () => {
    run = await startSandbox();
    jobId = (await run.api('/api/v2/jobs', { method: 'POST', body: { title: 'Shift Lead' } })).body.id;
  });
  afterEach(() => run.sandbox.stop());
  const team = (job = jobId) => `/api/v2/jobs/${job}/hiring-team`;
  const add = (body: unknown, opts: { key?: string; headers?: Record<string, string>; job?: string } = {}) =>
    run.api(team(opts.job), { method: 'POST', body, ...(opts.key === undefined ? {} : { key: opts.key }), ...(opts.headers === undefined ? {} : { headers: opts.headers }) });
  const acmeMember = (i = 0) => run.sandbox.control.members(ACME_ORG)[i] as { id: string; user: { email: string } };

  it('3.5: POST with the email of an organization member is matched (organization_member set), 201 with the row', async () => {
    const member = acmeMember(1);
    const res = await add({ email: member.user.email.toUpperCase(), job_roles: ['RECRUITER'] });
    expect(res.status).toBe(201);
    expect(res.body).toEqual({ id: expect.any(String), email: member.user.email, organization_member: member.id, job_roles: ['RECRUITER'], created_at: expect.any(String) });
  });

  it('3.5: POST with an email that is not a member is pending (organization_member null); job_roles may be omitted or empty', async () => {
    const res = await add({ email: 'outside.recruiter@example.net' });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ email: 'outside.recruiter@example.net', organization_member: null, job_roles: [] });
  });

  it('3.5: POST with organization_member of the caller\'s organization is matched, with the member\'s email', async () => {
    const member = acmeMember(2);
    const res = await add({ organization_member: member.id, job_roles: ['HIRING_MANAGER', 'INTERVIEWER'] });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ email: member.user.email, organization_member: member.id, job_roles: ['HIRING_MANAGER', 'INTERVIEWER'] });
  });

  it('4.4, 7: neither or both of email and organization_member is 400', async () => {
    const member = acmeMember();
    for (const body of [{}, { job_roles: ['RECRUITER'] }, { email: null, organization_member: null }, { email: member.user.email, organization_member: member.id }]) {
      const res = await add(body);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(res.body[0].code).toBe('invalid_input');
    }
    expect((await run.api(team())).body.count).toBe(0);
  });

  it('4.4: organization_member must belong to the caller\'s organization (400 does_not_exist, attr organization_member)', async () => {
    const foreign = run.sandbox.control.members(GLOBEX_ORG)[0] as { id: string };
    for (const id of [foreign.id, '00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const res = await add({ organization_member: id });
      expect(res.status).toBe(400);
      expect(res.body).toEqual([{ code: 'does_not_exist', detail: expect.any(String), attr: 'organization_member' }]);
    }
  });

  it('2.7, 4.4: an email already on the team, matched or pending, is 400 (any case, either identifier)', async () => {
    const member = acmeMember();
    expect((await add({ email: 'pending.person@example.com' })).status).toBe(201);
    expect((await add({ organization_member: member.id })).status).toBe(201);
    const pendingAgain = await add({ email: 'Pending.Person@example.com' });
    expect(pendingAgain.status).toBe(400);
    expect(pendingAgain.body[0]).toMatchObject({ code: 'invalid_input', attr: 'email' });
    expect((await add({ email: member.user.email })).status).toBe(400);
    expect((await add({ organization_member: member.id })).body[0]).toMatchObject({ code: 'invalid_input', attr: 'organization_member' });
    // Another job's team is separate.
    const other = (await run.api('/api/v2/jobs', { method: 'POST', body: { title: 'Other' } })).body.id;
    expect((await add({ email: 'pending.person@example.com' }, { job: other })).status).toBe(201);
  });

  it('2.7, 4.4: job_roles must come from the enum', async () => {
    const res = await add({ email: 'x@example.com', job_roles: ['recruiter'] });
    expect(res.status).toBe(400);
    expect(res.body[0]).toMatchObject({ code: 'invalid_input', attr: 'job_roles.0' });
    expect((await add({ email: 'not-an-email' })).body[0]).toMatchObject({ code: 'invalid_input', attr: 'email' });
  });

  it('3.5: a pending member becomes matched when the person joins the organization (control.addMember)', async () => {
    const pending = (await add({ email: 'new.hire@example.org', job_roles: ['COORDINATOR'] })).body;
    const other = (await run.api('/api/v2/jobs', { method: 'POST', body: { title: 'Second job' } })).body.id;
    const pendingElsewhere = (await add({ email: 'NEW.HIRE@example.org' }, { job: other })).body;
    const joined = run.sandbox.control.addMember(ACME_ORG, { first_name: 'Nia', last_name: 'Hire', email: 'new.hire@example.org', role: 'editor' });
    const rows = (await run.api(team())).body.results;
    expect(rows).toEqual([{ ...pending, organization_member: joined['id'] }]);
    expect((await run.api(team(other))).body.results[0]).toMatchObject({ id: pendingElsewhere.id, organization_member: joined['id'] });
    // Joining another organization matches nothing here.
    const stillPending = (await add({ email: 'elsewhere@example.org' })).body;
    run.sandbox.control.addMember(GLOBEX_ORG, { first_name: 'Eli', last_name: 'Where', email: 'elsewhere@example.org' });
    expect((await run.api(team())).body.results.find((r: any) => r.id === stillPending.id).organization_member).toBeNull();
  });

  it('4.4: GET lists matched and pending members with limit/offset', async () => {
    for (const email of ['a@example.com', 'b@example.com', 'c@example.com']) await add({ email });
    await add({ organization_member: acmeMember().id });
    const all = await run.api(team());
    expect(all.body.count).toBe(4);
    expect(all.body.results.map((r: any) => r.organization_member === null)).toEqual([true, true, true, false]);
    const page = await run.api(`${team()}?limit=2&offset=2`);
    expect(page.body.results.map((r: any) => r.id)).toEqual(all.body.results.slice(2).map((r: any) => r.id));
    expect(page.body.next).toBeNull();
  });

  it('4.4: PATCH replaces job_roles whole (200); other fields are ignored; bad roles are 400', async () => {
    const row = (await add({ email: 'p@example.com', job_roles: ['RECRUITER', 'SOURCER'] })).body;
    const res = await run.api(`${team()}/${row.id}`, { method: 'PATCH', body: { job_roles: ['ADMIN'], email: 'changed@example.com' } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ ...row, job_roles: ['ADMIN'] });
    expect((await run.api(`${team()}/${row.id}`, { method: 'PATCH', body: { job_roles: [] } })).body.job_roles).toEqual([]);
    expect((await run.api(`${team()}/${row.id}`, { method: 'PATCH', body: { job_roles: ['BOSS'] } })).status).toBe(400);
    expect((await run.api(team())).body.results[0].job_roles).toEqual([]);
  });

  it('4.4: DELETE removes the member (204), after which the email may be added again', async () => {
    const row = (await add({ email: 'gone@example.com' })).body;
    const res = await run.api(`${team()}/${row.id}`, { method: 'DELETE' });
    expect(res.status).toBe(204);
    expect((await run.api(team())).body.count).toBe(0);
    expect((await run.api(`${team()}/${row.id}`, { method: 'DELETE' })).status).toBe(404);
    expect((await run.api(`${team()}/${row.id}`, { method: 'PATCH', body: { job_roles: [] } })).status).toBe(404);
    expect((await add({ email: 'gone@example.com' })).status).toBe(201);
  });

  it('4.4, 4.6: a retried POST with the same Idempotency-Key replays the original 201; another body is 409', async () => {
    const headers = { 'Idempotency-Key': 'team-add-1' };
    const first = await add({ email: 'retry@example.com', job_roles: ['RECRUITER'] }, { headers });
    expect(first.status).toBe(201);
    const replay = await add({ job_roles: ['RECRUITER'], email: 'retry@example.com' }, { headers });
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replay')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect((await run.api(team())).body.count).toBe(1);
    const conflict = await add({ email: 'someone.else@example.com' }, { headers });
    expect(conflict.status).toBe(409);
    expect(conflict.body[0].code).toBe('idempotency_key_conflict');
    const invalid = await add({ job_roles: ['NOT_A_ROLE'] }, { headers });
    expect([invalid.status, invalid.body[0].code]).toEqual([409, 'idempotency_key_conflict']);
    // Without the key the same body is a duplicate email.
    expect((await add({ email: 'retry@example.com', job_roles: ['RECRUITER'] })).status).toBe(400);
  });

  it('4.4: any key of the organization manages the team (5.4); another organization\'s job is 404', async () => {
    expect((await add({ email: 'k2@example.com' }, { key: ACME_KEY_2 })).status).toBe(201);
    for (const res of [
      await run.api(team(), { key: GLOBEX_KEY }),
      await add({ email: 'g@example.com' }, { key: GLOBEX_KEY }),
      await run.api(team('00000000-0000-4000-8000-000000000000')),
    ]) {
      expect(res.status).toBe(404);
      expect(res.body[0].code).toBe('not_found');
    }
    const row = (await run.api(team())).body.results[0];
    expect((await run.api(`${team()}/${row.id}`, { method: 'DELETE', key: GLOBEX_KEY })).status).toBe(404);
    expect((await run.api(`${team()}/${row.id}`, { method: 'GET' })).status).toBe(405);
  });
});
