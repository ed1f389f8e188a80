import { beforeEach, describe, expect, it } from 'vitest';
import type { OpenDatabase } from '../../src/db/openDatabase.js';
import { SourcePauses } from '../../src/processing/SourcePauses.js';
import { ManualClock } from '../../src/util/clock.js';
import { scratchDatabase } from '../helpers/database.js';

let database: OpenDatabase;
beforeEach(() => {
  database = scratchDatabase();
});

/** The pause rows as they are the moment a call returns (a synchronous read of the file). */
const rowsNow = () => database.sqlite.prepare('SELECT source, status, detail FROM source_pauses').all();

describe('a source paused while a read beside it resumes it', () => {
  it('is paused when pause() returns, and pause() says it paused it (the resume fell between its insert and its update)', async () => {
    const pauses = new SourcePauses(database.db, new ManualClock(Date.parse('2026-11-01T00:00:00Z')));
    // A read beside the failing one is answered (resume), and the failing one's pause starts
    // while the resume runs: insert (the row is there) → the resume's delete → update.
    for (let delay = 0; delay < 4; delay++) {
      expect(await pauses.pause('default', 401, 'first')).toBe(true);
      const pausing = async () => {
        for (let i = 0; i < delay; i++) await Promise.resolve();
        const paused = await pauses.pause('default', 301, 'second');
        return { paused, rows: rowsNow() };
      };
      const [, seen] = await Promise.all([pauses.resume('default'), pausing()]);
      expect(seen, `delay ${delay}`).toEqual({ paused: true, rows: [{ source: 'default', status: 301, detail: 'second' }] });
      expect(rowsNow()).toEqual([{ source: 'default', status: 301, detail: 'second' }]);
      await pauses.resume('default');
    }
  });

  it('still says "paused already" when it was, and keeps the latest answer', async () => {
    const pauses = new SourcePauses(database.db, new ManualClock(Date.parse('2026-11-01T00:00:00Z')));
    expect(await pauses.pause('default', 401, 'first')).toBe(true);
    expect(await pauses.pause('default', 403, 'second')).toBe(false);
    expect(rowsNow()).toEqual([{ source: 'default', status: 403, detail: 'second' }]);
  });
});
