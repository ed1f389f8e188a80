import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type BetterSqlite3 from 'better-sqlite3';
import { afterAll, describe, expect, it } from 'vitest';
import { runTs } from '../helpers/childServer.js';
import { tempDir } from '../helpers/receiver.js';
import { until, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-replay-wait-');
afterAll(cleanup);

const old = '2020-01-01T00:00:00.000Z';

/** Two settled events, evt-1 and evt-2, and a config with the file sink `archive`; returns the config's path. */
function settledEvents(w: BetterSqlite3.Database, name: string): string {
  const config = join(dir, `${name}.json`);
  writeFileSync(config, JSON.stringify({ sinks: [{ name: 'archive', type: 'file', path: join(dir, `${name}.ndjson`) }] }));
  for (const id of ['evt-1', 'evt-2']) {
    w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')`).run(id, old, `msg-${id}`);
    w.prepare(`INSERT INTO event_processing (event_id, state, updated_at) VALUES (?, 'settled', ?)`).run(id, old);
  }
  return config;
}

/** `replay --all --sink archive --wait --json` as a child, a progress line per count; `counts()` says how many so far. Killed after 40 s. */
function replayWait(path: string, config: string) {
  const child = runTs('src/cli/main.ts', ['replay', '--all', '--sink', 'archive', '--wait', '--timeout', '30', '--json', '--progress'], {
    DATABASE_PATH: path,
    CONFIG_FILE: config,
    CLI_PROGRESS_INTERVAL_MS: '0',
  });
  const timer = setTimeout(() => child.proc.kill('SIGKILL'), 40_000);
  const counts = () => (child.stderr.join('').match(/replay --wait: /g) ?? []).length;
  return { child, counts, stop: () => clearTimeout(timer) };
}

describe('replay --sink --wait', { timeout: 60_000 }, () => {
  it('does not count a pair finished while its replayed job is still to run (a send in flight of the same revision recorded it delivered)', async () => {
    await withMigratedDatabase(join(dir, 'in-flight.db'), async (path, w) => {
      const config = settledEvents(w, 'in-flight');
      // evt-1's earlier cycle is being sent as the replay comes: its job is running.
      w.prepare(`INSERT INTO deliveries (event_id, sink, message_id, state, attempts, queued_at, created_at, updated_at) VALUES ('evt-1', 'archive', 'm', 'retrying', 3, ?, ?, ?)`).run(old, old, old);
      w.prepare(
        `INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at, lease_token)
         VALUES ('sink:archive', '{"event_id":"evt-1","sink":"archive"}', 'evt-1', 'sink:archive', 'running', ?, 3, 25, ?, ?, 'in-flight')`,
      ).run(old, old, old);
      const { child, counts, stop } = replayWait(path, config);
      try {
        await until(() => counts() >= 1, 'the first count of --wait', 30_000);
        // The send in flight completes: the pair's message id is the replay's (the same revision),
        // so the receiver records the row delivered; the replay's own job has not run yet.
        expect(w.prepare("SELECT count(*) FROM jobs WHERE event_id = 'evt-1' AND state = 'pending'").pluck().get()).toBe(1);
        w.prepare("UPDATE deliveries SET state = 'delivered', delivered_at = ? WHERE event_id = 'evt-1'").run(new Date().toISOString());
        w.prepare("UPDATE jobs SET state = 'done', finished_at = ? WHERE lease_token = 'in-flight'").run(new Date().toISOString());
        const seen = counts();
        await until(() => counts() >= seen + 2, 'two more counts', 30_000);
        // Then the replay's job for evt-1 fails for good (a 4xx), and evt-2's is delivered.
        w.transaction(() => {
          w.prepare("UPDATE deliveries SET state = 'dead', last_status_code = 400, last_error = '400 Bad Request' WHERE event_id = 'evt-1'").run();
          w.prepare("UPDATE jobs SET state = 'dead' WHERE event_id = 'evt-1' AND state = 'pending'").run();
          w.prepare("UPDATE deliveries SET state = 'delivered', delivered_at = ? WHERE event_id = 'evt-2'").run(new Date().toISOString());
          w.prepare("UPDATE jobs SET state = 'done', finished_at = ? WHERE event_id = 'evt-2' AND state = 'pending'").run(new Date().toISOString());
        })();
        const { code } = await child.exited;
        expect(JSON.parse(child.stdout.join(''))).toMatchObject({ sinks: { archive: { queued: 2 } }, finished: { done: 1, failed: 1 } });
        expect(code, child.stderr.join('')).toBe(1);
      } finally {
        stop();
      }
    });
  });
  it('counts a pair that went dead and was retried before the wait ended by how it ends: delivered, not failed', async () => {
    await withMigratedDatabase(join(dir, 'revived.db'), async (path, w) => {
      const config = settledEvents(w, 'revived');
      const { child, counts, stop } = replayWait(path, config);
      try {
        await until(() => counts() >= 1, 'the first count of --wait', 30_000);
        // The receiver's send of evt-1 fails for good: a dead letter, seen by the next counts.
        w.transaction(() => {
          w.prepare("UPDATE deliveries SET state = 'dead', last_status_code = 503, last_error = 'HTTP 503' WHERE event_id = 'evt-1'").run();
          w.prepare("UPDATE jobs SET state = 'dead' WHERE event_id = 'evt-1'").run();
        })();
        let seen = counts();
        await until(() => counts() >= seen + 2, 'two more counts', 30_000);
        expect(child.stderr.join('')).toMatch(/replay --wait: 1 of 2 finished/);
        // An operator's `dead-letters retry` revives it (its row pending again), and then both are delivered.
        w.transaction(() => {
          w.prepare("UPDATE deliveries SET state = 'pending', attempts = 0, last_error = NULL WHERE event_id = 'evt-1'").run();
          w.prepare("UPDATE jobs SET state = 'pending', attempts = 0 WHERE event_id = 'evt-1'").run();
        })();
        seen = counts();
        await until(() => counts() >= seen + 2, 'two more counts', 30_000);
        w.transaction(() => {
          w.prepare("UPDATE deliveries SET state = 'delivered', delivered_at = ?").run(new Date().toISOString());
          w.prepare("UPDATE jobs SET state = 'done', finished_at = ?").run(new Date().toISOString());
        })();
        const { code } = await child.exited;
        expect(JSON.parse(child.stdout.join(''))).toMatchObject({ sinks: { archive: { queued: 2 } }, finished: { done: 2, failed: 0 } });
        expect(code, child.stderr.join('')).toBe(0);
      } finally {
        stop();
      }
    });
  });
});
