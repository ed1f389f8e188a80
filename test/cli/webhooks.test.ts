import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createSandbox, type Sandbox } from '../../src/sandbox/createSandbox.js';
import { ACME_KEY } from '../helpers/pair.js';
import { answerCutOff, cli } from './helpers.js';

let sandbox: Sandbox;
let env: Record<string, string>;

beforeAll(async () => {
  sandbox = createSandbox();
  const { url } = await sandbox.start(0, '127.0.0.1');
  env = { HIRING_API_URL: url, HIRING_API_KEY: ACME_KEY };
});
afterAll(() => sandbox.stop());

const SECRET = /whsec_[A-Za-z0-9+/=]{32,}/g;

/** A CONFIG_FILE in a new temporary folder (the caller removes the folder). */
function configIn(prefix: string, config: unknown): { dir: string; file: string } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const file = join(dir, 'config.json');
  writeFileSync(file, JSON.stringify(config));
  return { dir, file };
}

describe('webhooks against the sandbox', () => {
  it('registers once (secret printed once, with how to configure it), explains 409 already_exists, replays an Idempotency-Key', async () => {
    const url = 'http://127.0.0.1:9/webhooks';
    const first = await cli(['webhooks', 'register', '--url', url, '--events', 'interview.completed,insights.completed', '--idempotency-key', 'cli-test-key-1'], env);
    expect(first.code, first.stderr).toBe(0);
    const secrets = first.stdout.match(SECRET) ?? [];
    // The secret itself, and the WEBHOOK_SECRET line to configure: the same value.
    expect(new Set(secrets).size).toBe(1);
    expect(first.stdout).toContain(`WEBHOOK_SECRET="${secrets[0]}"`);
    expect(first.stdout).toMatch(/shown once/);
    expect(first.stdout).toMatch(/events\s+interview\.completed, insights\.completed/);
    const id = /Registered webhook (\S+)/.exec(first.stdout)![1]!;

    const [again, replay] = await Promise.all([
      cli(['webhooks', 'register', '--url', url], env),
      cli(['webhooks', 'register', '--url', url, '--events', 'interview.completed,insights.completed', '--idempotency-key', 'cli-test-key-1', '--json'], env),
    ]);
    expect(again.code).toBe(1);
    expect(again.stderr.trim().split('\n')).toHaveLength(1);
    expect(again.stderr).toMatch(/already registered as a webhook of your organization \(409 already_exists\).*once per organization.*\(it is webhook /);
    expect(again.stderr).toContain(id);
    expect(replay.code, replay.stderr).toBe(0);
    const replayed = JSON.parse(replay.stdout) as { id: string; idempotent_replay: boolean };
    expect(replayed).toMatchObject({ id, idempotent_replay: true });
    // The sandbox holds one endpoint for the URL.
    const conflict = await cli(['webhooks', 'register', '--url', 'http://127.0.0.1:9/other/webhooks', '--idempotency-key', 'cli-test-key-1'], env);
    expect(conflict.code).toBe(1);
    expect(conflict.stderr).toMatch(/idempotency_key_conflict/);
  });

  it('refuses a URL that does not end in /webhooks (every delivery would get 404), naming the one to use; --any-path accepts it', async () => {
    const wrong = await cli(['webhooks', 'register', '--url', 'https://receiver.example.com/'], env);
    expect(wrong.code).toBe(2);
    expect(wrong.stderr).toBe(
      'error: --url: the receiver takes deliveries at /webhooks, so this URL would answer 404 to every delivery; register https://receiver.example.com/webhooks (or pass --any-path if a proxy in front of it maps this path to /webhooks)\n',
    );
    // A typo of the path: the suggestion is the receiver's own path, not the typo with /webhooks
    // appended (/webhook/webhooks, which the receiver answers 404 to as well).
    const typo = await cli(['webhooks', 'register', '--url', 'https://receiver.example.com/webhook'], env);
    expect(typo.code).toBe(2);
    expect(typo.stderr).toContain('; register https://receiver.example.com/webhooks (or pass --any-path');
    const bad = await cli(['webhooks', 'register', '--url', 'receiver.example.com/webhooks'], env);
    expect(bad).toMatchObject({ code: 2, stderr: expect.stringMatching(/^error: --url: must be an absolute http\(s\) URL/) });
    const proxied = await cli(['webhooks', 'register', '--url', 'http://127.0.0.1:9/hooks/hiring', '--any-path', '--json'], env);
    expect(proxied.code, proxied.stderr).toBe(0);
    expect(JSON.parse(proxied.stdout)).toMatchObject({ url: 'http://127.0.0.1:9/hooks/hiring' });
  });

  it('lists every page with secrets masked, rotates (new secret once, rotation advice), shows deliveries, deletes', async () => {
    // 60 endpoints: two pages of the default 50.
    const created = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        fetch(`${env.HIRING_API_URL}/api/v2/webhooks`, {
          method: 'POST',
          headers: { authorization: `Bearer ${ACME_KEY}`, 'content-type': 'application/json' },
          body: JSON.stringify({ url: `http://127.0.0.1:9/hook-${i}` }),
        }),
      ),
    );
    expect(created.every((r) => r.status === 201)).toBe(true);
    const createdIds = await Promise.all(created.map(async (r) => ((await r.json()) as { id: string }).id));
    const list = await cli(['webhooks', 'list', '--json'], env);
    expect(list.code, list.stderr).toBe(0);
    const hooks = JSON.parse(list.stdout) as { id: string; url: string; secret: string }[];
    // Every one of its own 60 (past the first page), whatever other tests registered before it.
    expect(hooks.map((h) => h.id)).toEqual(expect.arrayContaining(createdIds));
    expect(hooks.every((h) => /^whsec_\*+/.test(h.secret))).toBe(true);
    const target = hooks.find((h) => h.url === 'http://127.0.0.1:9/hook-0')!;

    sandbox.control.runScenario('opted_out');
    await sandbox.control.idle();
    const [rotate, deliveries, table] = await Promise.all([
      cli(['webhooks', 'rotate-secret', target.id], env),
      cli(['webhooks', 'deliveries', target.id, '--json'], env),
      cli(['webhooks', 'list'], env),
    ]);
    expect(rotate.code, rotate.stderr).toBe(0);
    const rotated = [...new Set(rotate.stdout.match(SECRET) ?? [])];
    expect(rotated).toHaveLength(1);
    expect(rotate.stdout).toContain(`WEBHOOK_SECRET="<current secret>,${rotated[0]}"`);
    expect(deliveries.code, deliveries.stderr).toBe(0);
    const records = JSON.parse(deliveries.stdout) as { event_type: string; status: string; response_code: number | null }[];
    expect(records.map((r) => r.event_type)).toContain('application.created');
    expect(records.every((r) => r.status === 'failed')).toBe(true);
    expect(table.code).toBe(0);
    expect(table.stdout).not.toMatch(SECRET);

    const del = await cli(['webhooks', 'delete', target.id], env);
    expect(del.code, del.stderr).toBe(0);
    const [gone, after] = await Promise.all([cli(['webhooks', 'delete', target.id], env), cli(['webhooks', 'list', '--json'], env)]);
    expect(gone.code).toBe(1);
    expect(gone.stderr).toMatch(/not found \(404\)/);
    expect((JSON.parse(after.stdout) as { id: string }[]).some((h) => h.id === target.id)).toBe(false);
  });

  it('--source reads only that source\'s API settings: a new source without its signing secret yet can register', async () => {
    const { dir, file } = configIn('webhooks-source-', {
      sources: [
        { name: 'acme', secrets: { env: 'ACME_WEBHOOK_SECRET' }, api_url: env.HIRING_API_URL, api_key: { env: 'ACME_API_KEY' } },
        { name: 'globex', secrets: { env: 'GLOBEX_WEBHOOK_SECRET' }, api_url: { env: 'GLOBEX_API_URL' }, api_key: 'sk-globex.key' },
      ],
      sinks: [{ name: 'broken', type: 'http', url: 'not a url' }],
    });
    try {
      // The receiver host's shell: a default source's secret without its API settings, a bad PORT.
      const shell = { CONFIG_FILE: file, ACME_API_KEY: ACME_KEY, WEBHOOK_SECRET: 'whsec_not-decoded-here', PORT: 'eighty' };
      const listed = await cli(['webhooks', 'list', '--source', 'acme', '--json'], shell);
      expect(listed.code, listed.stderr).toBe(0);
      expect(Array.isArray(JSON.parse(listed.stdout))).toBe(true);
      const registered = await cli(['webhooks', 'register', '--source', 'acme', '--url', 'http://127.0.0.1:9/acme/webhooks'], shell);
      expect(registered.code, registered.stderr).toBe(0);
      expect(registered.stdout).toMatch(/whsec_/);

      // The rest are independent: run together (each is a child process, seconds on a busy machine).
      const write = (name: string, config: unknown) => {
        const path = join(dir, name);
        writeFileSync(path, JSON.stringify(config));
        return path;
      };
      // The sources are the server's: without WEBHOOK_SECRET, HIRING_API_URL/KEY are not a source
      // `default`, so a file's `default` is the one used; a name used twice, a typo, no source at
      // all are config errors (exit 1), never a silent choice.
      const fileDefault = write('default.json', { sources: [{ name: 'default', secrets: { env: 'UNSET' }, api_url: env.HIRING_API_URL, api_key: ACME_KEY }] });
      const source = (name: string, url: string) => ({ name, secrets: 'x', api_url: url, api_key: 'sk-a.b' });
      const twice = write('twice.json', { sources: [source('acme', 'http://127.0.0.1:9'), source('acme', 'http://127.0.0.1:8')] });
      const typo = write('typo.json', { sources: [{ ...source('acme', 'http://127.0.0.1:9'), api_kye: 'sk-a.b' }] });
      const none = write('none.json', { sinks: [] });
      const [unset, unknown, noDefault, viaFile, usedTwice, misspelt, noSource] = await Promise.all([
        cli(['webhooks', 'list', '--source', 'globex'], shell),
        cli(['webhooks', 'list', '--source', 'initech'], shell),
        cli(['webhooks', 'list', '--source', 'default'], shell),
        cli(['webhooks', 'list', '--source', 'default', '--json'], { CONFIG_FILE: fileDefault, HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-env.key' }),
        cli(['webhooks', 'list', '--source', 'acme'], { CONFIG_FILE: twice }),
        cli(['webhooks', 'list', '--source', 'acme'], { CONFIG_FILE: typo }),
        cli(['webhooks', 'list'], { CONFIG_FILE: none }),
      ]);
      expect({ code: unset.code, stderr: unset.stderr }).toEqual({ code: 1, stderr: 'config error: CONFIG_FILE sources.1.api_url: environment variable GLOBEX_API_URL is not set\n' });
      expect({ code: unknown.code, stderr: unknown.stderr }).toEqual({ code: 2, stderr: 'error: no source named "initech" is configured (known: default, acme, globex)\n' });
      expect(noDefault.code).toBe(1);
      expect(noDefault.stderr).toMatch(/^config error: HIRING_API_URL: is required/);
      expect(viaFile.code, viaFile.stderr).toBe(0);
      expect(usedTwice).toMatchObject({ code: 1, stderr: 'config error: CONFIG_FILE: source name "acme" is used twice\n' });
      expect(misspelt).toMatchObject({ code: 1, stderr: 'config error: CONFIG_FILE sources.0: Unrecognized key: "api_kye"; did you mean "api_key"? (allowed keys: name, secrets, api_url, api_key)\n' });
      expect(noSource).toMatchObject({
        code: 1,
        stderr: 'config error: no source is configured: set HIRING_API_URL and HIRING_API_KEY, or list sources in CONFIG_FILE\n',
      });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 90_000);

  it('a CONFIG_FILE source is told to put a new secret where it reads its secrets, not in WEBHOOK_SECRET (which makes a source `default`)', async () => {
    const { dir, file } = configIn('webhooks-secret-', {
      sources: [
        { name: 'acme', secrets: { env: 'ACME_WEBHOOK_SECRET' }, api_url: env.HIRING_API_URL, api_key: ACME_KEY },
        { name: 'acme2', secrets: ['whsec_written-in-the-file'], api_url: env.HIRING_API_URL, api_key: ACME_KEY },
      ],
    });
    try {
      const shell = { CONFIG_FILE: file };
      const [viaVariable, inline] = await Promise.all([
        cli(['webhooks', 'register', '--source', 'acme', '--url', 'http://127.0.0.1:9/acme-secret/webhooks'], shell),
        cli(['webhooks', 'register', '--source', 'acme2', '--url', 'http://127.0.0.1:9/acme2-secret/webhooks'], shell),
      ]);
      expect(viaVariable.code, viaVariable.stderr).toBe(0);
      const secret = /Signing secret[^\n]*\n\s+(whsec_\S+)/.exec(viaVariable.stdout)![1]!;
      expect(viaVariable.stdout).toContain(`\n  ACME_WEBHOOK_SECRET="${secret}"\n`);
      expect(viaVariable.stdout).not.toMatch(/^\s*WEBHOOK_SECRET=/m);
      expect(inline.code, inline.stderr).toBe(0);
      expect(inline.stdout).toContain('Add it to source acme2\'s "secrets" in CONFIG_FILE');
      expect(inline.stdout).not.toMatch(/WEBHOOK_SECRET=/);

      const id = /Registered webhook (\S+)/.exec(viaVariable.stdout)![1]!;
      const rotated = await cli(['webhooks', 'rotate-secret', id, '--source', 'acme'], shell);
      expect(rotated.code, rotated.stderr).toBe(0);
      const next = /Signing secret[^\n]*\n\s+(whsec_\S+)/.exec(rotated.stdout)![1]!;
      expect(rotated.stdout).toContain(`\n  ACME_WEBHOOK_SECRET="<current secret>,${next}"\n`);
      expect(rotated.stdout).not.toMatch(/^\s*WEBHOOK_SECRET=/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a CONFIG_FILE source named `default` is told its own variable, never WEBHOOK_SECRET (which would make a second source `default`)', async () => {
    const { dir, file } = configIn('webhooks-default-', {
      sources: [{ name: 'default', secrets: { env: 'ORG_WEBHOOK_SECRET' }, api_url: env.HIRING_API_URL, api_key: ACME_KEY }],
    });
    try {
      const registered = await cli(['webhooks', 'register', '--url', 'http://127.0.0.1:9/file-default/webhooks'], { CONFIG_FILE: file });
      expect(registered.code, registered.stderr).toBe(0);
      const secret = /Signing secret[^\n]*\n\s+(whsec_\S+)/.exec(registered.stdout)![1]!;
      expect(registered.stdout).toContain(`\n  ORG_WEBHOOK_SECRET="${secret}"\n`);
      expect(registered.stdout).toContain('list both: ORG_WEBHOOK_SECRET="<old>,<new>"');
      expect(registered.stdout).not.toMatch(/(^|[^A-Z_])WEBHOOK_SECRET=/m);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('a source whose "secrets" names a variable that looks like a secret (pasted there) is not printed as its name', async () => {
    const pasted = 'b7f3e9a14c2d8f06e5a1b3c7d9e2f4a6';
    const { dir, file } = configIn('webhooks-pasted-', {
      sources: [{ name: 'acme3', secrets: { env: pasted }, api_url: env.HIRING_API_URL, api_key: ACME_KEY }],
    });
    try {
      const registered = await cli(['webhooks', 'register', '--source', 'acme3', '--url', 'http://127.0.0.1:9/pasted/webhooks'], { CONFIG_FILE: file });
      expect(registered.code, registered.stderr).toBe(0);
      const secret = /Signing secret[^\n]*\n\s+(whsec_\S+)/.exec(registered.stdout)![1]!;
      expect(registered.stdout).toContain(`\n  <the variable source acme3's "secrets" names>="${secret}"\n`);
      expect(`${registered.stdout}${registered.stderr}`).not.toContain(pasted);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('HIRING_API_URL pointing at another server that answers 200 (a portal page): every command fails, naming it, and nothing is reported done', async () => {
    const requests: string[] = [];
    const portal = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => res.writeHead(200, { 'content-type': 'text/html' }).end('<html><body>Sign in to the portal</body></html>'));
    });
    await new Promise<void>((resolve) => portal.listen(0, '127.0.0.1', resolve));
    const portalEnv = { HIRING_API_URL: `http://127.0.0.1:${(portal.address() as AddressInfo).port}`, HIRING_API_KEY: ACME_KEY };
    const jsonPortal = createServer((req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
    await new Promise<void>((resolve) => jsonPortal.listen(0, '127.0.0.1', resolve));
    const jsonEnv = { HIRING_API_URL: `http://127.0.0.1:${(jsonPortal.address() as AddressInfo).port}`, HIRING_API_KEY: ACME_KEY };
    try {
      const runs = await Promise.all([
        cli(['webhooks', 'list'], portalEnv),
        cli(['webhooks', 'deliveries', 'wh_1'], portalEnv),
        cli(['webhooks', 'rotate-secret', 'wh_1'], portalEnv),
        cli(['webhooks', 'register', '--url', 'https://receiver.example.com/webhooks'], portalEnv),
        cli(['webhooks', 'delete', 'wh_1'], portalEnv),
        cli(['webhooks', 'list'], jsonEnv),
        cli(['webhooks', 'rotate-secret', 'wh_1'], jsonEnv),
      ]);
      for (const r of runs) {
        expect(r.code, r.stdout).toBe(1);
        expect(r.stdout).toBe('');
        expect(r.stderr).toMatch(/^error: the answer from http:\/\/127\.0\.0\.1:\d+ is not the hiring API's \(.+\): is HIRING_API_URL the service's API base URL\?\n$/);
      }
      expect(runs[0]!.stderr).toMatch(/body that is not JSON \(text\/html\)/);
      expect(runs[5]!.stderr).toMatch(/a page without a results list/);
      expect(runs[6]!.stderr).toMatch(/without a webhook's id and url/);
      // Not sent again: an answer of the wrong kind is no reason to retry a POST.
      expect(requests.filter((r) => r.startsWith('POST /api/v2/webhooks'))).toHaveLength(2);
    } finally {
      portal.close();
      jsonPortal.close();
    }
  });

  it("prints the service's error text without the API key or a candidate's address and number", async () => {
    const key = ACME_KEY;
    const errorsFor: Record<string, string> = {
      POST: JSON.stringify([{ code: 'invalid_input', detail: `URL rejected for key ${key}; ask jane.doe@example.com or +44 20 7946 0958`, attr: 'url' }]),
      DELETE: JSON.stringify([{ code: 'forbidden', detail: `Header "Authorization: Bearer ${key}" lacks scope`, attr: null }]),
    };
    const api = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(req.method === 'POST' ? 400 : 403, { 'content-type': 'application/json' }).end(errorsFor[req.method ?? ''] ?? '[]'));
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    const apiEnv = { HIRING_API_URL: `http://127.0.0.1:${(api.address() as AddressInfo).port}`, HIRING_API_KEY: key };
    try {
      const [register, del] = await Promise.all([
        cli(['webhooks', 'register', '--url', 'https://receiver.example.com/webhooks'], apiEnv),
        cli(['webhooks', 'delete', 'wh_1'], apiEnv),
      ]);
      expect(register.code).toBe(1);
      expect(register.stderr).toBe('error: the service answered 400: invalid_input (url): URL rejected for key [redacted]; ask [email] or [phone]\n');
      expect(del.code).toBe(1);
      expect(del.stderr).toBe('error: the service answered 403: forbidden: Header "Authorization: Bearer [redacted]" lacks scope\n');
    } finally {
      api.close();
    }
  });

  it("prints the service's error text without another key or a signing secret it names (a rotated key, a colleague's)", async () => {
    const other = 'sk-acme0002.colleaguesKeyValue00000000';
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const api = createServer((req, res) => {
      req.resume();
      req.on('end', () =>
        res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify([{ code: 'invalid_input', detail: `key ${other} was replaced; secret ${secret} is in use`, attr: null }])),
      );
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    try {
      const r = await cli(['webhooks', 'delete', 'wh_1'], { HIRING_API_URL: `http://127.0.0.1:${(api.address() as AddressInfo).port}`, HIRING_API_KEY: ACME_KEY });
      expect(r.code).toBe(1);
      expect(r.stderr).toBe('error: the service answered 400: invalid_input: key [redacted] was replaced; secret [redacted] is in use\n');
    } finally {
      api.close();
    }
  });

  it('a redirect (HIRING_API_URL http:// behind a 301 to https) is a clear error naming where it points, by its origin only, for every command', async () => {
    const requests: string[] = [];
    const api = createServer((req, res) => {
      requests.push(`${req.method} ${req.url}`);
      req.resume();
      req.on('end', () => res.writeHead(301, { location: `https://api.moved.example${req.url}?access_token=tok-LOCSECRET` }).end());
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    const apiEnv = { HIRING_API_URL: `http://127.0.0.1:${(api.address() as AddressInfo).port}`, HIRING_API_KEY: ACME_KEY };
    try {
      const runs = await Promise.all([
        cli(['webhooks', 'list'], apiEnv),
        cli(['webhooks', 'register', '--url', 'https://receiver.example.com/webhooks'], apiEnv),
        cli(['webhooks', 'delete', 'wh_1'], apiEnv),
      ]);
      for (const r of runs) {
        expect(r.code, r.stdout).toBe(1);
        expect(r.stdout).toBe('');
        expect(r.stderr).toMatch(/^error: the service answered a redirect \(301 to https:\/\/api\.moved\.example\/… \(url sha256 [0-9a-f]{12}\)\); not followed: check HIRING_API_URL\n$/);
        expect(r.stderr).not.toMatch(/tok-LOCSECRET|access_token/);
      }
      // Not followed, nor sent again.
      expect(requests.filter((r) => r.startsWith('POST'))).toHaveLength(1);
    } finally {
      api.close();
    }
  });

  it('an answer far larger than any page of the API (a proxy streaming 64 MiB) is refused at the cap, not read whole into memory', async () => {
    const PAD = 64 * 1024 * 1024;
    const sent: number[] = [];
    // A 200 page with 64 MiB of padding, sent as the client reads it (backpressure), in chunks or
    // with its length declared; counts what was written when the client closed the connection.
    const big = createServer((req, res) => {
      const declared = req.url?.includes('deliveries') === true;
      const head = Buffer.from('{"results":[],"next":null,"pad":"');
      const tail = Buffer.from('"}');
      const chunk = Buffer.alloc(1024 * 1024, 120);
      res.writeHead(200, { 'content-type': 'application/json', ...(declared ? { 'content-length': String(head.length + PAD + tail.length) } : {}) });
      let written = 0;
      res.write(head);
      res.on('close', () => sent.push(written));
      const pump = () => {
        while (!res.destroyed && written < PAD) {
          written += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', pump);
        }
        if (!res.destroyed) res.end(tail);
      };
      pump();
    });
    await new Promise<void>((resolve) => big.listen(0, '127.0.0.1', resolve));
    const bigEnv = { HIRING_API_URL: `http://127.0.0.1:${(big.address() as AddressInfo).port}`, HIRING_API_KEY: ACME_KEY };
    try {
      const runs = await Promise.all([cli(['webhooks', 'list'], bigEnv), cli(['webhooks', 'deliveries', 'wh_1'], bigEnv)]);
      for (const r of runs) {
        expect(r.code, r.stdout).toBe(1);
        expect(r.stdout).toBe('');
        expect(r.stderr).toMatch(/^error: the answer from http:\/\/127\.0\.0\.1:\d+ is not the hiring API's \(HTTP 200 with a body over 5242880 bytes\): is HIRING_API_URL the service's API base URL\?\n$/);
      }
      // The connection was dropped near the cap: the rest of the 64 MiB was never read.
      expect(sent).toHaveLength(2);
      for (const n of sent) expect(n).toBeLessThan(PAD / 2);
    } finally {
      big.closeAllConnections();
      big.close();
    }
  });

  it('an answer whose body breaks off after its headers is a clear error naming the service, for a list and a register (retried with its key)', async () => {
    const api = await answerCutOff('{"results": [');
    const { origin } = api;
    const apiEnv = { HIRING_API_URL: origin, HIRING_API_KEY: ACME_KEY };
    try {
      const [list, register] = await Promise.all([cli(['webhooks', 'list'], apiEnv), cli(['webhooks', 'register', '--url', 'https://receiver.example.com/webhooks', '--idempotency-key', 'cut-off-1'], apiEnv)]);
      for (const r of [list, register]) {
        expect({ code: r.code, stdout: r.stdout, stderr: r.stderr }).toEqual({ code: 1, stdout: '', stderr: `error: the answer from the hiring service at ${origin} broke off (HTTP 200, ECONNRESET)\n` });
      }
      // The create may have happened: sent again under the same Idempotency-Key, as after no answer.
      const posts = api.requests.filter((q) => q.method === 'POST');
      expect(posts.map((q) => `${q.url} ${String(q.headers['idempotency-key'])}`)).toEqual(Array(3).fill('/api/v2/webhooks cut-off-1'));
    } finally {
      api.close();
    }
  });

  it('follows a `next` relative to its page (a proxy rewrote it) for list and deliveries; one on another origin is still refused', async () => {
    const hook = (id: string) => ({ id, url: `https://receiver.example.com/${id}/webhooks`, enabled: true, event_types: [], secret: 'whsec_****' });
    const attempt = (id: string) => ({ id, event_id: `evt-${id}`, event_type: 'application.created', attempt: 1, status: 'failed', response_code: 503 });
    const api = createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      const second = u.searchParams.get('offset') === '1';
      // The deliveries of `far` link a next on another host, relative to the scheme only.
      const page = u.pathname.endsWith('/far/deliveries')
        ? { next: '//other.example/api/v2/webhooks/far/deliveries?offset=1', results: [attempt('d1')] }
        : u.pathname.endsWith('/deliveries')
          ? { next: second ? null : `deliveries?${u.searchParams.toString()}&offset=1`, results: [attempt(second ? 'd2' : 'd1')] }
          : { next: second ? null : '/api/v2/webhooks?offset=1', results: [hook(second ? 'w2' : 'w1')] };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ count: 2, previous: null, ...page }));
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    const origin = `http://127.0.0.1:${(api.address() as AddressInfo).port}`;
    const apiEnv = { HIRING_API_URL: origin, HIRING_API_KEY: ACME_KEY };
    try {
      const [list, deliveries, elsewhere] = await Promise.all([
        cli(['webhooks', 'list', '--json'], apiEnv),
        cli(['webhooks', 'deliveries', 'w1', '--json'], apiEnv),
        cli(['webhooks', 'deliveries', 'far', '--json'], apiEnv),
      ]);
      expect(list.code, list.stderr).toBe(0);
      expect((JSON.parse(list.stdout) as { id: string }[]).map((h) => h.id)).toEqual(['w1', 'w2']);
      expect(deliveries.code, deliveries.stderr).toBe(0);
      expect((JSON.parse(deliveries.stdout) as { id: string }[]).map((d) => d.id)).toEqual(['d1', 'd2']);
      expect({ code: elsewhere.code, stdout: elsewhere.stdout, stderr: elsewhere.stderr }).toEqual({
        code: 1,
        stdout: '',
        stderr: `error: refusing to send the API key to http://other.example (the API is at ${origin})\n`,
      });
    } finally {
      api.close();
    }
  });

  it('says plainly when the key is refused', async () => {
    const r = await cli(['webhooks', 'list'], { ...env, HIRING_API_KEY: 'sk-revoked0.notAKeyAtAll000000000000' });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(/refused the API key \(401 authentication_failed\)/);
    expect(r.stderr).not.toContain('notAKeyAtAll');
  });
});
