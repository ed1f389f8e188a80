import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config/loadConfig.js';
import { MIN_SECRET_BYTES } from '../../src/config/parseSecret.js';
import { newSecret } from '../helpers/signing.js';
import { startReceiver, tempDir } from '../helpers/receiver.js';
import { join } from 'node:path';
import { writeFileSync } from 'node:fs';

const API = { HIRING_API_URL: 'https://hiring.example', HIRING_API_KEY: 'sk-abc.def' };
const problemsOf = (env: Record<string, string>, files: Record<string, string> = {}) => {
  try {
    loadConfig(env, (p) => {
      if (!(p in files)) throw Object.assign(new Error('nope'), { code: 'ENOENT' });
      return files[p]!;
    });
    return [];
  } catch (err) {
    if (err instanceof ConfigError) return [...err.problems];
    throw err;
  }
};

describe('loadConfig', () => {
  it('applies the documented defaults and freezes the result', () => {
    const c = loadConfig({ ...API, WEBHOOK_SECRET: newSecret() });
    expect(c).toMatchObject({ port: 8080, host: '0.0.0.0', databasePath: './data/receiver.db', logLevel: 'info', maxBodyBytes: 1048576 });
    expect(c.sources.map((s) => s.name)).toEqual(['default']);
    expect(Object.isFrozen(c)).toBe(true);
  });

  it('accepts several secrets separated by commas or spaces', () => {
    const [a, b, c] = [newSecret(), newSecret(), newSecret()];
    const cfg = loadConfig({ ...API, WEBHOOK_SECRET: `${a},${b}  ${c}` });
    expect(cfg.sources[0]!.signingKeys).toHaveLength(3);
  });

  it.each([
    ['', /WEBHOOK_SECRET: is empty/],
    ['abc', /must start with "whsec_"/],
    [`"whsec_${Buffer.alloc(24, 1).toString('base64')}"`, /WEBHOOK_SECRET: is wrapped in quote characters: set the value without them/],
    ['whsec_', /is not "whsec_" followed by valid base64/],
    ['whsec_@@@@', /is not "whsec_" followed by valid base64/],
    // Without its padding, a last group of one character encodes no byte (length mod 4 of 1).
    [`whsec_${'A'.repeat(41)}`, /is not "whsec_" followed by valid base64/],
    [`whsec_${Buffer.alloc(32, 7).toString('base64').replace(/=+$/, '').slice(0, -1)}*`, /is not "whsec_" followed by valid base64/],
    [`whsec_${Buffer.alloc(32, 7).toString('base64').replace(/=+$/, '')}==`, /is not "whsec_" followed by valid base64/],
    [`whsec_${Buffer.alloc(MIN_SECRET_BYTES - 1, 1).toString('base64')}`, new RegExp(`decodes to ${MIN_SECRET_BYTES - 1} bytes; at least ${MIN_SECRET_BYTES}`)],
  ])('refuses the secret %j', (secret, message) => {
    expect(problemsOf({ ...API, WEBHOOK_SECRET: secret }).join('\n')).toMatch(message);
  });

  it.each([32, 25, 24])('accepts a %i-byte secret written without its base64 padding, as the standardwebhooks package does', (bytes) => {
    const key = Buffer.from(Array.from({ length: bytes }, (_, i) => (i * 37 + 11) % 256));
    const bare = key.toString('base64').replace(/=+$/, '');
    expect(bare.length % 4).toBe(bytes % 3 === 0 ? 0 : bytes % 3 === 1 ? 2 : 3);
    const cfg = loadConfig({ ...API, WEBHOOK_SECRET: `whsec_${bare}` });
    expect(cfg.sources[0]!.signingKeys).toEqual([key]);
  });

    it('names the secret that is bad among several', () => {
    expect(problemsOf({ ...API, WEBHOOK_SECRET: `${newSecret()},whsec_x` })).toEqual([
      'WEBHOOK_SECRET (secret 2 of 2): is not "whsec_" followed by valid base64',
    ]);
  });

  it('reports every problem at once', () => {
    const problems = problemsOf({ PORT: '70000', MAX_BODY_BYTES: '1k', HIRING_API_URL: 'ftp://x', WEBHOOK_SECRET: newSecret() });
    expect(problems).toEqual([
      'PORT: must be between 0 and 65535, got 70000',
      'MAX_BODY_BYTES: must be an integer, got "1k"',
      'HIRING_API_URL: must be an http(s) URL of the service host, such as https://hiring.example.com (its scheme is not http or https; the value is not shown, it may hold a credential)',
      'HIRING_API_KEY: is required (results are fetched from the hiring service with it)',
    ]);
  });

  it('takes PROCESSING_SHARE as a percent of the event loop, 25 by default, 5 to 100', () => {
    expect(loadConfig({ ...API, WEBHOOK_SECRET: newSecret() }).processingShare).toBe(25);
    expect(loadConfig({ ...API, WEBHOOK_SECRET: newSecret(), PROCESSING_SHARE: '100' }).processingShare).toBe(100);
    expect(problemsOf({ ...API, WEBHOOK_SECRET: newSecret(), PROCESSING_SHARE: '0.5' })).toEqual(['PROCESSING_SHARE: must be an integer, got "0.5"']);
    expect(problemsOf({ ...API, WEBHOOK_SECRET: newSecret(), PROCESSING_SHARE: '2' })).toEqual(['PROCESSING_SHARE: must be between 5 and 100, got 2']);
  });

  it('takes METRICS_PORT (unset: /metrics on PORT), which must differ from PORT', () => {
    expect(loadConfig({ ...API, WEBHOOK_SECRET: newSecret() }).metricsPort).toBeNull();
    expect(loadConfig({ ...API, WEBHOOK_SECRET: newSecret(), METRICS_PORT: '9091' }).metricsPort).toBe(9091);
    expect(loadConfig({ ...API, WEBHOOK_SECRET: newSecret(), PORT: '0', METRICS_PORT: '0' }).metricsPort).toBe(0);
    expect(problemsOf({ ...API, WEBHOOK_SECRET: newSecret(), METRICS_PORT: 'metrics' })).toEqual(['METRICS_PORT: must be an integer, got "metrics"']);
    expect(problemsOf({ ...API, WEBHOOK_SECRET: newSecret(), PORT: '8080', METRICS_PORT: '8080' })).toEqual([
      'METRICS_PORT: must differ from PORT (8080); leave it unset to serve /metrics on PORT',
    ]);
  });

  it('takes SHUTDOWN_GRACE_MS, 5000 by default, 0 to 600000', () => {
    expect(loadConfig({ ...API, WEBHOOK_SECRET: newSecret() }).shutdownGraceMs).toBe(5000);
    expect(loadConfig({ ...API, WEBHOOK_SECRET: newSecret(), SHUTDOWN_GRACE_MS: '0' }).shutdownGraceMs).toBe(0);
    expect(problemsOf({ ...API, WEBHOOK_SECRET: newSecret(), SHUTDOWN_GRACE_MS: '600001' })).toEqual(['SHUTDOWN_GRACE_MS: must be between 0 and 600000, got 600001']);
  });

  it.each([
    ['https://hiring.example/api/v2', 'https://hiring.example', '/api/v2'],
    ['https://hiring.example/api/v1/', 'https://hiring.example', '/api/v1'],
    ['https://hiring.example/api/v1/.', 'https://hiring.example', '/api/v1'],
    ['https://gateway.example/hiring/api/v2', 'https://gateway.example/hiring', '/api/v2'],
    ['https://hiring.example/api/v1?x=1', 'https://hiring.example', '/api/v1'],
    ['https://hiring.example/api/v2/jobs/123/hiring-team', 'https://hiring.example', '/api/v2/jobs/123/hiring-team'],
    ['https://hiring.example/API/V2/Webhooks', 'https://hiring.example', '/API/V2/Webhooks'],
    ['https://gw.example/api/v1/hiring/api/v2/organization/members', 'https://gw.example/api/v1/hiring', '/api/v2/organization/members'],
  ])('refuses the versioned API URL %j as HIRING_API_URL or api_url, naming the base URL to give', (url, base, suffix) => {
    const message = `give the service's base URL without ${suffix} (the receiver adds /api/v1 and /api/v2 itself): ${JSON.stringify(base)}`;
    expect(problemsOf({ WEBHOOK_SECRET: newSecret(), HIRING_API_URL: url, HIRING_API_KEY: 'sk-abc.def' })).toEqual([`HIRING_API_URL: ${message}`]);
    const file = JSON.stringify({ sources: [{ name: 'acme', secrets: newSecret(), api_url: url, api_key: 'sk-abc.def' }] });
    expect(problemsOf({ CONFIG_FILE: '/c.json' }, { '/c.json': file })).toEqual([`CONFIG_FILE sources.0.api_url: ${message}`]);
  });

  it.each([
    ['https://gw.example.com/api/v1/hiring', 'https://gw.example.com/api/v1/hiring'],
    ['https://gw.example.com/api/v2/hiring-service/', 'https://gw.example.com/api/v2/hiring-service'],
    ['https://gw.example.com/api/v1/applicationsx', 'https://gw.example.com/api/v1/applicationsx'],
  ])('takes %j, a gateway prefix holding /api/vN but no URL of the API itself, as the base URL', (url, base) => {
    expect(loadConfig({ WEBHOOK_SECRET: newSecret(), HIRING_API_URL: url, HIRING_API_KEY: 'sk-abc.def' }).sources[0]!.apiUrl).toBe(base);
    const file = JSON.stringify({ sources: [{ name: 'acme', secrets: newSecret(), api_url: url, api_key: 'sk-abc.def' }] });
    expect(loadConfig({ CONFIG_FILE: '/c.json' }, () => file).sources[0]!.apiUrl).toBe(base);
  });

  it('names a URL with an http scheme that does not parse as not valid, without echoing it', () => {
    expect(problemsOf({ WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'https://hiring.example.com:99999', HIRING_API_KEY: 'sk-abc.def' })).toEqual([
      'HIRING_API_URL: must be an http(s) URL of the service host, such as https://hiring.example.com (it is not a valid URL; the value is not shown, it may hold a credential)',
    ]);
  });

  it.each([
    ['admin:hunter2@hiring.example.com', 'hunter2'],
    ['hiring.example.com/?api_key=sk-live.REALKEY', 'REALKEY'],
  ])('refuses %j, a URL without its scheme, without echoing the credential in it', (url, secret) => {
    const problems = problemsOf({ WEBHOOK_SECRET: newSecret(), HIRING_API_URL: url, HIRING_API_KEY: 'sk-abc.def' });
    expect(problems).toEqual([
      'HIRING_API_URL: must be an http(s) URL of the service host, such as https://hiring.example.com (it does not start with http:// or https://; the value is not shown, it may hold a credential)',
    ]);
    expect(problems.join('\n')).not.toContain(secret);
  });

  it('refuses user:password@ in the API URL without echoing it, and a query or fragment', () => {
    const problems = problemsOf({ WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'https://svc:Pa55w0rd@hiring.example/api/v1', HIRING_API_KEY: 'sk-abc.def' });
    expect(problems).toEqual(['HIRING_API_URL: must not carry a user name or password (user:password@); the API key is sent as the bearer token']);
    expect(problems.join('\n')).not.toContain('Pa55w0rd');
    expect(problemsOf({ WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'https://hiring.example/?tenant=1', HIRING_API_KEY: 'sk-abc.def' })).toEqual([
      'HIRING_API_URL: must not have a query or fragment: give the service\'s base URL, "https://hiring.example"',
    ]);
  });

  it('keeps a base URL with a path prefix of its own (a gateway, even one ending in /api), minus trailing slashes', () => {
    const url = (u: string) => loadConfig({ WEBHOOK_SECRET: newSecret(), HIRING_API_URL: u, HIRING_API_KEY: 'sk-abc.def' }).sources[0]!.apiUrl;
    expect(url('https://gateway.example/hiring/')).toBe('https://gateway.example/hiring');
    expect(url('https://gateway.example/hiring/api')).toBe('https://gateway.example/hiring/api');
    expect(url('https://api.example/apis/v1x')).toBe('https://api.example/apis/v1x');
  });

  it('bounds the bytes of bodies held at once: 32 MiB by default, never below MAX_BODY_BYTES', () => {
    const at = (env: Record<string, string>) => loadConfig({ ...API, WEBHOOK_SECRET: newSecret(), ...env }).maxBodyBytesInFlight;
    expect(at({})).toBe(32 * 1024 * 1024);
    // A larger MAX_BODY_BYTES raises the default with it: such a body must fit.
    expect(at({ MAX_BODY_BYTES: String(64 * 1024 * 1024) })).toBe(64 * 1024 * 1024);
    expect(at({ MAX_BODY_BYTES_IN_FLIGHT: '2097152' })).toBe(2 * 1024 * 1024);
    expect(problemsOf({ ...API, WEBHOOK_SECRET: newSecret(), MAX_BODY_BYTES_IN_FLIGHT: '524288' })).toEqual([
      'MAX_BODY_BYTES_IN_FLIGHT: must be at least MAX_BODY_BYTES (1048576), or a delivery of that size could never be read; got 524288',
    ]);
  });

  it('gives the range for a negative number, and every missing setting of the default source at once', () => {
    expect(problemsOf({ ...API, WEBHOOK_SECRET: newSecret(), MAX_BODY_BYTES: '-1' })).toEqual(['MAX_BODY_BYTES: must be between 1024 and 67108864, got -1']);
    expect(problemsOf({ ...API, WEBHOOK_SECRET: newSecret(), PORT: '-0' })).toEqual(['PORT: must be an integer, got "-0"']);
    expect(problemsOf({})).toEqual([
      'WEBHOOK_SECRET: is required (or list sources in CONFIG_FILE)',
      'HIRING_API_URL: is required (results are fetched from the hiring service with it)',
      'HIRING_API_KEY: is required (results are fetched from the hiring service with it)',
    ]);
  });

  it('reads sources from CONFIG_FILE, with secrets inline or from the environment', () => {
    const cfg = loadConfig(
      { CONFIG_FILE: '/c.json', ACME_KEY: 'sk-abc.def', ACME_SECRET: newSecret() },
      () =>
        JSON.stringify({
          sources: [{ name: 'acme', secrets: { env: 'ACME_SECRET' }, api_url: 'https://hiring.example/', api_key: { env: 'ACME_KEY' } }],
        }),
    );
    expect(cfg.sources).toEqual([{ name: 'acme', signingKeys: [expect.any(Buffer)], apiUrl: 'https://hiring.example', apiKey: 'sk-abc.def' }]);
  });

  it('refuses one signing secret in two sources (WEBHOOK_SECRET\'s default included), without echoing it', () => {
    const shared = newSecret();
    const file = JSON.stringify({
      sources: [
        { name: 'acme', secrets: [newSecret(), shared], api_url: 'https://h.example', api_key: 'sk-a.b' },
        { name: 'globex', secrets: shared, api_url: 'https://h.example', api_key: 'sk-c.d' },
      ],
    });
    const problems = problemsOf({ CONFIG_FILE: '/c.json', WEBHOOK_SECRET: shared, HIRING_API_URL: 'https://h.example', HIRING_API_KEY: 'sk-e.f' }, { '/c.json': file });
    expect(problems).toEqual([
      'CONFIG_FILE: sources "default" and "acme" have the same signing secret; each webhook endpoint has its own, and deliveries could not be told apart',
      'CONFIG_FILE: sources "default" and "globex" have the same signing secret; each webhook endpoint has its own, and deliveries could not be told apart',
    ]);
    expect(problems.join('\n')).not.toContain(shared.slice(6, 20));
  });

  it("refuses one API key in two sources (WEBHOOK_SECRET's default included), without echoing it: the second source's reads would go out with the first organization's key", () => {
    const file = JSON.stringify({
      sources: [
        { name: 'acme', secrets: [newSecret()], api_url: 'https://h.example', api_key: 'sk-acme.k3yOfAcme' },
        { name: 'globex', secrets: [newSecret()], api_url: 'https://other.example', api_key: 'sk-acme.k3yOfAcme' },
        { name: 'initech', secrets: [newSecret()], api_url: 'https://h.example', api_key: 'sk-default.k3y' },
      ],
    });
    const problems = problemsOf({ CONFIG_FILE: '/c.json', WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'https://h.example', HIRING_API_KEY: 'sk-default.k3y' }, { '/c.json': file });
    const why = "a key reads only its own organization's applications, and one organization is one source (its endpoints' secrets together in its `secrets`)";
    expect(problems).toEqual([
      `CONFIG_FILE: sources "acme" and "globex" have the same API key; ${why}`,
      `CONFIG_FILE: sources "default" and "initech" have the same API key; ${why}`,
    ]);
    expect(problems.join('\n')).not.toContain('k3y');
  });

  it('names the path of a bad field in CONFIG_FILE, unknown keys included', () => {
    const problems = problemsOf(
      { CONFIG_FILE: '/c.json' },
      { '/c.json': JSON.stringify({ sources: [{ name: 'a', secrets: { env: 'MISSING' }, colour: 'red' }], extra: 1 }) },
    );
    expect(problems.join('\n')).toMatch(/CONFIG_FILE sources\.0: Unrecognized key: "colour"/);
    expect(problems.join('\n')).toMatch(/CONFIG_FILE \(top level\): Unrecognized key: "extra"/);
  });

  it('says a value carried quotes or spaces from an env file, without showing it; refuses a DATABASE_PATH it could not keep', () => {
    const secret = newSecret();
    const { dir, cleanup } = tempDir('config-db-');
    try {
      expect(
        problemsOf({
          WEBHOOK_SECRET: secret,
          HIRING_API_URL: '"https://hiring.example"',
          HIRING_API_KEY: 'sk-abc.def\n',
          DATABASE_PATH: ' /data/receiver.db',
        }),
      ).toEqual([
        'DATABASE_PATH: has spaces or a line break at its start or end: set the value without them',
        'HIRING_API_URL: is wrapped in quote characters: set the value without them',
        'HIRING_API_KEY: has spaces or a line break at its start or end: set the value without them',
      ]);
      expect(problemsOf({ ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: '"/data/receiver.db"' })).toEqual(['DATABASE_PATH: is wrapped in quote characters: set the value without them']);
      // A key pasted with a character no HTTP header can carry is said here, not as a crash at the first read.
      for (const key of ['sk-abc.dé', 'sk-acme0001.sandboxAcme…']) {
        expect(problemsOf({ WEBHOOK_SECRET: secret, HIRING_API_URL: 'https://hiring.example', HIRING_API_KEY: key })).toEqual([
          'HIRING_API_KEY: must have the form sk-<segment>.<segment>, in printable ASCII characters (no spaces, no "…")',
        ]);
      }
      expect(problemsOf({ ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: ':memory:' })).toEqual([
        'DATABASE_PATH: must be the path of a database file (":memory:" is not supported: deliveries must survive a restart)',
      ]);
      expect(problemsOf({ ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: dir })).toEqual([
        `DATABASE_PATH: ${JSON.stringify(dir)} is a folder: give the path of the database file in it, such as ${JSON.stringify(join(dir, 'receiver.db'))}`,
      ]);
      // A path through a file: not a raw ENOTDIR here (opening the database names it, with the path).
      writeFileSync(join(dir, 'a-file'), '');
      expect(problemsOf({ ...API, WEBHOOK_SECRET: secret, DATABASE_PATH: join(dir, 'a-file', 'r.db') })).toEqual([]);
    } finally {
      cleanup();
    }
  });

  it('warns of a variable one or two letters from a setting\'s name, and of HIRING_API_* that no source uses', () => {
    const c = loadConfig({ ...API, WEBHOOK_SECRET: newSecret(), WORKER_CONCURENCY: '16', LOG_LEVLE: 'debug', HOME: '/root', HOSTNAME: 'box', NODE_ENV: 'production' });
    expect(c.workerConcurrency).toBe(4);
    expect(c.warnings).toEqual([
      'WORKER_CONCURENCY is not a setting; did you mean WORKER_CONCURRENCY? (WORKER_CONCURRENCY is unset)',
      'LOG_LEVLE is not a setting; did you mean LOG_LEVEL? (LOG_LEVEL is unset)',
    ]);
    const secret = newSecret();
    const file = { '/c.json': JSON.stringify({ sources: [{ name: 'acme', secrets: secret, api_url: 'https://x.example', api_key: 'sk-a.b' }] }) };
    const viaFile = loadConfig({ ...API, CONFIG_FILE: '/c.json', WEBHOOK_SECRT: newSecret() }, (p) => file[p as '/c.json']);
    // Names CONFIG_FILE uses itself are not typos.
    const named = { '/c.json': JSON.stringify({ sources: [{ name: 'acme', secrets: { env: 'WEBHOOK_SECRET_2' }, api_url: 'https://x.example', api_key: { env: 'HIRING_API_KEY2' } }] }) };
    expect(loadConfig({ CONFIG_FILE: '/c.json', WEBHOOK_SECRET_2: secret, HIRING_API_KEY2: 'sk-a.b' }, (p) => named[p as '/c.json']).warnings).toEqual([]);
    expect(viaFile.warnings).toEqual([
      'WEBHOOK_SECRT is not a setting; did you mean WEBHOOK_SECRET? (WEBHOOK_SECRET is unset)',
      'HIRING_API_URL and HIRING_API_KEY are set but unused: they belong to the `default` source, which exists only with WEBHOOK_SECRET (the sources of CONFIG_FILE have their own api_url and api_key)',
    ]);
    // Only the variable that is set is named.
    const oneOf = (extra: Record<string, string>) => loadConfig({ CONFIG_FILE: '/c.json', ...extra }, (p) => file[p as '/c.json']).warnings;
    expect(oneOf({ HIRING_API_URL: 'https://hiring.example' })).toEqual([
      'HIRING_API_URL is set but unused: it belongs to the `default` source, which exists only with WEBHOOK_SECRET (the sources of CONFIG_FILE have their own api_url and api_key)',
    ]);
    expect(oneOf({ HIRING_API_KEY: 'sk-a.b' })).toEqual([
      'HIRING_API_KEY is set but unused: it belongs to the `default` source, which exists only with WEBHOOK_SECRET (the sources of CONFIG_FILE have their own api_url and api_key)',
    ]);
  });

  it('warns of a hiring API reached over plain http on another host (the API key unencrypted), not of https or this machine', () => {
    const warn = (url: string) => loadConfig({ WEBHOOK_SECRET: newSecret(), HIRING_API_URL: url, HIRING_API_KEY: 'sk-a.b' }).warnings;
    expect(warn('http://hiring.internal:8000')).toEqual(['source default: the hiring API at http://hiring.internal:8000 is plain http: its API key and the candidates\' results travel unencrypted; use https']);
    expect(warn('https://hiring.example')).toEqual([]);
    expect(warn('http://127.0.0.1:4010')).toEqual([]);
    expect(warn('http://localhost:4010')).toEqual([]);
  });

  it('logs those warnings at start', async () => {
    const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURENCY: '16' }, { listen: false });
    try {
      expect(r.logs.lines.filter((l) => l.level === 40 && String(l.msg).startsWith('configuration: '))).toEqual([
        expect.objectContaining({ msg: 'configuration: WORKER_CONCURENCY is not a setting; did you mean WORKER_CONCURRENCY? (WORKER_CONCURRENCY is unset)' }),
      ]);
    } finally {
      await r.close();
    }
  });

  it('never prints a secret pasted where a variable\'s name belongs ({ "env": "whsec_..." })', () => {
    // Letters and digits only, as about a third of random secrets are: it would pass as a name.
    const secret = `whsec_${'Ab1'.repeat(11)}`;
    const other = problemsOf(
      { CONFIG_FILE: '/c.json' },
      { '/c.json': JSON.stringify({ sources: [{ name: 'a', secrets: { env: secret }, api_url: 'https://x.example', api_key: { env: 'sk_live7Hq2Zx9pLmN0' } }] }) },
    );
    expect(other.join('\n')).not.toContain('Ab1Ab1');
    // Upper-case tokens (hex, base32) pass as names too: not shown either.
    const tokens = problemsOf(
      { CONFIG_FILE: '/c.json' },
      { '/c.json': JSON.stringify({ sources: [{ name: 'a', secrets: { env: 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP' }, api_url: 'https://x.example', api_key: { env: 'A642AEAF21F7B24E28F5D4C5296F5ABC' } }] }) },
    );
    expect(tokens.join('\n')).not.toMatch(/JBSWY3DP|A642AEAF/);
    expect(other.join('\n')).not.toContain('Zx9pLmN0');
    expect(other[0]).toBe('CONFIG_FILE sources.0.secrets: the environment variable it names is not set (the name is not shown: it does not look like one; is the secret itself here?)');
    const problems = problemsOf(
      { CONFIG_FILE: '/c.json' },
      { '/c.json': JSON.stringify({ sources: [{ name: 'a', secrets: { env: `${secret}+/=` }, api_url: 'https://x.example', api_key: { env: 'sk-live7Hq2.Zx9pLmN0' } }] }) },
    );
    expect(problems).toEqual([
      'CONFIG_FILE sources.0.secrets: "env" must name an environment variable (letters, digits and _), not hold the value (not shown: is the secret itself here?)',
      'CONFIG_FILE sources.0.api_key: "env" must name an environment variable (letters, digits and _), not hold the value (not shown: is the secret itself here?)',
    ]);
    expect(problems.join('\n')).not.toContain('Ab1Ab1');
    expect(problems.join('\n')).not.toContain('Zx9pLmN0');
  });

  it('reports an unreadable or invalid CONFIG_FILE and an unset secret variable', () => {
    expect(problemsOf({ CONFIG_FILE: '/missing.json' })).toEqual(['CONFIG_FILE: cannot read "/missing.json" (ENOENT)']);
    expect(problemsOf({ CONFIG_FILE: '/c.json' }, { '/c.json': '{' })[0]).toBe('CONFIG_FILE: /c.json is not valid JSON (at line 1, column 2)');
    // Where, never what: V8's message quotes the text around the error.
    expect(problemsOf({ CONFIG_FILE: '/c.json' }, { '/c.json': '{\n  "sources": [{"api_key": sk-live123.Secret}]\n}' })).toEqual([
      'CONFIG_FILE: /c.json is not valid JSON (at line 2, column 27)',
    ]);
    expect(problemsOf({ CONFIG_FILE: '/c.json' }, { '/c.json': JSON.stringify({ sources: [{ name: 'a', secrets: { env: 'NOPE' }, api_url: 'https://x.example', api_key: 'sk-a.b' }] }) })).toContain(
      'CONFIG_FILE sources.0.secrets: environment variable NOPE is not set',
    );
  });

  it('says a secret\'s variable is set but empty, not that it is not set (a `NAME=` left blank in an env file)', () => {
    const file = JSON.stringify({ sources: [{ name: 'a', secrets: { env: 'ACME_SECRET' }, api_url: { env: 'ACME_URL' }, api_key: { env: 'ACME_KEY' } }] });
    expect(problemsOf({ CONFIG_FILE: '/c.json', ACME_SECRET: '', ACME_URL: '', ACME_KEY: '' }, { '/c.json': file })).toEqual([
      'CONFIG_FILE sources.0.secrets: environment variable ACME_SECRET is set but empty',
      'CONFIG_FILE sources.0.api_url: environment variable ACME_URL is set but empty',
      'CONFIG_FILE sources.0.api_key: environment variable ACME_KEY is set but empty',
    ]);
    expect(problemsOf({ CONFIG_FILE: '/c.json', ACME_URL: 'https://x.example' }, { '/c.json': file })).toEqual([
      'CONFIG_FILE sources.0.secrets: environment variable ACME_SECRET is not set',
      'CONFIG_FILE sources.0.api_key: environment variable ACME_KEY is not set',
    ]);
    // A name not shown (it may be the secret itself) is told apart the same way.
    const hidden = JSON.stringify({ sources: [{ name: 'a', secrets: { env: 'x9f3kq7z2m' }, api_url: 'https://x.example', api_key: 'sk-a.b' }] });
    expect(problemsOf({ CONFIG_FILE: '/c.json', x9f3kq7z2m: '' }, { '/c.json': hidden })).toEqual([
      'CONFIG_FILE sources.0.secrets: the environment variable it names is set but empty (the name is not shown: it does not look like one; is the secret itself here?)',
    ]);
  });
});
