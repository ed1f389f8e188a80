import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import BetterSqlite3 from 'better-sqlite3';
import { createApp, type App, type AppDeps } from '../../src/app.js';
import { loadConfig } from '../../src/config/loadConfig.js';
import { createLogger } from '../../src/observability/logger.js';
import type { Clock } from '../../src/util/clock.js';

export function tempDir(prefix = 'receiver-test-'): { dir: string; cleanup: () => void } {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  return { dir, cleanup: () => rmSync(dir, { recursive: true, force: true }) };
}

/** Collects every log line, so tests can assert on outcomes and on what never appears. */
export class LogCapture extends Writable {
  readonly lines: Record<string, unknown>[] = [];
  readonly raw: string[] = [];
  override _write(chunk: Buffer, _enc: string, cb: () => void): void {
    for (const line of chunk.toString('utf8').split('\n')) {
      if (!line) continue;
      this.raw.push(line);
      this.lines.push(JSON.parse(line) as Record<string, unknown>);
    }
    cb();
  }
}

export interface TestReceiver {
  app: App;
  url: string;
  logs: LogCapture;
  dbPath: string;
  close: () => Promise<void>;
}

/** A receiver on a temp database file; `listen: true` puts it on a real port on 127.0.0.1. */
export async function startReceiver(
  env: Record<string, string>,
  opts: { clock?: Clock; listen?: boolean } & Omit<AppDeps, 'config' | 'clock' | 'logger'> = {},
): Promise<TestReceiver> {
  const { dir, cleanup } = tempDir();
  const dbPath = join(dir, 'receiver.db');
  const config = loadConfig({
    DATABASE_PATH: dbPath,
    PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'debug',
    // Nothing listens on port 9 (discard): processing tests pass the sandbox's URL instead.
    HIRING_API_URL: 'http://127.0.0.1:9',
    HIRING_API_KEY: 'sk-test.unused',
    ...env,
  });
  const logs = new LogCapture();
  const { listen: _listen, ...deps } = opts;
  const app = createApp({ ...deps, config, logger: createLogger('debug', logs) });
  let url = 'http://receiver.test';
  if (opts.listen !== false) url = (await app.start()).url;
  return {
    app,
    url,
    logs,
    dbPath,
    close: async () => {
      await app.stop();
      cleanup();
    },
  };
}

/**
 * A receiver on `clock` with no workers, and a second connection on its database file, as another
 * process (a CLI operation, a backup) would hold its write lock; `close` rolls back what that
 * connection still holds, then stops both.
 */
export async function startReceiverBesideOtherConnection(
  env: Record<string, string>,
  clock: Clock,
): Promise<{ r: TestReceiver; other: BetterSqlite3.Database; close: () => Promise<void> }> {
  const r = await startReceiver({ WORKER_CONCURRENCY: '0', ...env }, { clock });
  const other = new BetterSqlite3(r.dbPath);
  return {
    r,
    other,
    close: async () => {
      if (other.inTransaction) other.exec('ROLLBACK');
      other.close();
      await r.close();
    },
  };
}
