import { createServer } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listensOn, runTs, waitForHttp } from './childServer.js';
import { newSecret } from './signing.js';
import { freePort } from './testPort.js';

/** A receiver's settings but PORT, with its database in `dir`. */
const receiverEnv = (dir: string) => ({ WEBHOOK_SECRET: newSecret(), HIRING_API_URL: 'http://127.0.0.1:9', HIRING_API_KEY: 'sk-test.unused', DATABASE_PATH: join(dir, 'r.db'), HOST: '127.0.0.1' });

describe('listensOn', () => {
  it('says false for a process that is gone, so a child that exited during a wait is not taken as ready', async () => {
    const port = await freePort();
    const other = createServer(() => undefined);
    await new Promise<void>((r) => other.listen(port, '127.0.0.1', () => r()));
    const child = runTs('src/main.ts', ['--version'], {});
    await child.exited;
    try {
      // Reaped: /proc/<pid> is gone. Before, that read as "cannot tell" (undefined), and
      // waitForHttp took another process's answer on the port as the child's.
      expect(listensOn(child.proc.pid!, port)).toBe(false);
      expect(listensOn(process.pid, port)).toBe(true);
    } finally {
      other.close();
    }
  });
});

describe('waitForHttp with the child meant to answer', () => {
  it('is not satisfied by another server on the port: it fails with the child\'s own error once the child gives up', async () => {
    // Another test's receiver, already on the port the child is given: it answers /healthz.
    const port = await freePort();
    const other = createServer((_req, res) => res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"ok"}'));
    await new Promise<void>((r) => other.listen(port, '127.0.0.1', () => r()));
    const dir = mkdtempSync(join(tmpdir(), 'wait-for-http-'));
    const child = runTs('src/main.ts', [], { ...receiverEnv(dir), PORT: String(port) });
    try {
      expect(listensOn(process.pid, port)).toBe(true);
      await expect(waitForHttp(`http://127.0.0.1:${port}/healthz`, 20_000, child)).rejects.toThrow(
        `PORT: 127.0.0.1:${port} is already in use`,
      );
      expect(listensOn(child.proc.pid!, port)).not.toBe(true);
    } finally {
      child.proc.kill('SIGKILL');
      await child.exited;
      other.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('is satisfied once the child itself listens, and says at once when the child exits before', async () => {
    const port = await freePort();
    const dir = mkdtempSync(join(tmpdir(), 'wait-for-http-'));
    const env = receiverEnv(dir);
    const child = runTs('src/main.ts', [], { ...env, PORT: String(port) });
    const refused = runTs('src/main.ts', [], { ...env, PORT: 'eighty' });
    try {
      await waitForHttp(`http://127.0.0.1:${port}/healthz`, 20_000, child);
      expect(listensOn(child.proc.pid!, port)).toBe(true);
      // A config error: the wait ends with it, not after its 20 s with "did not come up".
      const started = Date.now();
      await expect(waitForHttp(`http://127.0.0.1:${await freePort()}/healthz`, 20_000, refused)).rejects.toThrow(/exited \(1\).*config error: PORT/s);
      expect(Date.now() - started).toBeLessThan(19_000);
    } finally {
      for (const c of [child, refused]) c.proc.kill('SIGKILL');
      await Promise.all([child.exited, refused.exited]);
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
