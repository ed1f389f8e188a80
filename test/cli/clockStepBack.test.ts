import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { tempDir } from '../helpers/receiver.js';
import { cli, withMigratedDatabase } from './helpers.js';

const { dir, cleanup } = tempDir('receiver-cli-clock-step-');
afterAll(cleanup);

// Loaded into the CLI child (NODE_OPTIONS=--import): its wall clock (Date.now) steps back an hour
// each second, as NTP setting right a clock that ran fast would (once; here each second, so a step
// comes after the wait began however long the start-up took). Timers are left alone.
const STEP_BACK = join(dir, 'step-back.mjs');
writeFileSync(
  STEP_BACK,
  `const real = Date.now; const start = real();
   Date.now = () => { const t = real(); return t - Math.floor((t - start) / 1000) * 3_600_000; };`,
);

describe('the CLI while the wall clock steps back', { timeout: 60_000 }, () => {
  it('replay --wait --timeout 2 still gives up after about 2 s (not 2 s after the clock catches up)', async () => {
    await withMigratedDatabase(join(dir, 'no-workers.db'), async (path, w) => {
      // No receiver runs on this database: the replayed fold never runs, the wait can only time out.
      w.prepare(`INSERT INTO events (id, event_type, source, received_at, delivery_id, envelope) VALUES ('evt-s1', 'application.created', 'default', ?, 'msg-s1', '{}')`).run(new Date().toISOString());
      w.prepare("UPDATE processing_cursor SET last_event_rowid = (SELECT rowid FROM events WHERE id = 'evt-s1')").run();
      const r = await cli(['replay', '--id', 'evt-s1', '--wait', '--timeout', '2', '--json'], { DATABASE_PATH: path, NODE_OPTIONS: `--import ${STEP_BACK}` }, 20_000);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.code).toBe(1);
      expect(JSON.parse(r.stdout)).toMatchObject({ finished: { done: 0, failed: 0, unfinished: 1, timed_out: true } });
    });
  });
});
