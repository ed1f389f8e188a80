import { afterEach, describe, expect, it, vi } from 'vitest';
import { GroupCommitter, StorageUnavailableError } from '../../src/ingest/GroupCommitter.js';
import { ManualClock } from '../../src/util/clock.js';

const busy = () => Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' });
const isBusy = (e: unknown) => (e as { code?: string }).code === 'SQLITE_BUSY';

describe('GroupCommitter', () => {
  it('answers a committed batch even when the bookkeeping after the commit throws (a full disk under the ingest-wait file)', async () => {
    const committed: string[][] = [];
    const bookkeepingErrors: unknown[] = [];
    const g = new GroupCommitter<string, string>({
      write: (items) => {
        committed.push(items);
        return items.map((i) => `stored ${i}`);
      },
      isBusy: () => false,
      clock: new ManualClock(0),
      timeoutMs: 1000,
      onBatch: () => {
        throw Object.assign(new Error('ENOSPC: no space left on device, write'), { code: 'ENOSPC' });
      },
      onBatchError: (err) => bookkeepingErrors.push(err),
    });
    await expect(Promise.all([g.submit('a'), g.submit('b')])).resolves.toEqual(['stored a', 'stored b']);
    expect(committed).toEqual([['a', 'b']]);
    expect(bookkeepingErrors).toHaveLength(1);
    // And it keeps working.
    await expect(g.submit('c')).resolves.toBe('stored c');
  });

  describe('when another connection holds the write lock', () => {
    afterEach(() => {
      vi.restoreAllMocks();
    });

    it('tries again on 1, 2, 4 ms timers, commits when the holder lets go, and reports how long the batch waited', async () => {
      const timers = vi.spyOn(globalThis, 'setTimeout');
      let tries = 0;
      const waited: number[] = [];
      const g = new GroupCommitter<string, string>({
        write: (items) => {
          tries++;
          if (tries <= 3) throw busy();
          return items.map((i) => `stored ${i}`);
        },
        isBusy,
        clock: new ManualClock(0),
        timeoutMs: 10_000,
        onLockWaited: (ms) => waited.push(ms),
      });
      await expect(g.submit('a')).resolves.toBe('stored a');
      expect(tries).toBe(4);
      expect(timers.mock.calls.map((c) => c[1])).toEqual([1, 2, 4]);
      // One wait reported, as long as the three timers at least (receiver_ingest_lock_wait_seconds).
      expect(waited).toHaveLength(1);
      expect(waited[0]).toBeGreaterThanOrEqual(6);
      // A batch that met no lock reports nothing.
      await expect(g.submit('b')).resolves.toBe('stored b');
      expect(waited).toHaveLength(1);
    });

    it('a holder that keeps it past the deadline: the delivery fails uncommitted, and no wait is reported', async () => {
      const clock = new ManualClock(0);
      let tries = 0;
      const waited: number[] = [];
      const g = new GroupCommitter<string, string>({
        write: () => {
          tries++;
          throw busy();
        },
        isBusy,
        clock,
        timeoutMs: 1000,
        onLockWaited: (ms) => waited.push(ms),
      });
      const answer = g.submit('a');
      for (let i = 0; i < 1000 && tries < 2; i++) await new Promise<void>((r) => setImmediate(r));
      clock.advance(1001);
      await expect(answer).rejects.toThrow(StorageUnavailableError);
      expect(waited).toEqual([]);
    });
  });
});
