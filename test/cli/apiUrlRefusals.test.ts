import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';
import { cli } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-api-');
afterAll(cleanup);

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

  it('with several sources in CONFIG_FILE and no --source, a command that reads the API is bad usage (exit 2), naming them', async () => {
    const config = join(dir, 'two-sources.json');
    const source = (name: string) => ({ name, secrets: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', api_url: 'https://hiring.example.com', api_key: 'sk-test.unused' });
    writeFileSync(config, JSON.stringify({ sources: [source('acme'), source('globex')] }));
    const r = await cli(['webhooks', 'list'], { CONFIG_FILE: config });
    expect({ code: r.code, stdout: r.stdout }).toEqual({ code: 2, stdout: '' });
    expect(r.stderr).toMatch(/several sources are configured \(acme, globex\); choose one with --source/);
  }, 30_000);
});
