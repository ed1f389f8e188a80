import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { createServer as createHttpServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import { createNodeHttpClient, type HttpRequest, type NodeHttpClient } from '../../src/http/httpClient.js';
import { readOutboundProxy, runtimeSupportsProxy } from '../../src/http/outboundProxy.js';
import { ManualClock } from '../../src/util/clock.js';
import { cli } from '../cli/helpers.js';
import { createSandbox } from '../../src/sandbox/createSandbox.js';
import { ROOT, runTs } from '../helpers/childServer.js';
import { startForwardProxy, type ForwardProxy } from '../helpers/forwardProxy.js';
import { startReceiver, tempDir, type TestReceiver } from '../helpers/receiver.js';
import { envelope, newSecret, postSigned } from '../helpers/signing.js';
import { startHarness } from '../sinks/helpers.js';

const GET: HttpRequest = { method: 'GET', headers: {}, maxBodyBytes: 1024 };
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url));

let cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

async function proxy(opts: { auth?: string } = {}): Promise<ForwardProxy> {
  const p = await startForwardProxy(opts);
  cleanups.push(() => p.close());
  return p;
}

/** A plain HTTP server on 127.0.0.1 that answers `said <path>`, keeping each request's Host and Authorization. */
async function target(): Promise<{ port: number; requests: { host?: string; authorization?: string; path?: string }[] }> {
  const requests: { host?: string; authorization?: string; path?: string }[] = [];
  const server: Server = createHttpServer((req: IncomingMessage, res) => {
    requests.push({ host: req.headers.host, authorization: req.headers.authorization, path: req.url });
    res.end(`said ${req.url}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => {
    server.closeAllConnections();
    return new Promise((resolve) => server.close(resolve));
  });
  return { port: (server.address() as AddressInfo).port, requests };
}

function client(env: Record<string, string>): NodeHttpClient {
  const problems: string[] = [];
  const settings = readOutboundProxy(env, problems);
  expect(problems).toEqual([]);
  const c = createNodeHttpClient({ proxy: settings });
  cleanups.push(() => c.close());
  return c;
}

/** What `serve` needs to start on a database in a fresh temp folder, its workers off. */
function serveEnv(): { env: Record<string, string> & { DATABASE_PATH: string } } {
  const { dir, cleanup } = tempDir('proxy-serve-');
  cleanups.push(cleanup);
  return {
    env: {
      DATABASE_PATH: join(dir, 'receiver.db'),
      WEBHOOK_SECRET: newSecret(),
      HIRING_API_URL: 'https://hiring.test',
      HIRING_API_KEY: 'sk-acme.key',
      PORT: '0',
      HOST: '127.0.0.1',
      WORKER_CONCURRENCY: '0',
    },
  };
}

describe('readOutboundProxy: HTTPS_PROXY, HTTP_PROXY and NO_PROXY', () => {
  const read = (env: Record<string, string>, node = '22.21.0') => {
    const problems: string[] = [];
    const proxy = readOutboundProxy(env, problems, node);
    return { proxy, problems };
  };

  it('is null without a proxy variable (NO_PROXY alone changes nothing): connections stay direct', () => {
    expect(read({})).toEqual({ proxy: null, problems: [] });
    expect(read({ NO_PROXY: 'internal.corp', HTTPS_PROXY: '' })).toEqual({ proxy: null, problems: [] });
  });

  it('reads each scheme its own proxy, the lowercase variable first (as curl and Node.js do), a bare host:port as http://, and adds loopback to NO_PROXY', () => {
    const { proxy, problems } = read({ HTTPS_PROXY: 'http://upper.corp:1', https_proxy: 'proxy.corp:3128', no_proxy: 'internal.corp, .svc.local' });
    expect(problems).toEqual([]);
    expect(proxy?.https?.href).toBe('http://proxy.corp:3128/');
    expect(proxy?.http).toBeNull();
    expect(proxy?.noProxy).toBe('internal.corp,.svc.local,localhost,127.0.0.0-127.255.255.255,::1');
    // A lowercase form set but empty (`export https_proxy=`) is unset: the uppercase one is read, as Node.js and curl do.
    const emptyLower = read({ https_proxy: '', HTTPS_PROXY: 'http://upper.corp:1', http_proxy: '', no_proxy: '', NO_PROXY: 'internal.corp' });
    expect(emptyLower.problems).toEqual([]);
    expect([emptyLower.proxy?.https?.href, emptyLower.proxy?.http, emptyLower.proxy?.noProxy]).toEqual(['http://upper.corp:1/', null, 'internal.corp,localhost,127.0.0.0-127.255.255.255,::1']);
  });

  it('refuses, naming the variable and never its value (it may hold a password): a SOCKS proxy, an unreadable URL, quotes from an env file, a Node.js without proxy support', () => {
    expect(read({ HTTPS_PROXY: 'socks5://user:hunter2@127.0.0.1:1080' }).problems).toEqual(['HTTPS_PROXY: only http:// and https:// proxies are supported, got socks5:// (a SOCKS proxy is not)']);
    const unreadable = read({ http_proxy: 'http://user:hunter2@[bad' }).problems;
    expect(unreadable).toEqual([expect.stringMatching(/^http_proxy: is not a proxy URL \(the form is http:\/\/\[user:password@\]host:port; the value is not shown/)]);
    expect(read({ HTTPS_PROXY: '"http://proxy.corp:3128"' }).problems).toEqual([expect.stringMatching(/^HTTPS_PROXY: .*quote/i)]);
    const old = read({ HTTPS_PROXY: 'http://proxy.corp:3128' }, '22.20.0');
    expect(old.proxy).toBeNull();
    expect(old.problems).toEqual([expect.stringMatching(/^HTTPS_PROXY: Node\.js 22\.20\.0 cannot send through a proxy \(it needs 22\.21 or later 22\.x, 24\.5 or later, or 26\.x\)/)]);
    for (const p of [unreadable, read({ HTTPS_PROXY: 'socks5://user:hunter2@127.0.0.1:1080' }).problems]) expect(p.join('\n')).not.toContain('hunter2');
  });

  it('knows which Node.js versions have proxyEnv (22.21+, 24.5+, 25+)', () => {
    expect(['22.14.0', '22.20.9', '23.11.0', '24.4.1'].map((v) => runtimeSupportsProxy(v))).toEqual([false, false, false, false]);
    expect(['22.21.0', '22.23.3', '24.5.0', '26.0.0'].map((v) => runtimeSupportsProxy(v))).toEqual([true, true, true, true]);
  });
});

describe('createNodeHttpClient through a real forward proxy on 127.0.0.1', () => {
  it('sends an http:// URL through HTTP_PROXY in absolute form with Basic Proxy-Authorization from the URL, the keep-alive connection reused, the target seeing only its own headers', async () => {
    const p = await proxy({ auth: basic('corp', 'pa ss') });
    const t = await target();
    const c = client({ HTTP_PROXY: `http://corp:pa%20ss@127.0.0.1:${p.port}` });
    const url = `http://hiring.test:${t.port}/api/v2/x`;
    for (const n of [1, 2]) {
      const res = await c.request(`${url}?n=${n}`, { ...GET, headers: { authorization: 'Bearer sk-the.key' } });
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ kind: 'text', text: `said /api/v2/x?n=${n}` });
    }
    expect(p.seen).toEqual([
      { kind: 'forward', target: `${url}?n=1`, auth: basic('corp', 'pa ss') },
      { kind: 'forward', target: `${url}?n=2`, auth: basic('corp', 'pa ss') },
    ]);
    expect(p.connections()).toBe(1);
    expect(t.requests.map((r) => [r.host, r.authorization])).toEqual([
      [`hiring.test:${t.port}`, 'Bearer sk-the.key'],
      [`hiring.test:${t.port}`, 'Bearer sk-the.key'],
    ]);
  });

  it('reaches loopback directly whatever the proxy variables say, and the NO_PROXY hosts directly too', async () => {
    const p = await proxy();
    const t = await target();
    const c = client({ HTTP_PROXY: p.url, NO_PROXY: 'direct.test' });
    expect((await c.request(`http://127.0.0.1:${t.port}/a`, GET)).status).toBe(200);
    expect((await c.request(`http://localhost:${t.port}/b`, GET)).status).toBe(200);
    // The target listens on 127.0.0.1 only: other loopback addresses refuse, where the proxy would answer 502.
    for (const host of ['127.0.0.2', '127.255.255.254', '[::1]']) await expect(c.request(`http://${host}:${t.port}/x`, GET)).rejects.toMatchObject({ code: 'ECONNREFUSED' });
    // Direct: `.test` resolves nowhere, so only the proxy could have answered.
    await expect(c.request(`http://direct.test:${t.port}/c`, GET)).rejects.toMatchObject({ code: expect.stringMatching(/^(ENOTFOUND|EAI_AGAIN)$/) });
    expect(p.seen).toEqual([]);
    expect(t.requests.map((r) => r.path)).toEqual(['/a', '/b']);
  });

  it('sends an http:// URL directly when only HTTPS_PROXY is set: each scheme has its own proxy', async () => {
    const p = await proxy();
    const c = client({ HTTPS_PROXY: p.url });
    // Direct: `.test` resolves nowhere, so only the proxy could have answered.
    await expect(c.request('http://hiring.test:1/x', GET)).rejects.toMatchObject({ code: expect.stringMatching(/^(ENOTFOUND|EAI_AGAIN)$/) });
    expect(p.seen).toEqual([]);
  });

  it('a tunnel the proxy refuses (407) fails the request with ERR_PROXY_TUNNEL naming the status, never the proxy password', async () => {
    const p = await proxy({ auth: basic('corp', 'right') });
    const c = client({ HTTPS_PROXY: `http://corp:wrong-hunter2@127.0.0.1:${p.port}` });
    const err = (await c.request('https://hiring.test:443/x', GET).catch((e: unknown) => e)) as NodeJS.ErrnoException;
    expect(err.code).toBe('ERR_PROXY_TUNNEL');
    expect(err.message).toContain('407');
    expect(err.message).not.toContain('hunter2');
    expect(p.seen).toEqual([{ kind: 'connect', target: 'hiring.test:443', auth: basic('corp', 'wrong-hunter2') }]);
  });

  it('tunnels an https:// URL through HTTPS_PROXY with CONNECT, the certificate checked against the target name (a child process: NODE_EXTRA_CA_CERTS)', async () => {
    const p = await proxy();
    let requests = 0;
    const tls = createHttpsServer({ cert: readFileSync(fixture('hiring-test-cert.pem')), key: readFileSync(fixture('hiring-test-key.pem')) }, (_req, res) => {
      requests++;
      res.end('over the tunnel');
    });
    await new Promise<void>((resolve) => tls.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      tls.closeAllConnections();
      return new Promise((resolve) => tls.close(resolve));
    });
    const port = (tls.address() as AddressInfo).port;
    const run = (env: Record<string, string>) =>
      new Promise<unknown>((resolve, reject) =>
        execFile(
          process.execPath,
          ['--import', 'tsx', fixture('getOnce.ts'), `https://hiring.test:${port}/x`],
          { env: { PATH: process.env.PATH ?? '', NODE_EXTRA_CA_CERTS: fixture('hiring-test-cert.pem'), ...env }, timeout: 20_000 },
          (err, stdout) => (err ? reject(err) : resolve(JSON.parse(stdout))),
        ),
      );
    expect(await run({ HTTPS_PROXY: p.url })).toEqual({ status: 200, body: { kind: 'text', text: 'over the tunnel' } });
    expect(p.seen).toEqual([{ kind: 'connect', target: `hiring.test:${port}`, auth: null }]);
    // HTTP_PROXY is for http:// URLs only: an https one goes direct, and `.test` resolves nowhere.
    expect(await run({ HTTP_PROXY: p.url })).toEqual({ error: expect.stringMatching(/^(ENOTFOUND|EAI_AGAIN)$/) });
    expect(requests).toBe(1);
  });
});

/**
 * A receiver on a manual clock (its workers stopped: the test runs them) with `env`, that has
 * accepted one interview.completed delivery; its result read is due.
 */
async function receiverWithOneEvent(env: Record<string, string>): Promise<{ r: TestReceiver; clock: ManualClock; appId: string }> {
  const clock = new ManualClock(Date.parse('2026-11-01T09:00:00Z'));
  const secret = newSecret();
  const r: TestReceiver = await startReceiver({ WEBHOOK_SECRET: secret, HIRING_API_KEY: 'sk-acme.proxied', ...env }, { clock });
  cleanups.push(() => r.close());
  await r.app.worker.stop();
  const event = envelope({ event_type: 'interview.completed', created_at: new Date(clock.now()).toISOString() });
  const appId = (event.payload as { application: { id: string } }).application.id;
  expect((await postSigned(r.url, secret, JSON.stringify(event), { timestampSeconds: Math.floor(clock.now() / 1000) })).status).toBe(200);
  return { r, clock, appId };
}

describe('the receiver through HTTP_PROXY', () => {
  it('reads the result an event announces through the proxy, with the API key to the service and the proxy credentials to the proxy only', async () => {
    const p = await proxy({ auth: basic('corp', 'pw') });
    const keys: string[] = [];
    const api: Server = createHttpServer((req, res) => {
      keys.push(String(req.headers.authorization));
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ status: 'completed', overall_score: 3, is_eligible: true, ineligibility_reasons: [], summary: 'through the proxy' }));
    });
    await new Promise<void>((resolve) => api.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      api.closeAllConnections();
      return new Promise((resolve) => api.close(resolve));
    });
    const apiPort = (api.address() as AddressInfo).port;
    const { r, appId } = await receiverWithOneEvent({ HIRING_API_URL: `http://hiring.test:${apiPort}`, HTTP_PROXY: `http://corp:pw@127.0.0.1:${p.port}` });
    await r.app.worker.runUntilIdle();

    expect(keys).toEqual(['Bearer sk-acme.proxied']);
    expect(p.seen).toEqual([{ kind: 'forward', target: expect.stringMatching(new RegExp(`^http://hiring\\.test:${apiPort}/api/v\\d/applications/${appId}/`)), auth: basic('corp', 'pw') }]);
    const db = new BetterSqlite3(r.dbPath, { readonly: true });
    try {
      expect(db.prepare('SELECT state, overall_score FROM interview_results WHERE application_id = ?').get(appId)).toEqual({ state: 'ready', overall_score: 3 });
    } finally {
      db.close();
    }
  });

  it('a proxy refusing the tunnel (407) is an outage of the read: retried, no dead letter, the error naming the proxy by host and the status, never its password', async () => {
    const p = await proxy({ auth: basic('corp', 'right') });
    const { r } = await receiverWithOneEvent({ HIRING_API_URL: 'https://hiring.test', HTTPS_PROXY: `http://corp:hunter2@127.0.0.1:${p.port}` });
    await r.app.worker.runUntilIdle();

    expect(p.seen).toEqual([{ kind: 'connect', target: 'hiring.test:443', auth: basic('corp', 'hunter2') }]);
    const db = new BetterSqlite3(r.dbPath, { readonly: true });
    try {
      const jobs = db.prepare('SELECT state, last_error FROM jobs').all() as { state: string; last_error: string | null }[];
      expect(jobs).toEqual([{ state: 'pending', last_error: expect.stringMatching(/network error: .*Failed to establish tunnel to hiring\.test:443 via http:\/\/127\.0\.0\.1:\d+\/: HTTP\/1\.1 407 Proxy Authentication Required/) }]);
    } finally {
      db.close();
    }
    expect(JSON.stringify(r.logs.lines)).not.toContain('hunter2');
  });

  // A refused tunnel is a network error, a 407 a client error: each an outage, never given up on its attempts.
  it.each([
    ['a 407 from HTTP_PROXY on an http:// API URL', { HIRING_API_URL: 'http://hiring.test:1', var: 'HTTP_PROXY', kind: 'forward', lastError: /^interview: HTTP 407 client_error$/ }],
    ['a tunnel HTTPS_PROXY refuses (407) for an https:// API URL', { HIRING_API_URL: 'https://hiring.test', var: 'HTTPS_PROXY', kind: 'connect', lastError: /^interview: network error: .*Failed to establish tunnel to hiring\.test:443 .*407/ }],
  ] as const)('%s is an outage too: retried past max_attempts, never dead-lettered', async (_what, c) => {
    const p = await proxy({ auth: basic('corp', 'right') });
    const { r, clock } = await receiverWithOneEvent({ HIRING_API_URL: c.HIRING_API_URL, [c.var]: `http://corp:hunter2@127.0.0.1:${p.port}` });
    const db = new BetterSqlite3(r.dbPath, { readonly: true });
    cleanups.push(() => db.close());
    const job = () => db.prepare("SELECT state, max_attempts, last_error FROM jobs WHERE kind = 'fetch_result'").get() as { state: string; max_attempts: number; last_error: string | null } | undefined;
    // Each round runs what is due, then moves past the longest backoff: one read a round.
    for (let round = 0; round < 40 && job()?.state !== 'dead'; round++) {
      await r.app.worker.runUntilIdle();
      clock.advance(2 * 3_600_000);
    }
    expect(p.seen.length).toBeGreaterThan(job()!.max_attempts);
    expect(p.seen.every((s) => s.kind === c.kind && s.auth === basic('corp', 'hunter2'))).toBe(true);
    expect(job()).toMatchObject({ state: 'pending', last_error: expect.stringMatching(c.lastError) });
    expect(JSON.stringify(r.logs.lines)).not.toContain('hunter2');
  });

  it('`serve` says at start where outbound requests go, by host only, and refuses a SOCKS proxy before it opens anything, without echoing its password', async () => {
    const { env } = serveEnv();
    const refused = await cli(['serve'], { ...env, HTTPS_PROXY: 'socks5://corp:hunter2@127.0.0.1:1080' });
    expect(refused.code).not.toBe(0);
    expect(refused.stderr).toContain('HTTPS_PROXY: only http:// and https:// proxies are supported, got socks5://');
    expect(refused.stdout + refused.stderr).not.toContain('hunter2');

    const child = runTs('src/main.ts', [], { ...env, HTTPS_PROXY: 'http://corp:hunter2@proxy.corp:3128', NO_PROXY: 'internal.corp' });
    cleanups.push(() => {
      child.proc.kill('SIGKILL');
      return child.exited;
    });
    const deadline = Date.now() + 20_000;
    while (!child.stdout.join('').includes('receiver listening') && child.proc.exitCode === null && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const lines = child.stdout.join('').split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(lines.find((l) => typeof l.msg === 'string' && l.msg.startsWith('outbound requests go through a proxy'))).toMatchObject({
      https_proxy: 'http://proxy.corp:3128',
      http_proxy: null,
      no_proxy: 'internal.corp,localhost,127.0.0.0-127.255.255.255,::1',
    });
    expect(child.stdout.join('') + child.stderr.join('')).not.toContain('hunter2');
  });
});

describe('an http sink through a proxy that refuses it', () => {
  it('fails each delivery as README says (HTTP 407, or ERR_PROXY_TUNNEL for https), a dead letter after the sink\'s max_attempts, the password nowhere', async () => {
    const p = await proxy({ auth: basic('corp', 'right') });
    const h = await startHarness(
      {
        sinks: [
          { name: 'plain', type: 'http', url: 'http://sink.test:1/in', secret: newSecret(), max_attempts: 3 },
          { name: 'tls', type: 'http', url: 'https://sink.test/in', secret: newSecret(), max_attempts: 3 },
        ],
      },
      { env: { HTTP_PROXY: `http://corp:hunter2@127.0.0.1:${p.port}`, HTTPS_PROXY: `http://corp:hunter2@127.0.0.1:${p.port}` } },
    );
    cleanups.push(() => h.close());
    await h.post(envelope());
    // The sinks back off 1 s (the harness): each round is one attempt of each.
    for (let round = 0; round < 6; round++) {
      await h.settle();
      h.clock.advance(5_000);
    }
    expect(h.deliveries().map((d) => [d.sink, d.state, d.attempts, d.last_error])).toEqual([
      ['plain', 'dead', 3, 'HTTP 407'],
      ['tls', 'dead', 3, 'request failed (ERR_PROXY_TUNNEL)'],
    ]);
    expect(p.seen.map((s) => s.kind).sort()).toEqual(['connect', 'connect', 'connect', 'forward', 'forward', 'forward']);
    expect(JSON.stringify(h.r.logs.lines)).not.toContain('hunter2');
  });
});

describe('`send` and the proxy variables', () => {
  it('goes direct to the receiver whatever HTTP_PROXY says, unless NODE_USE_ENV_PROXY=1 makes Node.js send it through the proxy (as README says)', async () => {
    const p = await proxy();
    const t = await target();
    const url = `http://127.0.0.1:${t.port}/webhooks`;
    const direct = await cli(['send', 'application.created', '--url', url, '--secret', newSecret()], { HTTP_PROXY: p.url, HTTPS_PROXY: p.url });
    expect(direct.code, direct.stderr).toBe(0);
    expect({ proxied: p.seen.length, received: t.requests.length }).toEqual({ proxied: 0, received: 1 });
    const proxied = await cli(['send', 'application.created', '--url', url, '--secret', newSecret()], { HTTP_PROXY: p.url, NODE_USE_ENV_PROXY: '1' });
    // Fetch's proxy agent tunnels even an http:// URL; this proxy reaches .test hosts only and refuses it.
    expect(proxied.code).toBe(1);
    expect({ proxied: p.seen, received: t.requests.length }).toEqual({ proxied: [{ kind: 'connect', target: `127.0.0.1:${t.port}`, auth: null }], received: 1 });
    // Said as the proxy's refusal, with the way to go direct (it said "no answer from … (0)").
    expect(proxied.stderr).toContain(
      `no answer from ${url} (the outbound proxy refused the tunnel: HTTP 502); NODE_USE_ENV_PROXY (or --use-env-proxy) makes Node.js send it through HTTP_PROXY: list 127.0.0.1 in NO_PROXY, or unset NODE_USE_ENV_PROXY\n`,
    );
  });
});

describe('the sandbox\'s deliveries and NODE_USE_ENV_PROXY=1', () => {
  it('go direct to a receiver on 127.0.0.1: the demo completes, and the proxy is asked nothing', async () => {
    // This proxy reaches .test hosts only: a delivery sent to it is refused, and the demo would wait out its --timeout.
    const p = await proxy({ auth: basic('corp', 'hunter2') });
    const proxyUrl = `http://corp:hunter2@127.0.0.1:${p.port}`;
    const r = await cli(['demo', '--timeout', '15'], { HTTP_PROXY: proxyUrl, HTTPS_PROXY: proxyUrl, NO_PROXY: '.corp.example', NODE_USE_ENV_PROXY: '1' }, 40_000);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/File sink: 19 messages in /);
    expect(p.seen).toEqual([]);
    expect(r.stdout + r.stderr).not.toContain('hunter2');
  }, 45_000);
});

const hasCurl = spawnSync('curl', ['--version']).status === 0;

describe("README's quick start in a shell that exports http_proxy", () => {
  it.skipIf(!hasCurl)('its curl of the sandbox goes direct, not to the proxy (which cannot reach 127.0.0.1), and runs the scenario', async () => {
    const p = await proxy();
    const sandbox = createSandbox();
    const { port } = await sandbox.start();
    cleanups.push(() => sandbox.stop());
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const quickStart = readme.slice(readme.indexOf('## Quick start'), readme.indexOf('## Installing'));
    const line = /^curl .*\/_sandbox\/scenarios\/lifecycle.*$/m.exec(quickStart)![0].replace('127.0.0.1:4010', `127.0.0.1:${port}`);
    // curl reads http_proxy in lower case only (HTTP_PROXY is not read, for CGI's sake), and knows no loopback of its own.
    const env = { PATH: process.env.PATH ?? '', http_proxy: p.url, https_proxy: p.url, HTTP_PROXY: p.url, HTTPS_PROXY: p.url };
    const ran = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = execFile('sh', ['-c', line], { env, timeout: 10_000 }, (err, _stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stderr }));
      child.stdin?.end();
    });
    expect(p.seen).toEqual([]);
    expect(ran).toEqual({ code: 0, stderr: '' });
    const listed = await sandbox.app.request('/api/v2/applications', { headers: { authorization: 'Bearer sk-acme0001.sandboxAcmeKeyOne0000000000' } });
    expect(((await listed.json()) as { count: number }).count).toBe(1);
  });
});

describe('a proxy password with a % that starts no escape', () => {
  it('is a configuration error naming the variable, for `serve` before it opens the database and for `webhooks`; escaped as %25 it reaches the proxy decoded', async () => {
    const { env } = serveEnv();
    const said = 'the user or password has a % that is not a %XX escape (write % as %25; the value is not shown)';
    const served = await cli(['serve'], { ...env, HTTPS_PROXY: 'http://corp:hunter2-50%off@127.0.0.1:9' });
    expect(served.code).toBe(1);
    expect(served.stderr).toContain(`HTTPS_PROXY: ${said}`);
    expect(served.stdout + served.stderr).not.toContain('hunter2');
    expect(existsSync(env.DATABASE_PATH)).toBe(false);

    const listed = await cli(['webhooks', 'list'], { HIRING_API_URL: 'http://hiring.test:1', HIRING_API_KEY: 'sk-acme.key', http_proxy: 'http://corp:hunter2-50%off@127.0.0.1:9' });
    expect({ code: listed.code, stderr: listed.stderr.trim() }).toEqual({ code: 1, stderr: `config error: http_proxy: ${said}` });

    const p = await proxy({ auth: basic('corp@example', 'hunter2-50%off') });
    const escaped = await cli(['webhooks', 'list'], { HIRING_API_URL: 'http://hiring.test:1', HIRING_API_KEY: 'sk-acme.key', HTTP_PROXY: `http://corp%40example:hunter2-50%25off@127.0.0.1:${p.port}` });
    // Past the proxy's check: it found no server at hiring.test:1 (502).
    expect(p.seen).toEqual([{ kind: 'forward', target: 'http://hiring.test:1/api/v2/webhooks', auth: basic('corp@example', 'hunter2-50%off') }]);
    expect(escaped.stdout + escaped.stderr).not.toContain('hunter2');
  });
});

describe('the CLI\'s `webhooks` commands through the proxy', () => {
  it('lists through HTTP_PROXY, says a refused tunnel with the proxy\'s answer (never its password), and refuses a SOCKS proxy as a configuration error', async () => {
    const p = await proxy({ auth: basic('corp', 'pw') });
    const t = createHttpServer((req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ count: 1, next: null, previous: null, results: [{ id: 'wh_1', url: 'https://receiver.example.com/webhooks', enabled: true, event_types: [], auth: req.headers.authorization }] }));
    });
    await new Promise<void>((resolve) => t.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => {
      t.closeAllConnections();
      return new Promise((resolve) => t.close(resolve));
    });
    const port = (t.address() as AddressInfo).port;
    const key = 'sk-acme.cliThroughProxy';

    const listed = await cli(['webhooks', 'list', '--json'], { HIRING_API_URL: `http://hiring.test:${port}`, HIRING_API_KEY: key, HTTP_PROXY: `http://corp:pw@127.0.0.1:${p.port}` });
    expect(listed.code, listed.stderr).toBe(0);
    expect((JSON.parse(listed.stdout) as { id: string; auth: string }[]).map((h) => [h.id, h.auth])).toEqual([['wh_1', `Bearer ${key}`]]);
    expect(p.seen).toEqual([{ kind: 'forward', target: `http://hiring.test:${port}/api/v2/webhooks`, auth: basic('corp', 'pw') }]);

    const refused = await cli(['webhooks', 'list'], { HIRING_API_URL: 'https://hiring.test', HIRING_API_KEY: key, HTTPS_PROXY: `http://corp:hunter2@127.0.0.1:${p.port}` });
    expect({ code: refused.code, stdout: refused.stdout }).toEqual({ code: 1, stdout: '' });
    expect(refused.stderr).toMatch(/^error: no answer from the hiring service at https:\/\/hiring\.test \(ERR_PROXY_TUNNEL: Failed to establish tunnel to hiring\.test:443 via http:\/\/127\.0\.0\.1:\d+\/: HTTP\/1\.1 407 Proxy Authentication Required\)$/m);
    expect(refused.stderr).not.toContain('hunter2');

    // An http:// API URL: the proxy answers the request itself, 407; said as the proxy's, not the service's.
    const refusedHttp = await cli(['webhooks', 'list'], { HIRING_API_URL: `http://hiring.test:${port}`, HIRING_API_KEY: key, HTTP_PROXY: `http://corp:hunter2@127.0.0.1:${p.port}` });
    expect({ code: refusedHttp.code, stdout: refusedHttp.stdout }).toEqual({ code: 1, stdout: '' });
    expect(refusedHttp.stderr).toContain('error: the outbound proxy refused its credentials (407 Proxy Authentication Required): the request did not reach the service');
    expect(refusedHttp.stderr).not.toContain('hunter2');

    const socks = await cli(['webhooks', 'list'], { HIRING_API_URL: 'https://hiring.test', HIRING_API_KEY: key, https_proxy: 'socks5://corp:hunter2@127.0.0.1:1080' });
    expect(socks.code).toBe(1);
    expect(socks.stderr).toContain('https_proxy: only http:// and https:// proxies are supported, got socks5://');
    expect(socks.stderr).not.toContain('hunter2');
    expect(p.seen).toHaveLength(3);
  });
});
