import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { GLOBEX_KEY, startSandbox, type Running } from './helpers.js';

describe('webhook endpoints (spec 2.11, 4.5, 4.6)', () => {
  let run: Running;
  beforeEach(async () => {
    run = await startSandbox();
  });
  afterEach(() => run.sandbox.stop());
  const create = (body: Record<string, unknown>, key?: string, headers?: Record<string, string>) =>
    run.api('/api/v2/webhooks', { method: 'POST', body, ...(key === undefined ? {} : { key }), ...(headers === undefined ? {} : { headers }) });

  it('2.11: the whsec_ secret is returned once on create, masked on list and retrieve', async () => {
    const created = await create({ url: 'https://hooks.example.com/a', event_types: ['interview.completed'] });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ url: 'https://hooks.example.com/a', enabled: true, event_types: ['interview.completed'] });
    const secret: string = created.body.secret;
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]+=*$/);
    expect(Buffer.from(secret.slice(6), 'base64').length).toBeGreaterThanOrEqual(24);
    const read = await run.api(`/api/v2/webhooks/${created.body.id}`);
    expect(read.body.secret).not.toBe(secret);
    expect(read.body.secret).toMatch(/^whsec_\*+/);
    const list = await run.api('/api/v2/webhooks');
    expect(list.body).toMatchObject({ count: 1, next: null, previous: null });
    expect(list.body.results[0].secret).toBe(read.body.secret);
    expect(JSON.stringify(list.body)).not.toContain(secret.slice(6, 20));
  });

  it('4.5: update, rotate-secret (new secret returned once) and delete', async () => {
    const { body: hook } = await create({ url: 'https://hooks.example.com/b' });
    const patched = await run.api(`/api/v2/webhooks/${hook.id}`, { method: 'PATCH', body: { enabled: false, event_types: [] } });
    expect(patched.status).toBe(200);
    expect(patched.body).toMatchObject({ id: hook.id, enabled: false, event_types: [], url: 'https://hooks.example.com/b' });
    const rotated = await run.api(`/api/v2/webhooks/${hook.id}/rotate-secret`, { method: 'POST' });
    expect(rotated.status).toBe(200);
    expect(rotated.body.secret).toMatch(/^whsec_/);
    expect(rotated.body.secret).not.toBe(hook.secret);
    expect((await run.api(`/api/v2/webhooks/${hook.id}`)).body.secret).toMatch(/^whsec_\*+/);
    expect((await run.api(`/api/v2/webhooks/${hook.id}`, { method: 'DELETE' })).status).toBe(204);
    expect((await run.api(`/api/v2/webhooks/${hook.id}`)).status).toBe(404);
  });

  it('4.5: a URL already registered in the organization is 409 already_exists on POST and PATCH; another organization may register it', async () => {
    await create({ url: 'https://hooks.example.com/same' });
    const dup = await create({ url: 'https://hooks.example.com/same' });
    expect(dup.status).toBe(409);
    expect(dup.body).toEqual([{ code: 'already_exists', detail: expect.any(String), attr: 'url' }]);
    const other = await create({ url: 'https://hooks.example.com/other' });
    const patch = await run.api(`/api/v2/webhooks/${other.body.id}`, { method: 'PATCH', body: { url: 'https://hooks.example.com/same' } });
    expect(patch.status).toBe(409);
    expect(patch.body[0].code).toBe('already_exists');
    // PATCH to its own URL is not a conflict.
    expect((await run.api(`/api/v2/webhooks/${other.body.id}`, { method: 'PATCH', body: { url: 'https://hooks.example.com/other' } })).status).toBe(200);
    expect((await create({ url: 'https://hooks.example.com/same' }, GLOBEX_KEY)).status).toBe(201);
  });

  it('7: a bad URL is 400 invalid_input on url; a missing url is required', async () => {
    for (const url of ['not a url', 'ftp://hooks.example.com/x', 'https://user:pw@hooks.example.com/', 42]) {
      const res = await create({ url });
      expect(res.status, String(url)).toBe(400);
      expect(res.body[0]).toMatchObject({ code: 'invalid_input', attr: 'url' });
    }
    const missing = await create({ enabled: true });
    expect(missing.body).toEqual([{ code: 'required', detail: expect.any(String), attr: 'url' }]);
    const patch = await run.api(`/api/v2/webhooks/${(await create({ url: 'https://ok.example.com/' })).body.id}`, { method: 'PATCH', body: { url: 'nope' } });
    expect(patch.body[0]).toMatchObject({ code: 'invalid_input', attr: 'url' });
  });

  it('4.6: Idempotency-Key on POST replays the original (secret included) with Idempotent-Replay: true; another body is 409', async () => {
    const headers = { 'Idempotency-Key': 'hook-1' };
    const first = await create({ url: 'https://hooks.example.com/idem' }, undefined, headers);
    const replay = await create({ url: 'https://hooks.example.com/idem' }, undefined, headers);
    expect(replay.status).toBe(201);
    expect(replay.headers.get('idempotent-replay')).toBe('true');
    expect(replay.body).toEqual(first.body);
    expect((await run.api('/api/v2/webhooks')).body.count).toBe(1);
    const conflict = await create({ url: 'https://hooks.example.com/idem-2' }, undefined, headers);
    expect(conflict.status).toBe(409);
    expect(conflict.body[0].code).toBe('idempotency_key_conflict');
    const invalid = await create({ url: 'not a url' }, undefined, headers);
    expect([invalid.status, invalid.body[0].code]).toEqual([409, 'idempotency_key_conflict']);
    // Keys are per organization: Globex may use the same key for its own request.
    expect((await create({ url: 'https://hooks.example.com/idem' }, GLOBEX_KEY, headers)).status).toBe(201);
  });

  it('4.5: another organization\'s endpoint is 404 for every operation', async () => {
    const { body: hook } = await create({ url: 'https://hooks.example.com/private' });
    for (const [method, suffix] of [['GET', ''], ['PATCH', ''], ['DELETE', ''], ['POST', '/rotate-secret'], ['GET', '/deliveries']] as const) {
      const res = await run.api(`/api/v2/webhooks/${hook.id}${suffix}`, { method, key: GLOBEX_KEY, ...(method === 'PATCH' ? { body: { enabled: false } } : {}) });
      expect(res.status, `${method} ${suffix}`).toBe(404);
    }
    expect((await run.api(`/api/v2/webhooks/${hook.id}`)).body.enabled).toBe(true);
  });
});
