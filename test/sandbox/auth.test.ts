import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { createManualClock } from '../../src/sandbox/clock.js';
import { createSandbox } from '../../src/sandbox/createSandbox.js';
import { ACME_KEY, ACME_KEY_2, ACME_ORG, GLOBEX_KEY, GLOBEX_ORG, startSandbox, type Running } from './helpers.js';

describe('authentication (spec 5)', () => {
  let run: Running;
  const clock = createManualClock(Date.parse('2025-03-01T09:00:00Z'));
  beforeEach(async () => {
    run = await startSandbox({ clock });
  });
  afterEach(() => run.sandbox.stop());

  it('5.5: a missing Authorization header is 401 not_authenticated', async () => {
    const res = await run.api('/api/v2/jobs', { key: null });
    expect(res.status).toBe(401);
    expect(res.body).toEqual([{ code: 'not_authenticated', detail: expect.any(String), attr: null }]);
  });

  it('5.5: an unknown or malformed key is 401 authentication_failed', async () => {
    for (const key of ['sk-nope0000.doesNotExist', 'not-a-key', '']) {
      const res = await run.api('/api/v2/jobs', { headers: { authorization: key === '' ? 'Bearer' : `Bearer ${key}` }, key: null });
      expect(res.status).toBe(401);
      expect(res.body[0].code).toBe('authentication_failed');
    }
  });

  it('5.1: the same key works for v1 and v2; several organizations are served', async () => {
    expect((await run.api('/api/v2/jobs', { key: ACME_KEY })).status).toBe(200);
    expect((await run.api('/api/v2/jobs', { key: GLOBEX_KEY })).status).toBe(200);
    const { application } = run.sandbox.control.runScenario('legacy');
    expect((await run.api(`/api/v1/applications/${application.id}/interview`, { key: ACME_KEY })).status).toBe(200);
    const orgs = run.sandbox.control.organizations();
    expect(orgs).toHaveLength(2);
    for (const org of orgs) for (const k of org.api_keys) expect(k.key).toMatch(/^sk-[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
  });

  it('5.3: a revoked key fails at once with 401 authentication_failed; the other key still works', async () => {
    expect((await run.api('/api/v2/webhooks', { key: ACME_KEY_2 })).status).toBe(200);
    run.sandbox.control.revokeKey(ACME_KEY_2);
    const res = await run.api('/api/v2/webhooks', { key: ACME_KEY_2 });
    expect(res.status).toBe(401);
    expect(res.body[0].code).toBe('authentication_failed');
    expect((await run.api('/api/v2/webhooks', { key: ACME_KEY })).status).toBe(200);
  });

  it('5.2: a key past its expiry date is 401 authentication_failed', async () => {
    const key = run.sandbox.control.addApiKey(ACME_ORG, { expiresAt: clock.now() + 60_000 });
    expect((await run.api('/api/v2/jobs', { key })).status).toBe(200);
    clock.advance(60_000);
    expect((await run.api('/api/v2/jobs', { key })).body[0].code).toBe('authentication_failed');
  });

  it('5.2: a key given an expiry date through the control API dies at that date', async () => {
    const expiresAt = new Date(clock.now() + 60_000).toISOString();
    const added = await run.api(`/_sandbox/organizations/${ACME_ORG}/keys`, { method: 'POST', key: null, body: { name: 'expiring', expires_at: expiresAt } });
    expect(added.status).toBe(201);
    const key = added.body.key as string;
    expect((await run.api('/api/v2/jobs', { key })).status).toBe(200);
    const listed = run.sandbox.control.organizations().find((o) => o.id === ACME_ORG)!.api_keys.find((k) => k.key === key);
    expect(listed).toMatchObject({ name: 'expiring', expires_at: expiresAt });
    clock.advance(60_000);
    const refused = await run.api('/api/v2/jobs', { key });
    expect([refused.status, refused.body[0].code]).toEqual([401, 'authentication_failed']);
    const bad = await run.api(`/_sandbox/organizations/${ACME_ORG}/keys`, { method: 'POST', key: null, body: { expires_at: 'tomorrow' } });
    expect([bad.status, bad.body[0].code, bad.body[0].attr]).toEqual([400, 'invalid_input', 'expires_at']);
  });

  it('5.5: a valid key without permission is 403 permission_denied', async () => {
    run.sandbox.control.restrictKey(ACME_KEY_2);
    const res = await run.api('/api/v2/jobs', { key: ACME_KEY_2 });
    expect(res.status).toBe(403);
    expect(res.body).toEqual([{ code: 'permission_denied', detail: expect.any(String), attr: null }]);
  });

  it('5.3: adding a key that exists is 409 and leaves it where it was, revoked or restricted', async () => {
    run.sandbox.control.revokeKey(ACME_KEY_2);
    run.sandbox.control.restrictKey(ACME_KEY);
    for (const [key, org] of [[ACME_KEY_2, GLOBEX_ORG], [ACME_KEY, ACME_ORG], [GLOBEX_KEY, ACME_ORG]] as const) {
      const res = await run.api(`/_sandbox/organizations/${org}/keys`, { method: 'POST', key: null, body: { key } });
      expect([res.status, res.body]).toEqual([409, [{ code: 'already_exists', detail: expect.any(String), attr: 'key' }]]);
    }
    expect((await run.api('/api/v2/jobs', { key: ACME_KEY_2 })).body[0].code).toBe('authentication_failed');
    expect((await run.api('/api/v2/jobs', { key: ACME_KEY })).body[0].code).toBe('permission_denied');
    const globex = run.sandbox.control.organizations().find((o) => o.id === GLOBEX_ORG)!;
    expect(globex.api_keys.map((k) => k.key)).toEqual([GLOBEX_KEY]);
  });

  it('seeding one key in two organizations is an error naming neither secret', () => {
    const make = () => createSandbox({ organizations: [{ name: 'A', apiKeys: [ACME_KEY] }, { name: 'B', apiKeys: [ACME_KEY] }] });
    expect(make).toThrow(/^createSandbox: the API key starting sk-acme0001 is seeded twice/);
    expect(make).not.toThrow(ACME_KEY.split('.')[1]!);
  });
});
