import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { stagesOf } from '../../bench/lib/stages.js';
import { openDatabase } from '../../src/db/openDatabase.js';
import { tempDir } from '../helpers/receiver.js';

let cleanup: (() => void) | undefined;
afterEach(() => {
  cleanup?.();
  cleanup = undefined;
});

describe("the fan-out row's stages, from the receiver's stamps", () => {
  it('splits stored → delivered at settled, over the given ids with both stamps, for the given sink', async () => {
    const t = tempDir();
    cleanup = t.cleanup;
    // A receiver's database as its migrations make it.
    const database = openDatabase(join(t.dir, 'r.db'));
    try {
      const db = database.sqlite;
      const ev = db.prepare("INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES (?, 'application.created', 'default', ?, ?, '{}')");
      const settle = db.prepare("INSERT INTO event_processing (event_id, state, settled_at, updated_at) VALUES (?, 'settled', ?, ?)");
      const deliver = db.prepare(
        "INSERT INTO deliveries (event_id, sink, message_id, state, queued_at, created_at, updated_at, delivered_at) VALUES (?, ?, ?, 'delivered', ?, ?, ?, ?)",
      );
      const at = (ms: number) => new Date(Date.UTC(2026, 10, 28, 6, 0, 0, ms)).toISOString();
      // e1: 10 ms to settle, 30 more to deliver; e2: 20 and 40; e3 not delivered yet; e4 delivered to another sink only.
      for (const [id, settledMs, deliveredMs] of [['e1', 10, 40], ['e2', 20, 60]] as const) {
        ev.run(id, at(0), `d-${id}`);
        settle.run(id, at(settledMs), at(settledMs));
        deliver.run(id, 'bench-file', `m-${id}`, at(settledMs), at(settledMs), at(deliveredMs), at(deliveredMs));
      }
      ev.run('e3', at(0), 'd-e3');
      settle.run('e3', at(5), at(5));
      ev.run('e4', at(0), 'd-e4');
      settle.run('e4', at(5), at(5));
      deliver.run('e4', 'other', 'm-e4', at(5), at(5), at(500), at(500));

      expect(stagesOf(db, 'bench-file', ['e1', 'e2', 'e3', 'e4', 'missing'])).toEqual({ count: 2, settleMs: { p50: 10, p99: 20 }, deliverMs: { p50: 30, p99: 40 } });
      // Only the ids asked (the measured period's): e2 alone.
      expect(stagesOf(db, 'bench-file', ['e2'])).toEqual({ count: 1, settleMs: { p50: 20, p99: 20 }, deliverMs: { p50: 40, p99: 40 } });
      expect(stagesOf(db, 'bench-file', []).count).toBe(0);
    } finally {
      await database.close();
    }
  });
});
