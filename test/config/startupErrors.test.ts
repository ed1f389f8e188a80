import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

/**
 * What a newcomer sees when `hiring-receiver serve` (npm start) is misconfigured: one
 * `config error:` line per problem and exit 1, before anything is opened or served.
 */
const cleanups: (() => void)[] = [];
afterEach(() => {
  for (const c of cleanups.splice(0)) c();
});

async function serve(env: Record<string, string>): Promise<{ code: number | null; stderr: string }> {
  const { dir, cleanup } = tempDir('startup-errors-');
  cleanups.push(cleanup);
  const child = runTs('src/cli/main.ts', ['serve'], { PORT: '0', HOST: '127.0.0.1', DATABASE_PATH: join(dir, 'receiver.db'), ...env });
  const kill = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
  const { code } = await child.exited;
  clearTimeout(kill);
  return { code, stderr: child.stderr.join('') };
}

describe('start-up configuration errors', () => {
  it('names a misspelt variable beside the required setting it was meant for', async () => {
    const r = await serve({ WEBHOOK_SECRETS: newSecret(), HIRING_API_URL: 'https://hiring.example', hiring_api_key: 'sk-abc.def' });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'config error: WEBHOOK_SECRET: is required (or list sources in CONFIG_FILE); WEBHOOK_SECRETS is set: a misspelling of WEBHOOK_SECRET?\n' +
        'config error: HIRING_API_KEY: is required (results are fetched from the hiring service with it); hiring_api_key is set: a misspelling of HIRING_API_KEY?\n',
    );
  });
});
