import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';
import { cli, expectHeldBack, withMigratedDatabase, workersSayTheyWait } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-replay-yield-');
afterAll(cleanup);

/** Jobs a replay queues per transaction (replay/eventPages.ts BATCH), and how long it holds the next back at most (replay.ts LET_IN_MS). */
const BATCH = 500;
const LET_IN_MS = 30;

describe('replay beside a running receiver whose writers wait for the lock', { timeout: 60_000 }, () => {
  it('holds each next batch back while they say they wait (bounded), and queues everything', async () => {
    await withMigratedDatabase(join(dir, 'yield.db'), async (path, w) => {
      // Eight batches: seven gaps, more than one stall of this process can take out of the judging.
      const events = 8 * BATCH;
      const insert = w.prepare(
        `INSERT INTO events (id, event_type, source, created_at, received_at, delivery_id, envelope)
         VALUES (?, 'application.created', 'default', ?, ?, ?, '{}')`,
      );
      const at = '2026-11-20T10:00:00.000Z';
      w.transaction(() => {
        for (let i = 0; i < events; i++) insert.run(`evt-${i}`, at, at, `msg_${i}`);
      })();
      // Every event folded already: `replay --all` queues a process_event job for each, 500 per transaction.
      w.exec('UPDATE processing_cursor SET last_event_rowid = (SELECT max(rowid) FROM events)');
      const saying = workersSayTheyWait(path);
      let r;
      try {
        r = await cli(['replay', '--all', '--json'], { DATABASE_PATH: path });
      } finally {
        saying.stop();
      }
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ selected: events, processing: { queued: events } });
      // Each batch's jobs carry the time it began: the batches came LET_IN_MS apart at least (the
      // CLI measures its wait on a monotonic clock, these are wall-clock milliseconds: one off),
      // but for a gap across which this process's saying lapsed (WorkersSaying.lapses).
      const starts = (w.prepare("SELECT DISTINCT created_at FROM jobs WHERE kind = 'process_event' ORDER BY created_at").pluck().all() as string[]).map(Date.parse);
      expect(starts).toHaveLength(events / BATCH);
      expectHeldBack(starts, saying.lapses(), LET_IN_MS - 1, 'batches');
    });
  });

  it('goes on when the -ingest-wait file is no regular file (a FIFO: opening it to read waited for a writer, for ever)', async () => {
    await withMigratedDatabase(join(dir, 'fifo.db'), async (path, w) => {
      const at = '2026-11-20T10:00:00.000Z';
      w.prepare(`INSERT INTO events (id, event_type, source, created_at, received_at, delivery_id, envelope) VALUES ('evt-1', 'application.created', 'default', ?, ?, 'msg_1', '{}')`).run(at, at);
      w.exec('UPDATE processing_cursor SET last_event_rowid = (SELECT max(rowid) FROM events)');
      execFileSync('mkfifo', [`${path}-ingest-wait`]);
      const r = await cli(['replay', '--all', '--json'], { DATABASE_PATH: path }, 15_000);
      expect({ code: r.code, signal: r.signal }, r.stderr).toEqual({ code: 0, signal: null });
      expect(JSON.parse(r.stdout)).toMatchObject({ selected: 1, processing: { queued: 1 } });
    });
  });
});
