import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/loadConfig.js';
import { linkSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { homedir } from 'node:os';
import { startReceiver, tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

const API = { HIRING_API_URL: 'https://hiring.example', HIRING_API_KEY: 'sk-abc.def', WEBHOOK_SECRET: newSecret() };
const withFile = (file: unknown, env: Record<string, string> = {}) => loadConfig({ ...API, CONFIG_FILE: '/c.json', ...env }, () => JSON.stringify(file));
const problemsOf = (file: unknown, env: Record<string, string> = {}) => {
  try {
    withFile(file, env);
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
};

describe('CONFIG_FILE sinks', () => {
  it('has no sinks by default', () => {
    expect(loadConfig(API).sinks).toEqual([]);
  });

  it('resolves each kind with its defaults, secrets inline or from the environment', () => {
    const secret = newSecret();
    const cfg = withFile(
      {
        sinks: [
          { name: 'crm', type: 'http', url: 'https://crm.example/hooks', secret: { env: 'CRM_SECRET' }, events: ['interview.completed', 'insights.*'] },
          { name: 'archive', type: 'file', path: './data/events.ndjson', max_attempts: 3 },
          { name: 'console', type: 'stdout', events: ['application.*'], sources: ['default'], concurrency: 2 },
        ],
      },
      { CRM_SECRET: secret },
    );
    expect(cfg.sinks).toEqual([
      { name: 'crm', type: 'http', events: ['interview.completed', 'insights.*'], sources: null, concurrency: 4, maxAttempts: 25, target: expect.stringMatching(/^https:\/\/crm\.example\/… \(url sha256 [0-9a-f]{12}\)$/), options: { url: 'https://crm.example/hooks', secret, timeoutMs: 10_000, headers: {} } },
      { name: 'archive', type: 'file', events: null, sources: null, concurrency: 512, maxAttempts: 3, target: './data/events.ndjson', options: { path: './data/events.ndjson' } },
      { name: 'console', type: 'stdout', events: ['application.*'], sources: ['default'], concurrency: 2, maxAttempts: 25, target: 'stdout', options: {} },
    ]);
    expect(Object.isFrozen(cfg.sinks)).toBe(true);
    expect(Object.isFrozen(cfg.sinks[0])).toBe(true);
  });

  it('refuses unknown sink types and unknown keys, naming the path', () => {
    const problems = problemsOf({ sinks: [{ name: 'ok', type: 'stdout' }, { name: 'x', type: 'kafka' }, { name: 'f', type: 'file', path: 'p', colour: 'red' }] });
    expect(problems).toEqual([
      'CONFIG_FILE sinks.1.type: unknown sink type "kafka"; known types: http, file, stdout',
      'CONFIG_FILE sinks.2: Unrecognized key: "colour" (allowed keys for type "file": name, events, sources, concurrency, max_attempts, path, type)',
    ]);
  });

  it('reports every bad field of every sink in one run, schema and resolution alike', () => {
    const problems = problemsOf({
      sinks: [
        { name: 'a', type: 'http', url: 'ftp://x', secret: 'nope' },
        { name: 'b', type: 'http', url: 'https://x.example', secret: { env: 'UNSET' } },
        { name: 'a', type: 'stdout', sources: ['ghost'] },
        { name: 'c', type: 'stdout', events: [] },
        { name: 'd', type: 'http', url: 'https://x.example', secret: newSecret(), timeout_ms: 120_000, concurrency: 0 },
      ],
    });
    expect(problems).toEqual([
      'CONFIG_FILE sinks.0.url: must be an http(s) URL',
      'CONFIG_FILE sinks.0.secret: must start with "whsec_"',
      'CONFIG_FILE sinks.1.secret: environment variable UNSET is not set',
      'CONFIG_FILE sinks.2.name: sink name "a" is used twice',
      'CONFIG_FILE sinks.2.sources.0: no source named "ghost" is configured',
      'CONFIG_FILE sinks.3.events: must not be empty; omit it to receive every event',
      expect.stringMatching(/^CONFIG_FILE sinks\.4\.concurrency: /),
      expect.stringMatching(/^CONFIG_FILE sinks\.4\.timeout_ms: /),
    ]);
  });

  it('says a sink secret\'s or header\'s variable is set but empty, not that it is not set', () => {
    const problems = problemsOf(
      { sinks: [{ name: 'crm', type: 'http', url: 'https://x.example', secret: { env: 'CRM_SECRET' }, headers: { Authorization: { env: 'CRM_AUTH' } } }] },
      { CRM_SECRET: '', CRM_AUTH: '' },
    );
    expect(problems).toEqual([
      'CONFIG_FILE sinks.0.headers.Authorization: environment variable CRM_AUTH is set but empty',
      'CONFIG_FILE sinks.0.secret: environment variable CRM_SECRET is set but empty',
    ]);
  });

  it('reports a bad top level and bad sources beside the sinks\' problems, and a sinks key that is not a list', () => {
    const problems = problemsOf({
      extra: true,
      sources: [{ name: 'acme', secrets: newSecret(), api_url: 'https://h.example', api_key: 'sk-a.b', colour: 'red' }],
      sinks: [{ name: 'a', type: 'stdout', sources: ['acme', 'ghost'] }],
    });
    expect(problems).toEqual([
      'CONFIG_FILE (top level): Unrecognized key: "extra" (allowed keys: sources, sinks)',
      'CONFIG_FILE sources.0: Unrecognized key: "colour" (allowed keys: name, secrets, api_url, api_key)',
      // acme is still a known name for the sinks, so only the unknown one is named.
      'CONFIG_FILE sinks.0.sources.1: no source named "ghost" is configured',
    ]);
    expect(problemsOf({ sinks: { name: 'a' } })).toEqual(['CONFIG_FILE sinks: must be an array of sinks']);
    // `replay --sink all` means every sink: a sink of that name could not be replayed to alone.
    expect(problemsOf({ sinks: [{ name: 'all', type: 'stdout' }] })).toEqual(['CONFIG_FILE sinks.0.name: "all" is reserved: `replay --sink all` means every sink']);
    // A sink that fails its schema still holds its name: a second one by that name is reported now.
    expect(problemsOf({ sinks: [{ name: 'a', type: 'stdout', colour: 'red' }, { name: 'a', type: 'stdout' }] })).toEqual([
      'CONFIG_FILE sinks.0: Unrecognized key: "colour" (allowed keys for type "stdout": name, events, sources, concurrency, max_attempts, type)',
      'CONFIG_FILE sinks.1.name: sink name "a" is used twice',
    ]);
  });
});

describe('CONFIG_FILE sinks: what an operator gets wrong', () => {
  it('says a missing field is required, whatever its type', () => {
    expect(problemsOf({ sinks: [{ name: 'crm', type: 'http' }] })).toEqual([
      'CONFIG_FILE sinks.0.url: is required',
      'CONFIG_FILE sinks.0.secret: is required',
    ]);
    expect(problemsOf({ sources: [{ name: 'acme', api_url: 'https://h.example', api_key: 'sk-a.b' }] })).toEqual(['CONFIG_FILE sources.0.secrets: is required']);
  });

  it('refuses a file sink writing into the database or its files, or into another file sink\'s file', () => {
    const env = { DATABASE_PATH: '/var/lib/receiver/r.db' };
    expect(
      problemsOf(
        {
          sinks: [
            { name: 'a', type: 'file', path: '/var/lib/receiver/r.db' },
            { name: 'b', type: 'file', path: '/var/lib/receiver/../receiver/r.db-wal' },
            { name: 'c', type: 'file', path: '/var/log/events.ndjson' },
            { name: 'd', type: 'file', path: '/var/log/./events.ndjson' },
          ],
        },
        env,
      ),
    ).toEqual([
      "CONFIG_FILE sinks.0.path: is the receiver's database or one of its files (DATABASE_PATH)",
      "CONFIG_FILE sinks.1.path: is the receiver's database or one of its files (DATABASE_PATH)",
      'CONFIG_FILE sinks.3.path: sink "c" already writes to this file',
    ]);
    // The default DATABASE_PATH counts too.
    expect(problemsOf({ sinks: [{ name: 'a', type: 'file', path: './data/receiver.db-shm' }] })).toEqual([
      "CONFIG_FILE sinks.0.path: is the receiver's database or one of its files (DATABASE_PATH)",
    ]);
  });

  it('refuses a file path starting with "~", which only a shell expands (the lines would go to a folder named "~" in the working directory)', () => {
    const file = (path: string) => ({ name: 'archive', type: 'file', path });
    const shell = 'starts with "~", which only a shell expands (not an env file, Docker or systemd): give the whole path,';
    expect(problemsOf({ sinks: [file('~/hiring/events.ndjson'), { ...file('~'), name: 'b' }, { ...file('~ops/events.ndjson'), name: 'c' }] })).toEqual([
      `CONFIG_FILE sinks.0.path: ${shell} such as ${JSON.stringify(join(homedir(), 'hiring/events.ndjson'))}`,
      `CONFIG_FILE sinks.1.path: ${shell} such as ${JSON.stringify(homedir())}`,
      `CONFIG_FILE sinks.2.path: ${shell} starting with the home folder of "ops"`,
    ]);
    expect(problemsOf({ sinks: [file('./data/~events.ndjson'), { ...file('/data/~/events.ndjson'), name: 'b' }] })).toEqual([]);
  });

  it('compares files by their real path: a folder reached through a link names the database, and another sink\'s file, all the same', () => {
    const { dir, cleanup } = tempDir('sink-link-');
    const env = { DATABASE_PATH: join(dir, 'data', 'r.db') };
    // File sinks named a, b, c... at these paths under dir.
    const fileSinks = (...paths: string[][]) => problemsOf({ sinks: paths.map((p, i) => ({ name: 'abcd'[i], type: 'file', path: join(dir, ...p) })) }, env);
    const IS_DATABASE = "is the receiver's database or one of its files (DATABASE_PATH)";
    try {
      mkdirSync(join(dir, 'data'));
      symlinkSync(join(dir, 'data'), join(dir, 'link'));
      writeFileSync(join(dir, 'data', 'r.db'), '');
      // The second is not created yet: its folder's real path decides.
      expect(fileSinks(['link', 'r.db'], ['link', 'r.db-wal'], ['data', 'events.ndjson'], ['link', 'events.ndjson'])).toEqual([
        `CONFIG_FILE sinks.0.path: ${IS_DATABASE}`,
        `CONFIG_FILE sinks.1.path: ${IS_DATABASE}`,
        'CONFIG_FILE sinks.3.path: sink "c" already writes to this file',
      ]);
      // The same file under another name: a hard link (on macOS's case-insensitive APFS,
      // `Events.ndjson` for `events.ndjson` is one too), of the database or of another sink's file.
      linkSync(join(dir, 'data', 'r.db'), join(dir, 'data', 'R-link.db'));
      writeFileSync(join(dir, 'data', 'events.ndjson'), '');
      linkSync(join(dir, 'data', 'events.ndjson'), join(dir, 'data', 'Events.ndjson'));
      expect(fileSinks(['data', 'R-link.db'], ['data', 'events.ndjson'], ['data', 'Events.ndjson'])).toEqual([
        `CONFIG_FILE sinks.0.path: ${IS_DATABASE}`,
        'CONFIG_FILE sinks.2.path: sink "b" already writes to this file',
      ]);
      // A link to the database file itself.
      symlinkSync(join(dir, 'data', 'r.db'), join(dir, 'events.ndjson'));
      expect(fileSinks(['events.ndjson'])).toEqual([`CONFIG_FILE sinks.0.path: ${IS_DATABASE}`]);
    } finally {
      cleanup();
    }
  });

  it('an http sink\'s extra headers: names checked, the receiver\'s own refused, values never echoed, unset variables named', () => {
    const http = (headers: unknown) => ({ sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: newSecret(), headers }] });
    expect(problemsOf(http({ Authorization: 'Bearer t0k3n', 'X-Api-Key': { env: 'CRM_KEY' } }), { CRM_KEY: 'k-123' })).toEqual([]);
    expect(withFile(http({ Authorization: 'Bearer t0k3n' })).sinks[0]!.options).toMatchObject({ headers: { authorization: 'Bearer t0k3n' } });
    const problems = problemsOf(
      http({
        'Authorization: Bearer pasted-token-9': 'x',
        'Webhook-Signature': 'v1,forged',
        'Content-Type': 'text/plain',
        Host: 'evil.example',
        'User-Agent': 'gateway-client/2',
        'X-Injected': 'a\r\nX-Other: secret-value-1',
        'X-Missing': { env: 'NOT_SET_ANYWHERE' },
        'x-twice': 'a',
        'X-Twice': 'b',
      }),
    );
    expect(problems).toEqual([
      'CONFIG_FILE sinks.0.headers: the name of header 1 is not a header name (letters, digits and !#$%&\'*+.^_`|~-, up to 100; not shown, as it may hold a value)',
      'CONFIG_FILE sinks.0.headers.Webhook-Signature: set by the receiver itself (the message\'s framing and its Standard Webhooks signature)',
      'CONFIG_FILE sinks.0.headers.Content-Type: set by the receiver itself (the message\'s framing and its Standard Webhooks signature)',
      'CONFIG_FILE sinks.0.headers.Host: set by the receiver itself (the message\'s framing and its Standard Webhooks signature)',
      'CONFIG_FILE sinks.0.headers.User-Agent: set by the receiver itself (the message\'s framing and its Standard Webhooks signature)',
      'CONFIG_FILE sinks.0.headers.X-Injected: the value must be printable ASCII (no line breaks), at most 8,192 characters',
      'CONFIG_FILE sinks.0.headers.X-Missing: environment variable NOT_SET_ANYWHERE is not set',
      'CONFIG_FILE sinks.0.headers.X-Twice: given twice (header names are case-insensitive)',
    ]);
    expect(problems.join('\n')).not.toContain('secret-value-1');
    expect(problems.join('\n')).not.toContain('pasted-token-9');
  });

  it('an http sink header whose value an env file left in quotes is refused, without showing it (the gateway would refuse every message)', () => {
    const http = (headers: unknown) => ({ sinks: [{ name: 'crm', type: 'http', url: 'https://crm.example/hook', secret: newSecret(), headers }] });
    const problems = problemsOf(http({ Authorization: { env: 'CRM_GATEWAY_AUTH' }, 'X-Api-Key': { env: 'CRM_KEY' } }), {
      CRM_GATEWAY_AUTH: '"Bearer gw-token-77"',
      CRM_KEY: "'k-123'",
    });
    expect(problems).toEqual([
      'CONFIG_FILE sinks.0.headers.Authorization: the value is wrapped in quote characters: set the value without them',
      'CONFIG_FILE sinks.0.headers.X-Api-Key: the value is wrapped in quote characters: set the value without them',
    ]);
    expect(problems.join('\n')).not.toContain('gw-token-77');
  });

  it('refuses an events pattern in capitals (event types are lowercase and matched exactly)', () => {
    expect(problemsOf({ sinks: [{ name: 'a', type: 'stdout', events: ['Insights.Completed'] }] })).toEqual([
      'CONFIG_FILE sinks.0.events.0: must be an event type or "prefix.*", in lowercase as the service sends them',
    ]);
  });

  it('warns at start about events patterns that match no documented event type', async () => {
    const { dir, cleanup } = tempDir('sink-typo-');
    const out = join(dir, 'out.ndjson');
    const configFile = join(dir, 'config.json');
    writeFileSync(configFile, JSON.stringify({ sinks: [{ name: 'typo', type: 'file', path: out, events: ['interview.complete', 'application.*', 'interviews.*'] }] }));
    const r = await startReceiver({ WEBHOOK_SECRET: API.WEBHOOK_SECRET, CONFIG_FILE: configFile });
    try {
      const warning = r.logs.lines.find((l) => l.level === 40 && /match no event type the service documents/.test(String(l.msg)));
      expect(warning).toMatchObject({ sink: 'typo', patterns: ['interview.complete', 'interviews.*'] });
    } finally {
      await r.close();
      cleanup();
    }
  });

  it('warns at start about an http sink sending over plain http to another host (candidate data unencrypted), not about https or this machine', async () => {
    const { dir, cleanup } = tempDir('sink-plain-');
    const configFile = join(dir, 'config.json');
    const sink = (name: string, url: string) => ({ name, type: 'http', url, secret: newSecret() });
    writeFileSync(
      configFile,
      JSON.stringify({ sinks: [sink('plain', 'http://crm.internal:8080/hooks?token=abc'), sink('tls', 'https://crm.example/hooks'), sink('here', 'http://127.0.0.1:9/hooks'), sink('here6', 'http://[::1]:9/hooks')] }),
    );
    const r = await startReceiver({ WEBHOOK_SECRET: API.WEBHOOK_SECRET, CONFIG_FILE: configFile });
    try {
      const warnings = r.logs.lines.filter((l) => l.level === 40 && /travel unencrypted/.test(String(l.msg)));
      expect(warnings.map((w) => [w.sink, w.msg])).toEqual([['plain', 'sink: plain http to http://crm.internal:8080: its messages (candidate data) travel unencrypted; use https']]);
      // The URL's path and query (a token, often) are not in it.
      expect(r.logs.raw.join('\n')).not.toContain('token=abc');
    } finally {
      await r.close();
      cleanup();
    }
  });
});

describe('CONFIG_FILE secrets never echoed', () => {
  it('refuses credentials in a sink URL and reports bad JSON by position only', async () => {
    const { ConfigError, loadConfig } = await import('../../src/config/loadConfig.js');
    const base = { WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'https://h.example', HIRING_API_KEY: 'sk-a.b' };
    const problems = (text: string) => {
      try {
        loadConfig({ ...base, CONFIG_FILE: '/c.json' }, () => text);
        return '';
      } catch (err) {
        return (err as InstanceType<typeof ConfigError>).problems.join('\n');
      }
    };
    const creds = problems(JSON.stringify({ sinks: [{ name: 'a', type: 'http', url: 'https://user:s3cret@crm.example/x', secret: newSecret() }] }));
    expect(creds).toMatch(/sinks\.0\.url: must not carry credentials/);
    expect(creds).not.toContain('s3cret');
    const bad = problems('{"sources": [{"api_key": sk-live123}]}');
    expect(bad).toMatch(/is not valid JSON/);
    expect(bad).not.toContain('sk-live123');
  });
});
