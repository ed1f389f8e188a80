import BetterSqlite3 from 'better-sqlite3';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { startReceiver } from '../helpers/receiver.js';
import { newSecret } from '../helpers/signing.js';
import { waitFor } from '../helpers/waitFor.js';

afterEach(() => {
  vi.useRealTimers();
});

const GIVEN_UP = /given up now, and their events settled/;

describe("the workers' sweep every 5 minutes", () => {
  it('does not start while the one before it is still running: the next period finds it in flight and lets it be', async () => {
    // Only the sweeps' interval (and the file watch's) is driven here; the rest runs on real timers.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    const r = await startReceiver({ WEBHOOK_SECRET: newSecret(), WORKER_CONCURRENCY: '1' });
    const other = new BetterSqlite3(r.dbPath);
    try {
      // A read dead-lettered after the workers' start, whose follow-up (given_up, the settle) never
      // committed: the next sweep gives it up.
      const at = '2020-01-01T00:00:00.000Z';
      other.prepare("INSERT INTO event_processing (event_id, state, resource, updated_at) VALUES ('evt-s1', 'awaiting_result', 'interview', ?)").run(at);
      other
        .prepare(`INSERT INTO jobs (kind, payload, event_id, state, run_at, attempts, max_attempts, last_error, created_at, updated_at, finished_at)
          VALUES ('fetch_result', '{"event_id":"evt-s1","application_id":"app-s1","resource":"interview"}', 'evt-s1', 'dead', ?, 3, 3, 'HTTP 503', ?, ?, ?)`)
        .run(at, at, at, at);
      // The first sweep is due, and runs until its first write waits for the connection; the
      // next period comes while it is still in flight (as when a sweep takes longer than 5 minutes).
      vi.advanceTimersByTime(5 * 60_000);
      vi.advanceTimersByTime(5 * 60_000);
      await waitFor(() => other.prepare("SELECT state FROM event_processing WHERE event_id = 'evt-s1'").pluck().get() === 'settled', 'the stranded read given up');
      // Let a second sweep, had one started, finish its work too (bounded: 20 turns of 20 ms).
      for (let i = 0; i < 20; i++) await new Promise((res) => setTimeout(res, 20));
    } finally {
      other.close();
      await r.close();
    }
    const sweeps = r.logs.lines.filter((l) => GIVEN_UP.test(String(l.msg)));
    expect(sweeps.map((l) => l.reads)).toEqual([1]);
  }, 30_000);
});
