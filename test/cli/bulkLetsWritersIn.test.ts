import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';
import { cli, expectHeldBack, withMigratedDatabase, workersSayTheyWait, type CliResult, type Lapse } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-bulk-yield-');
afterAll(cleanup);

/** Rows per transaction of each of these commands (PRUNE_BATCH, RETRY_BATCH, SEND_NOW_BATCH), and how long one holds its next back at most (cli/batchPause.ts LET_WAITERS_IN_MS). */
const BATCH = 500;
const LET_IN_MS = 30;
/** Eight transactions: seven gaps, more than one stall of this process can take out of the judging (WorkersSaying.lapses). */
const ROWS = 8 * BATCH;
const old = '2020-01-01T00:00:00.000Z';
const later = '2099-01-01T00:00:00.000Z';

/**
 * Runs the CLI with `args` while a running receiver's workers say, in the database's
 * `-ingest-wait` file, that a write of theirs keeps finding the lock held (as BusyRetrySqliteDialect
 * does at each try). Triggers on jobs note when each of the command's statements ran (SQLite's
 * 'now' is fixed for one statement): the times its transactions began, from its own clock, where
 * a watch from this process saw them late on a busy machine and reported a gap short. With them,
 * when this process's saying lapsed (WorkersSaying.lapses).
 */
async function watchedRun(w: BetterSqlite3.Database, path: string, args: string[], env: Record<string, string> = {}): Promise<{ r: CliResult; commits: number[]; lapses: Lapse[] }> {
  w.exec(`CREATE TABLE IF NOT EXISTS test_statement_times (at REAL NOT NULL);
    DELETE FROM test_statement_times;
    CREATE TRIGGER IF NOT EXISTS test_jobs_updated AFTER UPDATE ON jobs BEGIN INSERT INTO test_statement_times VALUES (unixepoch('now', 'subsec')); END;
    CREATE TRIGGER IF NOT EXISTS test_jobs_deleted AFTER DELETE ON jobs BEGIN INSERT INTO test_statement_times VALUES (unixepoch('now', 'subsec')); END;`);
  const saying = workersSayTheyWait(path);
  let r: CliResult;
  try {
    r = await cli(args, { DATABASE_PATH: path, ...env });
  } finally {
    saying.stop();
  }
  const commits = (w.prepare('SELECT DISTINCT at FROM test_statement_times ORDER BY at').pluck().all() as number[]).map((s) => s * 1000);
  return { r, commits, lapses: saying.lapses() };
}

function seed(w: BetterSqlite3.Database, state: 'done' | 'dead' | 'pending', kind: string) {
  const insert = jobSeeder(w);
  w.transaction(() => {
    for (let i = 0; i < ROWS; i++) {
      insert({ kind, event_id: `evt-${i}`, state, run_at: state === 'pending' ? later : old, attempts: 1, finished_at: state === 'pending' ? null : old, last_error: state === 'dead' ? 'HTTP 503' : null });
    }
  })();
}

describe('bulk commands beside a running receiver whose writers wait for the lock', { timeout: 60_000 }, () => {
  it('prune holds each next transaction back while they say they wait (bounded), and deletes everything', async () => {
    await withMigratedDatabase(join(dir, 'prune.db'), async (path, w) => {
      seed(w, 'done', 'sink:crm');
      const { r, commits, lapses } = await watchedRun(w, path, ['prune', '--older-than', '1d', '--json']);
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ jobs: ROWS });
      expectHeldBack(commits, lapses, LET_IN_MS - 1);
    });
  });

  it('dead-letters retry and discard hold each next transaction back too', async () => {
    await withMigratedDatabase(join(dir, 'dead.db'), async (path, w) => {
      seed(w, 'dead', 'sink:crm');
      const retried = await watchedRun(w, path, ['dead-letters', 'retry', '--all', '--json']);
      expect(retried.r.code, retried.r.stderr).toBe(0);
      expect(JSON.parse(retried.r.stdout)).toMatchObject({ retried: ROWS });
      expectHeldBack(retried.commits, retried.lapses, LET_IN_MS - 1);

      w.exec("UPDATE jobs SET state = 'dead'");
      const discarded = await watchedRun(w, path, ['dead-letters', 'discard', '--all', '--json']);
      expect(discarded.r.code, discarded.r.stderr).toBe(0);
      expect(JSON.parse(discarded.r.stdout)).toMatchObject({ discarded: ROWS });
      expectHeldBack(discarded.commits, discarded.lapses, LET_IN_MS - 1);
    });
  });

  it('sinks send-now holds each next transaction back too', async () => {
    await withMigratedDatabase(join(dir, 'send-now.db'), async (path, w) => {
      seed(w, 'pending', 'sink:crm');
      const config = join(dir, 'send-now.json');
      writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'file', path: join(dir, 'crm.ndjson') }] }));
      const { r, commits, lapses } = await watchedRun(w, path, ['sinks', 'send-now', 'crm', '--json'], { CONFIG_FILE: config });
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ made_due: ROWS });
      expectHeldBack(commits, lapses, LET_IN_MS - 1);
    });
  });
});
