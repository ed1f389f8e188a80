import { afterAll, describe, expect, it } from 'vitest';
import { join } from 'node:path';
import { request } from 'node:http';
import { runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

/**
 * The log lines a receiver writes before it exits all reach its stdout, whole and in order, even
 * when the reader of that stdout (a container runtime, a log shipper) is slow: the process exits
 * only after the lines it wrote are out. Here the test stops reading the child's stdout while the
 * receiver logs a few hundred KB, stops it (SIGTERM), and reads again only later.
 */
const { dir, cleanup } = tempDir('exit-logs-');
afterAll(cleanup);

/** One POST /webhooks without the Standard Webhooks headers: a 400, and one warn line in the log. */
function unsigned(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/webhooks', headers: { 'content-type': 'application/json' }, agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', reject);
    req.end('{}');
  });
}

describe('log lines at exit', () => {
  it('a stop while stdout is not being read: every line is out, whole and in order, before the process ends', async () => {
    const child = runTs('src/main.ts', [], {
      DATABASE_PATH: join(dir, 'receiver.db'),
      WEBHOOK_SECRET: newSecret(),
      HIRING_API_URL: 'http://127.0.0.1:9',
      HIRING_API_KEY: 'sk-test.unused',
      PORT: '0',
      HOST: '127.0.0.1',
      WORKER_CONCURRENCY: '0',
    });
    const kill = setTimeout(() => child.proc.kill('SIGKILL'), 60_000);
    try {
      const deadline = Date.now() + 20_000;
      let port = 0;
      while (port === 0 && Date.now() < deadline && child.proc.exitCode === null) {
        const m = /"port":(\d+)[^\n]*"msg":"receiver listening"/.exec(child.stdout.join(''));
        if (m) port = Number(m[1]);
        else await new Promise((r) => setTimeout(r, 20));
      }
      expect(port, child.stderr.join('')).toBeGreaterThan(0);
      // From here the child's stdout fills: the parent's stream buffer, then the pipe's.
      child.proc.stdout!.pause();
      const sent = 1500;
      for (let i = 0; i < sent; i += 50) {
        const statuses = await Promise.all(Array.from({ length: Math.min(50, sent - i) }, () => unsigned(port)));
        expect(new Set(statuses)).toEqual(new Set([400]));
      }
      child.proc.kill('SIGTERM');
      // The receiver stops meanwhile, with its last lines still to be written.
      await new Promise((r) => setTimeout(r, 1_500));
      child.proc.stdout!.resume();
      expect(await child.exited).toEqual({ code: 0, signal: null });
    } finally {
      clearTimeout(kill);
    }
    const lines = child.stdout.join('').split('\n').filter((l) => l !== '');
    const msgs = lines.map((l) => (JSON.parse(l) as { msg: string }).msg);
    expect(msgs.filter((m) => m === 'webhook delivery')).toHaveLength(1500);
    expect(msgs.at(-1), msgs.slice(-5).join(' | ')).toBe('receiver stopped');
    expect(msgs.indexOf('shutting down')).toBeGreaterThan(msgs.lastIndexOf('webhook delivery'));
  }, 90_000);
});
