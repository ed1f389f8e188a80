import { afterEach, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { existsSync, writeFileSync } from 'node:fs';
import { ROOT, runTs } from '../helpers/childServer.js';
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

/** The default source's three settings, valid. */
const source = () => ({ WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'https://hiring.example', HIRING_API_KEY: 'sk-abc.def' });
/** Start-up ended with exit 1 and exactly these `config error:` lines. */
const expectRefused = (r: { code: number | null; stderr: string }, problems: string[]) => {
  expect(r.code).toBe(1);
  expect(r.stderr.split('\n').filter(Boolean)).toEqual(problems.map((p) => `config error: ${p}`));
};

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

  it('names a variable two letters off the setting too (two typos in one name)', async () => {
    const r = await serve({ WEBHOK_SECRT: newSecret(), HIRING_API_URL: 'https://hiring.example', HIRING_API_KEY: 'sk-abc.def' });
    expectRefused(r, ['WEBHOOK_SECRET: is required (or list sources in CONFIG_FILE); WEBHOK_SECRT is set: a misspelling of WEBHOOK_SECRET?']);
  });

  it('refuses an API key with a quote at its end only (half of an env file\'s quoting), which its pattern would take', async () => {
    const r = await serve({ ...source(), HIRING_API_KEY: 'sk-abc.def"' });
    expectRefused(r, ['HIRING_API_KEY: is wrapped in quote characters: set the value without them']);
  });

  it('says what a CONFIG_FILE secret of the wrong type should be, and where, not "Invalid input"', async () => {
    const { dir, cleanup } = tempDir('startup-errors-file-');
    cleanups.push(cleanup);
    const file = join(dir, 'config.json');
    writeFileSync(
      file,
      JSON.stringify({
        sources: [
          { name: 'acme', secrets: [newSecret(), 5], api_url: 'https://hiring.example', api_key: { envv: 'ACME_KEY' } },
          { name: 'globex', secrets: 123, api_url: null, api_key: 'sk-abc.def' },
        ],
        sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: true }],
      }),
    );
    const r = await serve({ CONFIG_FILE: file });
    expectRefused(r, [
      'CONFIG_FILE sources.0.secrets.1: must be a string, or { "env": "NAME" } to read it from an environment variable',
      'CONFIG_FILE sources.0.api_key.env: is required',
      'CONFIG_FILE sources.0.api_key: Unrecognized key: "envv"; did you mean "env"? (allowed keys: env)',
      'CONFIG_FILE sources.1.secrets: must be a whsec_ secret, a list of them, or { "env": "NAME" } to read them from an environment variable',
      'CONFIG_FILE sources.1.api_url: must be a string, or { "env": "NAME" } to read it from an environment variable',
      'CONFIG_FILE sinks.0.secret: must be a string, or { "env": "NAME" } to read it from an environment variable',
    ]);
  });

  it('says once that a secret\'s environment variable is not set (not again as an empty secret)', async () => {
    const { dir, cleanup } = tempDir('startup-errors-env-');
    cleanups.push(cleanup);
    const file = join(dir, 'config.json');
    writeFileSync(file, JSON.stringify({ sources: [{ name: 'acme', secrets: { env: 'ACME_SECRET' }, api_url: 'https://hiring.example', api_key: 'sk-abc.def' }] }));
    const r = await serve({ CONFIG_FILE: file });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('config error: CONFIG_FILE sources.0.secrets: environment variable ACME_SECRET is not set\n');
  });

  it('reads a CONFIG_FILE saved with a byte order mark (Windows editors) like any other', async () => {
    const { dir, cleanup } = tempDir('startup-errors-bom-');
    cleanups.push(cleanup);
    const file = join(dir, 'config.json');
    // A key the server refuses, so that the run ends with what the file says, not with a start.
    writeFileSync(file, `\uFEFF${JSON.stringify({ sources: [{ name: 'acme', secrets: newSecret(), api_url: 'https://hiring.example', api_key: 'sk-abc.def' }], sinkz: [] })}`);
    const r = await serve({ CONFIG_FILE: file });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe('config error: CONFIG_FILE (top level): Unrecognized key: "sinkz"; did you mean "sinks"? (allowed keys: sources, sinks)\n');
  });

  it('refuses an API URL with /api/v2 inside its path (an endpoint pasted whole), whose every read would answer 404', async () => {
    const r = await serve({ ...source(), HIRING_API_URL: 'https://hiring.example/api/v2/applications/' });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(
      'config error: HIRING_API_URL: give the service\'s base URL without /api/v2/applications (the receiver adds /api/v1 and /api/v2 itself): "https://hiring.example"\n',
    );
  });

  it('refuses a DATABASE_PATH ending in "/" (a folder still to be made), naming the file to give', async () => {
    const { dir, cleanup } = tempDir('startup-errors-db-');
    cleanups.push(cleanup);
    const folder = `${join(dir, 'data')}/`;
    const r = await serve({ ...source(), DATABASE_PATH: folder });
    expect(r.code).toBe(1);
    expect(r.stderr).toBe(`config error: DATABASE_PATH: ${JSON.stringify(folder)} names a folder: give the path of the database file in it, such as ${JSON.stringify(join(folder, 'receiver.db'))}\n`);
  });

  it('refuses a DATABASE_PATH starting with "~" (nothing expands it) rather than making a folder named "~"', async () => {
    const { dir, cleanup } = tempDir('startup-errors-home-');
    cleanups.push(cleanup);
    const child = runTs('src/cli/main.ts', ['serve'], {
      PORT: '0',
      HOST: '127.0.0.1',
      HOME: dir,
      DATABASE_PATH: '~/receiver.db',
      CONFIG_FILE: '~/config.json',
      ...source(),
    });
    const kill = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
    const { code } = await child.exited;
    clearTimeout(kill);
    const expand = 'starts with "~", which only a shell expands (not an env file, Docker or systemd): give the whole path, such as';
    expect(code).toBe(1);
    expect(child.stderr.join('')).toBe(
      `config error: DATABASE_PATH: ${expand} ${JSON.stringify(join(dir, 'receiver.db'))}\n` +
        `config error: CONFIG_FILE: cannot read "~/config.json" (ENOENT): it ${expand} ${JSON.stringify(join(dir, 'config.json'))}\n`,
    );
    expect(existsSync(join(ROOT, '~'))).toBe(false);
  });

  it('refuses a DATABASE_PATH or CONFIG_FILE starting with "~user/" too (a shell expands it to that user\'s home folder; nothing else does)', async () => {
    const r = await serve({ ...source(), DATABASE_PATH: '~nobody/receiver.db', CONFIG_FILE: '~nobody/config.json' });
    const expand = 'starts with "~", which only a shell expands (not an env file, Docker or systemd): give the whole path, starting with the home folder of "nobody"';
    expectRefused(r, [`DATABASE_PATH: ${expand}`, `CONFIG_FILE: cannot read "~nobody/config.json" (ENOENT): it ${expand}`]);
    expect(existsSync(join(ROOT, '~nobody'))).toBe(false);
  });


  it('says a number, HOST, LOG_LEVEL or CONFIG_FILE carries quotes or a line end from an env file', async () => {
    const r = await serve({
      ...source(),
      PORT: '"8080"',
      HOST: "'0.0.0.0'",
      LOG_LEVEL: 'info\r',
      WORKER_CONCURRENCY: '4\r',
      CONFIG_FILE: '"/etc/receiver.json"',
    });
    expectRefused(r, [
      'PORT: is wrapped in quote characters: set the value without them',
      'HOST: is wrapped in quote characters: set the value without them',
      'LOG_LEVEL: has spaces or a line break at its start or end: set the value without them',
      'WORKER_CONCURRENCY: has spaces or a line break at its start or end: set the value without them',
      'CONFIG_FILE: is wrapped in quote characters: set the value without them',
    ]);
  });
});
