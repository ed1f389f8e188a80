import { afterAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { cli } from '../cli/helpers.js';

/**
 * A misspelt key in CONFIG_FILE is refused with the keys that place takes and, when one is near,
 * `did you mean`: at the server's start (src/main.ts, dist/main.js once built) and in the CLI's
 * `warning: CONFIG_FILE ...` and `config error: CONFIG_FILE ...` lines alike.
 */
const { dir, cleanup } = tempDir('unknown-key-hints-');
afterAll(cleanup);

let files = 0;
function configFile(json: unknown): string {
  const file = join(dir, `config-${++files}.json`);
  writeFileSync(file, JSON.stringify(json));
  return file;
}

/** The receiver's own entry (what `node dist/main.js` runs), refused at start: its stderr lines. */
async function serveLines(config: unknown): Promise<string[]> {
  const child = runTs('src/main.ts', [], { PORT: '0', HOST: '127.0.0.1', DATABASE_PATH: join(dir, 'receiver.db'), CONFIG_FILE: configFile(config) });
  const kill = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
  const { code } = await child.exited.finally(() => clearTimeout(kill));
  expect(code, child.stderr.join('')).toBe(1);
  return child.stderr.join('').split('\n').filter(Boolean);
}

const FILE_KEYS = '(allowed keys for type "file": name, events, sources, concurrency, max_attempts, path, type)';

describe('unknown CONFIG_FILE keys: the allowed keys and a near one', () => {
  it('serve: a file sink\'s "filters" is "events" (a synonym), and "url" is a key of http sinks', async () => {
    const path = join(dir, 'out.jsonl');
    expect(await serveLines({ sinks: [{ name: 'f', type: 'file', path, filters: { types: ['interview.completed'] } }] })).toEqual([
      `config error: CONFIG_FILE sinks.0: Unrecognized key: "filters"; did you mean "events"? ${FILE_KEYS}`,
    ]);
    expect(await serveLines({ sinks: [{ name: 'f', type: 'file', path, url: 'https://x.example', Max_Attempts: 3 }] })).toEqual([
      `config error: CONFIG_FILE sinks.0: Unrecognized keys: "url", "Max_Attempts"; "url" is a key of type "http", not of type "file"; did you mean "max_attempts" for "Max_Attempts"? ${FILE_KEYS}`,
    ]);
  });

  it('serve: the top level, a source entry, an http sink\'s own keys and a header\'s { "env": NAME } each name their keys', async () => {
    const lines = await serveLines({
      source: [],
      sources: [{ name: 'acme', secrets: { env: 'ACME_SECRET' }, api_url: 'https://h.example', api_key: 'sk-a.b', apikey: 'sk-a.b' }],
      sinks: [
        { name: 'crm', type: 'http', url: 'https://crm.example', secret: { env: 'CRM_SECRET' }, timeout: 5000, headers: { Authorization: { envv: 'CRM_AUTH' } } },
        { name: 'log', type: 'stdout', colour: 'red' },
      ],
    });
    expect(lines).toEqual([
      'config error: CONFIG_FILE (top level): Unrecognized key: "source"; did you mean "sources"? (allowed keys: sources, sinks)',
      'config error: CONFIG_FILE sources.0: Unrecognized key: "apikey"; did you mean "api_key"? (allowed keys: name, secrets, api_url, api_key)',
      'config error: CONFIG_FILE sinks.0.headers.Authorization.env: is required',
      'config error: CONFIG_FILE sinks.0.headers.Authorization: Unrecognized key: "envv"; did you mean "env"? (allowed keys: env)',
      'config error: CONFIG_FILE sinks.0: Unrecognized key: "timeout"; did you mean "timeout_ms"? (allowed keys for type "http": name, events, sources, concurrency, max_attempts, url, secret, timeout_ms, headers, type)',
      // Nothing near: the keys alone.
      'config error: CONFIG_FILE sinks.1: Unrecognized key: "colour" (allowed keys for type "stdout": name, events, sources, concurrency, max_attempts, type)',
    ]);
  });

  it('the CLI: `sinks list` warns with the same words, and `webhooks list --source` refuses with them', async () => {
    const sinks = configFile({ sinks: [{ name: 'f', type: 'file', path: join(dir, 'out.jsonl'), filters: { types: ['interview.completed'] } }] });
    const listed = await cli(['sinks', 'list'], { DATABASE_PATH: join(dir, 'none.db'), CONFIG_FILE: sinks });
    expect(listed.stderr.split('\n')[0]).toBe(`warning: CONFIG_FILE sinks.0: Unrecognized key: "filters"; did you mean "events"? ${FILE_KEYS} (sinks shown from the database only)`);

    const source = configFile({ sources: [{ name: 'acme', secrets: { env: 'ACME_SECRET' }, api_url: 'https://h.example', api_kye: 'sk-a.b' }] });
    const webhooks = await cli(['webhooks', 'list', '--source', 'acme'], { CONFIG_FILE: source });
    expect({ code: webhooks.code, stderr: webhooks.stderr }).toEqual({
      code: 1,
      stderr:
        'config error: CONFIG_FILE sources.0.api_key: is required\n' +
        'config error: CONFIG_FILE sources.0: Unrecognized key: "api_kye"; did you mean "api_key"? (allowed keys: name, secrets, api_url, api_key)\n',
    });
  });
});

describe('many unknown CONFIG_FILE keys', () => {
  it('name the first ten and count the rest, in one line of bounded length, near keys or not', async () => {
    const keys: Record<string, number> = {};
    // Of 100 characters, plain (no run of 16 letters and digits).
    for (let i = 0; i < 20_000; i++) keys[`key-${i}-`.padEnd(100, '-abcdefghi')] = 1;
    for (let i = 0; i < 5_000; i++) keys[`concurrenc${i}`] = 1;
    const lines = await serveLines({ sinks: [{ name: 'log', type: 'stdout', ...keys }] });
    expect(lines).toHaveLength(1);
    expect(lines[0]!.length).toBeLessThan(2_000);
    expect(lines[0]).toMatch(/^config error: CONFIG_FILE sinks\.0: Unrecognized keys: "key-0-[a-i-]+", (".{100}", ){8}"key-9-[a-i-]+", and 24990 more \(allowed keys for type "stdout": /);
  }, 30_000);
});

describe('a deeply nested CONFIG_FILE value', () => {
  it('is refused with its config error, not "Maximum call stack size exceeded"', async () => {
    const file = join(dir, 'deep.json');
    writeFileSync(file, `{"sinks":[{"name":"log","type":"stdout","colour":${'['.repeat(20_000)}${']'.repeat(20_000)}}]}`);
    const child = runTs('src/main.ts', [], { PORT: '0', HOST: '127.0.0.1', DATABASE_PATH: join(dir, 'receiver.db'), CONFIG_FILE: file });
    const kill = setTimeout(() => child.proc.kill('SIGKILL'), 20_000);
    const { code } = await child.exited.finally(() => clearTimeout(kill));
    expect({ code, stderr: child.stderr.join('') }).toEqual({
      code: 1,
      stderr: 'config error: CONFIG_FILE sinks.0: Unrecognized key: "colour" (allowed keys for type "stdout": name, events, sources, concurrency, max_attempts, type)\n',
    });
  }, 30_000);
});

describe('CONFIG_FILE keys that are not plain names', () => {
  it('are not echoed, at start and in the CLI\'s warnings: a key holding control characters, or a token pasted as a key', async () => {
    const config = { sinks: [{ name: 'log', type: 'stdout', '\u001b[31mred\nline': 1, 'Bearer sk-live.TOKEN123': 2, concurrency: 1 }] };
    const said = 'CONFIG_FILE sinks.0: Unrecognized keys: 2 not shown (not a plain name, so it may hold a value) (allowed keys for type "stdout": name, events, sources, concurrency, max_attempts, type)';
    expect(await serveLines(config)).toEqual([`config error: ${said}`]);
    const listed = await cli(['sinks', 'list'], { DATABASE_PATH: join(dir, 'none.db'), CONFIG_FILE: configFile(config) });
    expect(listed.stderr.split('\n')[0]).toBe(`warning: ${said} (sinks shown from the database only)`);
    expect(listed.stderr).not.toContain('\u001b');
    expect(listed.stderr).not.toContain('TOKEN123');
  });

  it('a key shaped like a credential (an API key, a signing secret, a long token) is not echoed either, though made of plain characters', async () => {
    const config = {
      'b7f3e9a14c2d8f06e5a1b3c7d9e2f4a6': 1,
      sources: [{ name: 'acme', secrets: { whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw: 1 }, api_url: 'https://h.example', api_key: 'sk-a.b' }],
      sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', headers: { 'sk-live.AbCdEf0123456789': 5, 'X-Team': 6 } }],
    };
    const lines = await serveLines(config);
    const all = lines.join('\n');
    for (const token of ['b7f3e9a14c2d8f06e5a1b3c7d9e2f4a6', 'MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', 'AbCdEf0123456789']) expect(all).not.toContain(token);
    expect(lines).toContain('config error: CONFIG_FILE (top level): Unrecognized key: one not shown (not a plain name, so it may hold a value) (allowed keys: sources, sinks)');
    expect(lines).toContain('config error: CONFIG_FILE sinks.0.headers.(a key not shown: not a plain name, so it may hold a value): must be a string, or { "env": "NAME" } to read it from an environment variable');
    // An ordinary header name is still said.
    expect(lines).toContain('config error: CONFIG_FILE sinks.0.headers.X-Team: must be a string, or { "env": "NAME" } to read it from an environment variable');
    // Nor in the http sink's own checks of a header (its value quoted, as an env file keeps it).
    const sink = { name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', headers: { 'sk-live.AbCdEf0123456789': '"x"' } };
    const own = (await serveLines({ sinks: [sink] })).join('\n');
    expect(own).toContain('config error: CONFIG_FILE sinks.0.headers.(a key not shown: not a plain name, so it may hold a value): the value ');
    expect(own).not.toContain('AbCdEf0123456789');
  });

  it('a header named "Authorization: Bearer …" whose value the schema refuses: its name is not in the path the message gives', async () => {
    const headers = { 'Authorization: Bearer sk-live.TOKEN123': { envv: 'X' }, 'X-Team': { envv: 'Y' } };
    const config = { sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw', headers }] };
    const lines = await serveLines(config);
    expect(lines.join('\n')).not.toContain('TOKEN123');
    expect(lines).toContain('config error: CONFIG_FILE sinks.0.headers.(a key not shown: not a plain name, so it may hold a value): Unrecognized key: "envv"; did you mean "env"? (allowed keys: env)');
    expect(lines).toContain('config error: CONFIG_FILE sinks.0.headers.X-Team: Unrecognized key: "envv"; did you mean "env"? (allowed keys: env)');
    const listed = await cli(['sinks', 'list'], { DATABASE_PATH: join(dir, 'none.db'), CONFIG_FILE: configFile(config) });
    expect(listed.stderr).toContain('sinks.0.headers.(a key not shown');
    expect(listed.stderr).not.toContain('TOKEN123');
  });
});
