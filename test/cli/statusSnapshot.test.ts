import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';
import { cli, whileCommitting, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('status-snapshot-');
afterAll(cleanup);

/** An event stored per commit, none processed (no receiver's workers): every stored event waits. */
const storedEvent = {
  insert: "INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')",
  args: "'evt-' + n, new Date().toISOString(), 'msg-' + n",
};

describe('status while deliveries are being stored', () => {
  it('reads every figure at one moment: the events waiting for processing are the events stored, not more', async () => {
    await withMigratedDatabase(join(dir, 'busy.db'), async (path) => {
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
});
