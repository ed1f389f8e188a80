import { spawn, type ChildProcess } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/childServer.js';
import { ACME_KEY, startReceiver } from './helpers.js';

/** Starts src/sandbox/main.ts as a child on a free port; resolves with its base URL once the banner is out. */
async function startMain(env: Record<string, string>): Promise<{ child: ChildProcess; url: string; out: () => string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/sandbox/main.ts'], {
    env: { ...process.env, SANDBOX_PORT: '0', SANDBOX_HOST: '127.0.0.1', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stderr!.on('data', (d: Buffer) => (out += d.toString()));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner: ${out}`)), 20_000);
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
      if (m !== null && out.includes('Globex')) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
  });
  return { child, url, out: () => out };
}

const stop = (child: ChildProcess) =>
  new Promise<number | null>((resolve) => {
    child.once('exit', (c) => resolve(c));
    child.kill('SIGTERM');
  });

/** Runs main.ts with `env` and expects it to refuse to start; resolves with its stderr. */
async function refusedStart(env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/sandbox/main.ts'], { env: { ...process.env, SANDBOX_PORT: '0', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d: Buffer) => (err += d.toString()));
  // One that starts anyway is stopped at once, so the test fails rather than waits.
  child.stdout.on('data', (d: Buffer) => d.toString().includes('listening on') && child.kill('SIGKILL'));
  const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
  expect(code).toBe(1);
  return err;
}

describe('npm run sandbox entry (src/sandbox/main.ts)', () => {
  it('prints base URL, organizations and keys, serves the API, and exits 0 on SIGTERM', async () => {
    const { child, url, out: output } = await startMain({});
    const out = output();
    expect(out).toContain('Acme Staffing');
    expect(out).toMatch(/API key: sk-acme0001\./);
    // The value to give the receiver, as it takes it (the base, not the API's paths).
    expect(out).toContain(`  Receiver: HIRING_API_URL=${url} with one of the API keys below as HIRING_API_KEY\n`);
    const res = await fetch(`${url}/api/v2/jobs`, { headers: { authorization: 'Bearer sk-acme0001.sandboxAcmeKeyOne0000000000' } });
    expect(res.status).toBe(200);
    expect(await stop(child)).toBe(0);
  });

  it('`npm run sandbox` stops, freeing its port, when npm is killed by its pid', async () => {
    const port = await freePort();
    // detached: npm leads its own process group, so the finally can end whatever is left of it.
    const npm = spawn('npm', ['run', '--silent', 'sandbox'], { env: { ...process.env, SANDBOX_PORT: String(port), SANDBOX_HOST: '127.0.0.1' }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let out = '';
    npm.stdout.on('data', (d: Buffer) => (out += d.toString()));
    npm.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const listening = async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/api/v2/jobs`)).status === 401;
      } catch {
        return false;
      }
    };
    try {
      const up = Date.now() + 20_000;
      while (!(await listening())) {
        if (Date.now() > up) throw new Error(`the sandbox did not start: ${out}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      // `kill <npm's pid>`: npm passes the signal to its shell, which ends without passing it on;
      // the sandbox learns of it from its parent's end.
      process.kill(npm.pid!, 'SIGTERM');
      const down = Date.now() + 10_000;
      while ((await listening()) && Date.now() < down) await new Promise((r) => setTimeout(r, 100));
      expect(await listening()).toBe(false);
      await new Promise((r) => setTimeout(r, 200));
      expect(out).toContain('npm, which started it, exited, stopping sandbox');
    } finally {
      try {
        process.kill(-npm.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });

  it('rejects a bad SANDBOX_PORT with a message naming it', async () => {
    expect(await refusedStart({ SANDBOX_PORT: 'abc' })).toContain('SANDBOX_PORT');
  });

  it('a SANDBOX_PORT in use is named, with the likely cause, not only as Node\'s EADDRINUSE', async () => {
    const { child, url } = await startMain({});
    try {
      const port = new URL(url).port;
      expect(await refusedStart({ SANDBOX_PORT: port, SANDBOX_HOST: '127.0.0.1' })).toBe(
        `error: SANDBOX_PORT: 127.0.0.1:${port} is already in use (another sandbox still running?); stop it or choose another port: SANDBOX_PORT, or --port with hiring-receiver sandbox (0 picks a free one)\n`,
      );
    } finally {
      await stop(child);
    }
  });

  it('a SANDBOX_HOST that is no address of this machine is named, not only as Node\'s EADDRNOTAVAIL', async () => {
    // 192.0.2.1: TEST-NET-1 (RFC 5737), never an address of a host.
    expect(await refusedStart({ SANDBOX_HOST: '192.0.2.1' })).toBe(
      'error: SANDBOX_HOST: cannot listen on "192.0.2.1" (EADDRNOTAVAIL): not an address of this machine; leave it unset for 127.0.0.1\n',
    );
  });

  it('rejects a bad SANDBOX_TIME_FACTOR or SANDBOX_MANUAL_CLOCK with a message naming it', async () => {
    for (const bad of ['0', 'fast']) {
      expect(await refusedStart({ SANDBOX_TIME_FACTOR: bad })).toMatch(new RegExp(`^config error: SANDBOX_TIME_FACTOR: must be a positive number .*got "${bad}"`));
    }
    expect(await refusedStart({ SANDBOX_MANUAL_CLOCK: 'yes' })).toMatch(/^config error: SANDBOX_MANUAL_CLOCK: must be 1/);
  });

  it('SANDBOX_MANUAL_CLOCK=1 and SANDBOX_TIME_FACTOR: standalone, the retry schedule plays by POST /_sandbox/clock/advance, scaled', async () => {
    const receiver = await startReceiver((_req, res) => res.writeHead(500).end());
    const { child, url, out } = await startMain({ SANDBOX_MANUAL_CLOCK: '1', SANDBOX_TIME_FACTOR: '60' });
    try {
      expect(out()).toContain('Clock:   manual');
      const post = async (path: string, body: unknown, key?: string) =>
        (await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', ...(key === undefined ? {} : { authorization: `Bearer ${key}` }) }, body: JSON.stringify(body) })).json() as Promise<any>;
      await post('/api/v2/webhooks', { url: receiver.url }, ACME_KEY);
      await post('/_sandbox/events', { event_type: 'application.created', payload: {} });
      const advance = (ms: number) => post('/_sandbox/clock/advance', { ms });
      const started = Date.parse((await advance(0)).now);
      expect(receiver.requests).toHaveLength(1);
      // The first retry is 2 minutes away (spec 6.3), divided by 60: 2 s on the sandbox clock.
      await advance(1999);
      expect(receiver.requests).toHaveLength(1);
      expect(Date.parse((await advance(1)).now) - started).toBe(2000);
      expect(receiver.requests).toHaveLength(2);
    } finally {
      await stop(child);
      await receiver.close();
    }
  });
});
