import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';
import { cli, whileCommitting, withMigratedDatabase } from './helpers.js';

// Read-only commands run beside a receiver that commits all along: each of their reports is read
// at one moment (one read transaction), or its figures contradict one another.

const { dir, cleanup } = tempDir('reads-at-one-moment-');
afterAll(cleanup);

/** An event stored per commit, none processed (no receiver's workers): every stored event waits. */
const storedEvent = {
  statement: "INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')",
  args: "'evt-' + n, new Date().toISOString(), 'msg-' + n",
};

/** Every sink's one delivery failing, then delivered, then failing again, ... a commit each time. */
const flippedDeliveries = { statement: "UPDATE deliveries SET state = CASE state WHEN 'retrying' THEN 'delivered' ELSE 'retrying' END", args: '' };

/** A delivery to the sink crm waiting for a later attempt (a Retry-After), one more per commit. */
const WAITING_JOB =
  "INSERT INTO jobs (kind, payload, event_id, source, state, run_at, attempts, max_attempts, created_at, updated_at) VALUES ('sink:crm', '{}', ?, 'sink:crm', 'pending', '2099-01-01T00:00:00.000Z', 1, 25, ?, ?)";
const waitingJob = { statement: WAITING_JOB, args: "'evt-w' + n, new Date().toISOString(), new Date().toISOString()" };

describe('read-only commands while another process commits', () => {
  it('status: the events waiting for processing are the events stored, not more', async () => {
    await withMigratedDatabase(join(dir, 'status.db'), async (path) => {
      await whileCommitting(path, storedEvent, async () => {
        // Bounded: three looks, each a CLI start-up.
        for (let i = 0; i < 3; i++) {
          const r = await cli(['status', '--json'], { DATABASE_PATH: path });
          expect(r.code, r.stderr).toBe(0);
          const s = JSON.parse(r.stdout) as { events: { total: number; latest_received_at: string | null }; processing: { events_waiting: number } };
          expect(s.events.total).toBeGreaterThan(0);
          expect(s.processing.events_waiting).toBe(s.events.total);
          expect(s.events.latest_received_at).not.toBeNull();
        }
      });
    });
  });

  it('sinks list: a sink counted failing names its latest failure, and one with none failing names none', async () => {
    await withMigratedDatabase(join(dir, 'sinks.db'), async (path, w) => {
      const names = Array.from({ length: 32 }, (_, i) => `crm${i}`);
      const config = join(dir, 'sinks.json');
      writeFileSync(config, JSON.stringify({ sinks: names.map((name) => ({ name, type: 'file', path: join(dir, `${name}.ndjson`) })) }));
      const at = '2026-11-20T10:00:00.000Z';
      const delivery = w.prepare(
        `INSERT INTO deliveries (event_id, sink, message_id, state, attempts, last_status_code, last_error, last_attempt_at, queued_at, created_at, updated_at)
         VALUES ('evt-1', ?, ?, 'retrying', 1, 503, 'HTTP 503', ?, ?, ?, ?)`,
      );
      for (const name of names) delivery.run(name, `msg-${name}`, at, at, at, at);
      await whileCommitting(path, flippedDeliveries, async () => {
        // Six looks: a look that finds them delivered reads no failure, so it cannot disagree.
        for (let i = 0; i < 6; i++) {
          const r = await cli(['sinks', 'list', '--json'], { DATABASE_PATH: path, CONFIG_FILE: config });
          expect(r.code, r.stderr).toBe(0);
          const rows = JSON.parse(r.stdout) as { name: string; failing: number; delivered: number; last_error: unknown }[];
          // One moment: every sink's row in the same state, and its last failure said exactly when it is failing.
          expect(new Set(rows.map((s) => s.failing)).size).toBe(1);
          expect(rows.filter((s) => (s.failing > 0) !== (s.last_error !== null)).map((s) => s.name)).toEqual([]);
        }
      });
    });
  });

  it('sinks send-now --dry-run: every delivery it would make due is among those it says are pending in all, and no other is', async () => {
    await withMigratedDatabase(join(dir, 'send-now.db'), async (path, w) => {
      const config = join(dir, 'send-now.json');
      writeFileSync(config, JSON.stringify({ sinks: [{ name: 'crm', type: 'file', path: join(dir, 'crm.ndjson') }] }));
      // A backlog, so each count takes a while (a consumer away for hours): another commit lands
      // between two counts read one after another.
      const at = '2026-11-20T10:00:00.000Z';
      const job = w.prepare(WAITING_JOB);
      w.transaction(() => {
        for (let i = 0; i < 100_000; i++) job.run(`evt-${i}`, at, at);
      })();
      await whileCommitting(path, waitingJob, async () => {
        for (let i = 0; i < 4; i++) {
          const r = await cli(['sinks', 'send-now', 'crm', '--dry-run', '--json'], { DATABASE_PATH: path, CONFIG_FILE: config });
          expect(r.code, r.stderr).toBe(0);
          const s = JSON.parse(r.stdout) as { made_due: number; pending: number };
          expect(s.made_due).toBeGreaterThanOrEqual(100_000);
          // Every pending delivery is waiting (none due, none in flight): the two counts are one.
          expect(s.pending).toBe(s.made_due);
        }
      });
    });
  });
});
