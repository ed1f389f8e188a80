import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';
import { cli, expectHeldBack, withMigratedDatabase, workersSayTheyWait, type Span } from './helpers.js';

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
      // When each job was inserted, by the replay's own clock (SQLite's 'now', fixed for one
      // statement: replay inserts its jobs one statement each), to tell where a batch ended.
      w.exec(`CREATE TABLE test_job_inserts (batch TEXT NOT NULL, at REAL NOT NULL);
        CREATE TRIGGER test_job_inserted AFTER INSERT ON jobs BEGIN INSERT INTO test_job_inserts VALUES (NEW.created_at, unixepoch('now', 'subsec')); END;`);
      const saying = workersSayTheyWait(path);
      let r;
      try {
        r = await cli(['replay', '--all', '--json'], { DATABASE_PATH: path });
      } finally {
        saying.stop();
      }
      expect(r.code, r.stderr).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ selected: events, processing: { queued: events } });
      // Each batch's jobs carry the time it began: from the last job of one to the first of the
      // next, LET_IN_MS at least (the CLI measures its wait on a monotonic clock, these are
      // wall-clock milliseconds: one off), but for a gap across which this process's saying
      // lapsed (WorkersSaying.lapses). Measured from batch start to batch start, the gaps held
      // each batch's own work too: 30, 46, 75, 86, 90, 98 and 99 ms with no pause at all, beside
      // two CPU burners, and the test passed.
      const batches = w.prepare('SELECT batch, min(at) * 1000 AS first, max(at) * 1000 AS last FROM test_job_inserts GROUP BY batch ORDER BY batch').all() as (Span & { batch: string })[];
      expect(batches).toHaveLength(events / BATCH);
      expectHeldBack(batches, saying.lapses(), LET_IN_MS - 1, 'batches');
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
