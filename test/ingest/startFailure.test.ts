import { connect } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.js';
import { loadConfig } from '../../src/config/loadConfig.js';
import { createLogger } from '../../src/observability/logger.js';
import { freePort, runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';

const { dir, cleanup } = tempDir('start-failure-');
afterAll(cleanup);

const refused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = connect(port, '127.0.0.1');
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });

describe('start() when the workers fail to start', () => {
  it('rejects, and leaves no server, no connection and no worker running, even with a client stalled mid-request', async () => {
    const port = await freePort();
    const config = loadConfig({
      WEBHOOK_SECRET: newSecret(),
      HIRING_API_URL: 'http://127.0.0.1:9',
      HIRING_API_KEY: 'sk-test.unused',
      DATABASE_PATH: join(dir, 'r.db'),
      PORT: String(port),
      HOST: '127.0.0.1',
      REQUEST_TIMEOUT_MS: '30000',
    });
    const app = createApp({ config, logger: createLogger('silent') });
    let stalled = undefined as unknown as ReturnType<typeof connect>;
    // The processing workers are running by now; the sinks' start fails, while a client is part-way through a request.
    app.fanOut.start = async () => {
      stalled = connect(port, '127.0.0.1');
      stalled.on('error', () => {});
      stalled.resume(); // read, so the server's close is seen
      await new Promise((resolve) => stalled.once('connect', resolve));
      // Headers cut short: the server waits for the rest (and would until headersTimeout).
      stalled.write('POST /webhooks HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n');
      await new Promise((resolve) => setTimeout(resolve, 50));
      throw new Error('sinks could not start');
    };
    const outcome = await Promise.race([
      app.start().then(() => 'started', (err: Error) => err.message),
      new Promise((resolve) => setTimeout(() => resolve('start() still pending after 5 s'), 5000)),
    ]);
    expect(outcome).toBe('sinks could not start');
    expect(await refused(port)).toBe(true);
    // The stalled client's connection was closed by the server, not left open.
    const closed = await Promise.race([
      new Promise((resolve) => (stalled.destroyed ? resolve('closed') : stalled.once('close', () => resolve('closed')))),
      new Promise((resolve) => setTimeout(() => resolve('still open after 2 s'), 2000)),
    ]);
    expect(closed).toBe('closed');
    // The workers were stopped before start() rejected: a job due now stays waiting, untouched.
    const now = new Date().toISOString();
    app.database.sqlite
      .prepare(
        `INSERT INTO jobs (kind, payload, source, state, run_at, attempts, max_attempts, created_at, updated_at)
         VALUES ('fetch_result', '{"resource":"interview","application_id":"x"}', 'default', 'pending', ?, 0, 25, ?, ?)`,
      )
      .run(now, now, now);
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(app.database.sqlite.prepare('SELECT state, attempts FROM jobs').get()).toEqual({ state: 'pending', attempts: 0 });
    await app.stop();
  });
});

describe('start() when it cannot listen', () => {
  it('names HOST for an address that is not this machine\'s', async () => {
    const config = loadConfig({
      WEBHOOK_SECRET: newSecret(),
      HIRING_API_URL: 'http://127.0.0.1:9',
      HIRING_API_KEY: 'sk-test.unused',
      DATABASE_PATH: join(dir, 'host.db'),
      PORT: String(await freePort()),
      HOST: '10.255.255.1',
      WORKER_CONCURRENCY: '0',
    });
    const app = createApp({ config, logger: createLogger('silent') });
    await expect(app.start()).rejects.toThrow('HOST: cannot listen on "10.255.255.1" (EADDRNOTAVAIL): not an address of this machine');
    await app.stop();
  });
});

describe('start() that fails, with nothing called after it', () => {
  it('leaves nothing that keeps the process alive: it ends by itself', async () => {
    const child = runTs('test/helpers/startFailsThenEnds.ts', [], {
      WEBHOOK_SECRET: newSecret(),
      HIRING_API_URL: 'http://127.0.0.1:9',
      HIRING_API_KEY: 'sk-test.unused',
      DATABASE_PATH: join(dir, 'ends.db'),
      PORT: '0',
      HOST: '127.0.0.1',
    });
    // The file watch's one-second timer, left running, kept it alive for good.
    const kill = setTimeout(() => child.proc.kill('SIGKILL'), 15_000);
    const exit = await child.exited.finally(() => clearTimeout(kill));
    expect(child.stdout.join('')).toMatch(/^start failed: METRICS_PORT: .* is already in use/);
    expect(exit).toEqual({ code: 0, signal: null });
  });
});
