import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { freePort } from '../helpers/childServer.js';

describe('npm run sandbox entry (src/sandbox/main.ts)', () => {
  it('prints base URL, organizations and keys, serves the API, and exits 0 on SIGTERM', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/sandbox/main.ts'], {
      env: { ...process.env, SANDBOX_PORT: '0', SANDBOX_HOST: '127.0.0.1' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const url = await new Promise<string>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`no banner: ${out}`)), 20_000);
      child.stdout.on('data', (d: Buffer) => {
        out += d.toString();
        const m = /listening on (http:\/\/127\.0\.0\.1:\d+)/.exec(out);
        if (m !== null && out.includes('Globex')) {
          clearTimeout(timer);
          resolve(m[1]!);
        }
      });
    });
    expect(out).toContain('Acme Staffing');
    expect(out).toMatch(/API key: sk-acme0001\./);
    const res = await fetch(`${url}/api/v2/jobs`, { headers: { authorization: 'Bearer sk-acme0001.sandboxAcmeKeyOne0000000000' } });
    expect(res.status).toBe(200);
    const code = await new Promise<number | null>((resolve) => {
      child.once('exit', (c) => resolve(c));
      child.kill('SIGTERM');
    });
    expect(code).toBe(0);
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
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/sandbox/main.ts'], { env: { ...process.env, SANDBOX_PORT: 'abc' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let err = '';
    child.stderr.on('data', (d: Buffer) => (err += d.toString()));
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    expect(code).toBe(1);
    expect(err).toContain('SANDBOX_PORT');
  });
});
