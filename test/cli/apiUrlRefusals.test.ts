import { describe, expect, it } from 'vitest';
import { cli } from './helpers.js';

describe('HIRING_API_URL refusals, through a command that reads it', () => {
  it('refuses a fragment as it refuses a query, and a password without a user name as a user name, never echoing either', async () => {
    const env = { HIRING_API_KEY: 'sk-test.unused' };
    const fragment = await cli(['webhooks', 'list'], { ...env, HIRING_API_URL: 'https://hiring.example.com/#frag-in-url' });
    expect({ code: fragment.code, stdout: fragment.stdout }).toEqual({ code: 1, stdout: '' });
    expect(fragment.stderr).toMatch(/^config error: HIRING_API_URL: must not have a query or fragment: give the service's base URL, "https:\/\/hiring.example.com"$/m);
    const password = await cli(['webhooks', 'list'], { ...env, HIRING_API_URL: 'https://:pw-in-url@hiring.example.com' });
    expect({ code: password.code, stdout: password.stdout }).toEqual({ code: 1, stdout: '' });
    expect(password.stderr).toMatch(/^config error: HIRING_API_URL: must not carry a user name or password/m);
    expect(password.stderr).not.toContain('pw-in-url');
  }, 30_000);
});
