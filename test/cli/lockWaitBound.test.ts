import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { jobSeeder } from '../helpers/jobs.js';
import { tempDir } from '../helpers/receiver.js';
import { cli, deadDeliveries, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('cli-lock-wait-');
afterAll(cleanup);

const BUSY = 'error: the database stayed locked by another process for more than 5 s (a long write: a receiver under load, or another command such as `replay` or `prune`): try again\n';

// README, "Running the CLI": a command waits for the write lock another process holds up to 5 s.
// The bulk commands take it in BEGIN IMMEDIATE transactions (writeInBatches), whose busy BEGIN was
// tried 9 times: with the CLI's 5 s busy timeout each, they waited about 46 s, then said 5 s.
describe('a write lock another process holds past the busy timeout', { timeout: 60_000 }, () => {
  it('ends each bulk command after about 5 s, with the line that says so', async () => {
    await withMigratedDatabase(join(dir, 'locked.db'), async (path, w) => {
      const old = new Date(Date.now() - 10 * 86_400_000).toISOString();
      jobSeeder(w)({ kind: 'sink:crm', event_id: 'evt-done', state: 'done', run_at: old, finished_at: old });
      deadDeliveries(w, 2);
      // The other process's long write: held until every command has ended.
      w.exec('BEGIN IMMEDIATE');
      try {
        const env = { DATABASE_PATH: path };
        const commands = [
          ['prune', '--older-than', '1h'],
          ['dead-letters', 'retry', '--all'],
          ['dead-letters', 'discard', '--all'],
          ['sinks', 'send-now', 'crm'],
        ];
        const started = performance.now();
        const results = await Promise.all(
          commands.map(async (args) => {
            // Killed (signal SIGKILL) if still waiting after 30 s: the 46 s it took before.
            const r = await cli(args, env, 30_000);
            return { args: args.join(' '), code: r.code, signal: r.signal, stderr: r.stderr, tookMs: performance.now() - started };
          }),
        );
        for (const r of results) {
          expect({ args: r.args, code: r.code, signal: r.signal, stderr: r.stderr }).toEqual({ args: r.args, code: 1, signal: null, stderr: BUSY });
          // 5 s of waiting, plus the start-up of four processes on a busy machine.
          expect(r.tookMs, r.args).toBeLessThan(20_000);
        }
      } finally {
        w.exec('ROLLBACK');
      }
      // Nothing was changed meanwhile: the dead letters are still there, the finished job too.
      expect(w.prepare("SELECT state, COUNT(*) AS n FROM jobs GROUP BY state ORDER BY state").all()).toEqual([
        { state: 'dead', n: 2 },
        { state: 'done', n: 1 },
      ]);
    });
  });
});
