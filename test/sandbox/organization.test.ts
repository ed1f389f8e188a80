import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createManualClock, type ManualClock } from '../../src/sandbox/clock.js';
import { ACME_ORG, GLOBEX_KEY, GLOBEX_ORG, startSandbox, type Running } from './helpers.js';

describe('organization settings and members (spec 2.4, 2.5, 2.8, 4.3)', () => {
  let run: Running;
  let clock: ManualClock;
  beforeEach(async () => {
    clock = createManualClock(Date.parse('2025-03-01T10:00:00Z'));
    run = await startSandbox({ clock });
  });
  afterEach(() => run.sandbox.stop());
  const defaults = '/api/v2/organization/interview-defaults';
  const policy = '/api/v2/organization/call-policy';
  const patch = (path: string, body: unknown, key?: string) => run.api(path, { method: 'PATCH', body, ...(key === undefined ? {} : { key }) });

  it('2.4, 2.5: both singletons exist from the start, one per organization, with every field', async () => {
    const d = await run.api(defaults);
    expect(d.status).toBe(200);
    expect(Object.keys(d.body).sort()).toEqual(
      ['created_at', 'id', 'interviewer_name_override', 'organization_name_override', 'prompt_additional_instructions', 'prompt_intro', 'prompt_outro', 'updated_at'],
    );
    const p = await run.api(policy);
    expect(Object.keys(p.body).sort()).toEqual(
      ['created_at', 'end_time', 'id', 'max_retries', 'retries_enabled', 'retry_delay_sequence', 'retry_window_days', 'start_time', 'updated_at', 'weekdays'],
    );
    expect(p.body).toMatchObject({ start_time: expect.stringMatching(/^\d\d:\d\d:\d\d$/), weekdays: expect.arrayContaining(['monday']) });
    expect((await run.api(defaults, { key: GLOBEX_KEY })).body.id).not.toBe(d.body.id);
    expect((await run.api(policy, { key: GLOBEX_KEY })).body.id).not.toBe(p.body.id);
  });

  it('5, 7: the new endpoints need a key like every other; unknown paths under /organization are 404', async () => {
    for (const path of [defaults, policy, '/api/v2/organization/members', '/api/v2/applications', '/api/v2/jobs/x/hiring-team']) {
      expect((await run.api(path, { key: null })).body[0].code, path).toBe('not_authenticated');
    }
    expect((await run.api('/api/v2/organization/settings')).body[0].code).toBe('not_found');
    expect((await run.api('/api/v2/organization/members/x')).status).toBe(404);
  });

  it('4.3: POST and DELETE (and PUT) on the singletons are 405 method_not_allowed', async () => {
    for (const path of [defaults, policy]) {
      for (const method of ['POST', 'DELETE', 'PUT']) {
        const res = await run.api(path, { method, body: {} });
        expect(res.status, `${method} ${path}`).toBe(405);
        expect(res.body[0].code).toBe('method_not_allowed');
      }
    }
  });

  it('4.3: PATCH is partial (omitted fields unchanged), an empty string clears a text field, updated_at moves', async () => {
    const before = (await run.api(defaults)).body;
    clock.advance(60_000);
    const res = await patch(defaults, { prompt_intro: '', interviewer_name_override: 'Alex' });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ prompt_intro: '', interviewer_name_override: 'Alex', prompt_outro: before.prompt_outro, id: before.id, created_at: before.created_at });
    expect(Date.parse(res.body.updated_at)).toBe(Date.parse(before.updated_at) + 60_000);
    expect((await run.api(defaults)).body).toEqual(res.body);
    // Another organization is untouched.
    expect((await run.api(defaults, { key: GLOBEX_KEY })).body.prompt_intro).toBe(before.prompt_intro);
  });

  it('4.3: unknown and read-only fields are ignored; a text field that is not a string is 400 with attr', async () => {
    const before = (await run.api(defaults)).body;
    const ignored = await patch(defaults, { colour: 'blue', id: 'x', created_at: '2000-01-01T00:00:00Z' });
    expect(ignored.status).toBe(200);
    expect(ignored.body).not.toHaveProperty('colour');
    expect(ignored.body.id).toBe(before.id);
    const bad = await patch(defaults, { prompt_outro: null, prompt_intro: 'kept?' });
    expect(bad.status).toBe(400);
    expect(bad.body).toEqual([{ code: 'invalid_input', detail: expect.any(String), attr: 'prompt_outro' }]);
    expect((await run.api(defaults)).body.prompt_intro).toBe(before.prompt_intro);
    expect((await run.api(defaults, { method: 'PATCH', rawBody: '{', headers: { 'content-type': 'application/json' } })).body[0].code).toBe('parse_error');
  });

  it('2.5, 4.3: end_time must be strictly after start_time (400, attr end_time), checked against stored values too', async () => {
    const equal = await patch(policy, { start_time: '10:00:00', end_time: '10:00:00' });
    expect(equal.status).toBe(400);
    expect(equal.body).toEqual([{ code: 'invalid_input', detail: expect.any(String), attr: 'end_time' }]);
    const onlyStart = await patch(policy, { start_time: '19:00:00' }); // stored end_time is 18:00:00
    expect(onlyStart.body[0].attr).toBe('end_time');
    const ok = await patch(policy, { start_time: '08:30:00', end_time: '08:30:01' });
    expect(ok.status).toBe(200);
    expect(ok.body).toMatchObject({ start_time: '08:30:00', end_time: '08:30:01' });
  });

  it('2.5: times must be HH:MM:SS (400 with the field in attr)', async () => {
    for (const [field, value] of [['start_time', '9:00'], ['start_time', '24:00:00'], ['end_time', '17:00'], ['end_time', 1700]] as const) {
      const res = await patch(policy, { [field]: value });
      expect(res.status).toBe(400);
      expect(res.body[0]).toMatchObject({ code: 'invalid_input', attr: field });
    }
  });

  it('2.5, 4.3: weekdays must be a non-empty list of lowercase weekday names (400, attr weekdays)', async () => {
    for (const weekdays of [[], ['Monday'], ['funday'], 'monday', [1]]) {
      const res = await patch(policy, { weekdays });
      expect(res.status, JSON.stringify(weekdays)).toBe(400);
      expect(res.body[0]).toMatchObject({ code: 'invalid_input', attr: 'weekdays' });
    }
    const ok = await patch(policy, { weekdays: ['saturday', 'monday', 'saturday'] });
    expect(ok.body.weekdays).toEqual(['monday', 'saturday']);
  });

  it('2.5: retry_delay_sequence entries are HH:MM:SS or D HH:MM:SS (400, attr retry_delay_sequence, otherwise)', async () => {
    const ok = await patch(policy, { retry_delay_sequence: ['00:30:00', '1 00:00:00', '2 12:30:00', '0 04:00:00'] });
    expect(ok.status).toBe(200);
    expect(ok.body.retry_delay_sequence).toEqual(['00:30:00', '1 00:00:00', '2 12:30:00', '04:00:00']);
    expect((await patch(policy, { retry_delay_sequence: [] })).body.retry_delay_sequence).toEqual([]);
    for (const entry of ['30m', '1 day', '1d 00:00:00', '25:00:00', '00:61:00', '00:00:00', 1800]) {
      const res = await patch(policy, { retry_delay_sequence: ['01:00:00', entry] });
      expect(res.status, String(entry)).toBe(400);
      expect(res.body[0]).toMatchObject({ code: 'invalid_input', attr: 'retry_delay_sequence' });
    }
    expect((await run.api(policy)).body.retry_delay_sequence).toEqual([]);
  });

  it('2.5, 4.3, 9: max_retries and retry_window_days are returned but writes are ignored; retries_enabled is written', async () => {
    const before = (await run.api(policy)).body;
    clock.advance(5_000);
    const res = await patch(policy, { max_retries: 99, retry_window_days: 42, retries_enabled: false });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({ max_retries: before.max_retries, retry_window_days: before.retry_window_days, retries_enabled: false });
    expect(res.body.updated_at).not.toBe(before.updated_at);
    expect((await patch(policy, { retries_enabled: 'no' })).body[0]).toMatchObject({ code: 'invalid_input', attr: 'retries_enabled' });
  });

  it('4.3: a PATCH with several errors reports each with its attr and changes nothing', async () => {
    const before = (await run.api(policy)).body;
    const res = await patch(policy, { weekdays: [], retry_delay_sequence: ['soon'], retries_enabled: false });
    expect(res.status).toBe(400);
    expect(res.body.map((e: any) => e.attr).sort()).toEqual(['retry_delay_sequence', 'weekdays']);
    expect((await run.api(policy)).body).toEqual(before);
  });

  it('2.8, 4.3: members are listed by name with limit/offset pagination, only the caller\'s organization', async () => {
    const all = await run.api('/api/v2/organization/members');
    expect(all.status).toBe(200);
    expect(all.body.count).toBe(4);
    const names = all.body.results.map((m: any) => `${m.user.first_name} ${m.user.last_name}`);
    expect(names).toEqual([...names].sort((a, b) => a.localeCompare(b)));
    expect(all.body.results[0]).toEqual({ id: expect.any(String), role: expect.stringMatching(/^(owner|admin|editor|viewer)$/), user: { first_name: expect.any(String), last_name: expect.any(String), email: expect.any(String) } });
    const page = await run.api('/api/v2/organization/members?limit=2&offset=1');
    expect(page.body.results.map((m: any) => m.id)).toEqual(all.body.results.slice(1, 3).map((m: any) => m.id));
    expect(page.body.next).not.toBeNull();
    expect(page.body.previous).not.toBeNull();
    const globex = await run.api('/api/v2/organization/members', { key: GLOBEX_KEY });
    expect(globex.body.results.every((m: any) => m.user.email.endsWith('@globex-logistics.example.com'))).toBe(true);
    expect((await run.api('/api/v2/organization/members', { method: 'POST', body: {} })).status).toBe(405);
  });

  it('2.8: a person joining (control.addMember, or POST /_sandbox/organizations/{id}/members) is listed in name order', async () => {
    run.sandbox.control.addMember(ACME_ORG, { first_name: 'Aaron', last_name: 'Zed', email: 'aaron.zed@example.com', role: 'editor' });
    const viaHttp = await run.api(`/_sandbox/organizations/${ACME_ORG}/members`, { method: 'POST', key: null, body: { first_name: 'Zoe', last_name: 'Abbott', email: 'zoe@example.org' } });
    expect(viaHttp.status).toBe(201);
    expect(viaHttp.body).toMatchObject({ role: 'viewer', user: { first_name: 'Zoe' } });
    const list = (await run.api('/api/v2/organization/members')).body.results;
    expect(list[0].user.first_name).toBe('Aaron');
    expect(list.at(-1).user.first_name).toBe('Zoe');
    expect(() => run.sandbox.control.addMember(ACME_ORG, { first_name: 'A', last_name: 'Zed', email: 'AARON.ZED@example.com' })).toThrow(/already a member/);
    expect(run.sandbox.control.members(GLOBEX_ORG)).toHaveLength(4);
  });
});
