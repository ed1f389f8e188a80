import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { openIngestWaitSignal } from '../../src/db/ingestWaitSignal.js';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';
import { cli, withMigratedDatabase, type CliResult } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-bulk-yield-');
afterAll(cleanup);

/** Rows per transaction of each of these commands (PRUNE_BATCH, RETRY_BATCH, SEND_NOW_BATCH), and how long one holds its next back at most (cli/batchPause.ts LET_WAITERS_IN_MS). */
const BATCH = 500;
const LET_IN_MS = 30;
const old = '2020-01-01T00:00:00.000Z';
const later = '2099-01-01T00:00:00.000Z';

/**
 * Runs the CLI with `args` while a running receiver's workers say, in the database's
 * `-ingest-wait` file, that a write of theirs keeps finding the lock held (as BusyRetrySqliteDialect
 * does at each try), and watches `count` (a query over what each of the command's transactions
 * changes) on a 1 ms timer: when it changed, that is when each transaction committed.
 */
async function watchedRun(w: BetterSqlite3.Database, path: string, args: string[], count: string, env: Record<string, string> = {}): Promise<{ r: CliResult; commits: number[] }> {
  const read = w.prepare(count).pluck();
  let last = read.get() as number;
  const commits: number[] = [];
  const watching = setInterval(() => {
    const n = read.get() as number;
    if (n !== last) commits.push(performance.now());
    last = n;
  }, 1);
  const workers = openIngestWaitSignal(path);
  workers.workersWaiting(Date.now());
  const saying = setInterval(() => workers.workersWaiting(Date.now()), 5);
  try {
    const r = await cli(args, { DATABASE_PATH: path, ...env });
    return { r, commits };
  } finally {
    clearInterval(saying);
    clearInterval(watching);
    workers.workersThrough();
    workers.close();
  }
}

/** The command's transactions came LET_IN_MS apart at least (the watch's 1 ms timer may see one a little late: one ms off). */
function expectHeldBack(commits: number[]) {
  expect(commits.length, 'transactions seen committing').toBeGreaterThanOrEqual(2);
  const apart = commits.slice(1).map((t, i) => Math.round(t - commits[i]!));
  expect(apart.every((ms) => ms >= LET_IN_MS - 1), `transactions apart by ${apart.join(', ')} ms`).toBe(true);
}

function seed(w: BetterSqlite3.Database, state: 'done' | 'dead' | 'pending', kind: string) {
  const insert = jobSeeder(w);
  w.transaction(() => {
    for (let i = 0; i < 4 * BATCH; i++) {
      insert({ kind, event_id: `evt-${i}`, state, run_at: state === 'pending' ? later : old, attempts: 1, finished_at: state === 'pending' ? null : old, last_error: state === 'dead' ? 'HTTP 503' : null });
    }
  })();
}

describe('bulk commands beside a running receiver whose writers wait for the lock', { timeout: 60_000 }, () => {
  it('prune holds each next transaction back while they say they wait (bounded), and deletes everything', async () => {
    await withMigratedDatabase(join(dir, 'prune.db'), async (path, w) => {
      seed(w, 'done', 'sink:crm');
      const { r, commits } = await watchedRun(w, path, ['prune', '--older-than', '1d', '--json'], 'SELECT count(*) FROM jobs');
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ jobs: 4 * BATCH });
      expectHeldBack(commits);
    });
  });

  it('dead-letters retry and discard hold each next transaction back too', async () => {
    await withMigratedDatabase(join(dir, 'dead.db'), async (path, w) => {
      seed(w, 'dead', 'sink:crm');
      const retried = await watchedRun(w, path, ['dead-letters', 'retry', '--all', '--json'], "SELECT count(*) FROM jobs WHERE state = 'dead'");
      expect(retried.r.code, retried.r.stderr).toBe(0);
      expect(JSON.parse(retried.r.stdout)).toMatchObject({ retried: 4 * BATCH });
      expectHeldBack(retried.commits);

      w.exec("UPDATE jobs SET state = 'dead'");
      const discarded = await watchedRun(w, path, ['dead-letters', 'discard', '--all', '--json'], 'SELECT count(*) FROM jobs');
      expect(discarded.r.code, discarded.r.stderr).toBe(0);
      expect(JSON.parse(discarded.r.stdout)).toMatchObject({ discarded: 4 * BATCH });
      expectHeldBack(discarded.commits);
    });
  });

  it('sinks send-now holds each next transaction back too', async () => {
    await withMigratedDatabase(join(dir, 'send-now.db'), async (path, w) => {
      seed(w, 'pending', 'sink:crm');
      const config = join(dir, 'send-now.json');
      writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'file', path: join(dir, 'crm.ndjson') }] }));
      const { r, commits } = await watchedRun(w, path, ['sinks', 'send-now', 'crm', '--json'], `SELECT count(*) FROM jobs WHERE run_at = '${later}'`, { CONFIG_FILE: config });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ made_due: 4 * BATCH });
      expectHeldBack(commits);
    });
  });
});
