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

    it('a wait that ends without a commit (every item timed out, or a storage error) is not carried into the next batch', async () => {
      const timers = vi.spyOn(globalThis, 'setTimeout');
      const clock = new ManualClock(0);
      const plan: ('busy' | 'full' | 'ok')[] = [];
      const waited: number[] = [];
      const g = new GroupCommitter<string, string>({
        write: (items) => {
          const step = plan.shift() ?? 'ok';
          if (step === 'busy') throw busy();
          if (step === 'full') throw Object.assign(new Error('database or disk is full'), { code: 'SQLITE_FULL' });
          return items.map((i) => `stored ${i}`);
        },
        isBusy,
        clock,
        timeoutMs: 1000,
        onLockWaited: (ms) => waited.push(ms),
      });
      // 1. Busy until the deadline: the delivery fails uncommitted.
      plan.push('busy', 'busy', 'busy');
      const first = g.submit('a');
      for (let i = 0; i < 10_000 && timers.mock.calls.length < 2; i++) await new Promise<void>((r) => setImmediate(r));
      clock.advance(1001);
      await expect(first).rejects.toThrow(StorageUnavailableError);
      // 2. Busy once, then a storage error: 503, and the wait ends there.
      plan.length = 0;
      plan.push('busy', 'full');
      await expect(g.submit('b')).rejects.toThrow(StorageUnavailableError);
      // 3. A clean commit: no lock wait reported for it.
      await expect(g.submit('c')).resolves.toBe('stored c');
      expect(waited).toEqual([]);
      // Each new wait started on the 1 ms timer, not where the last one left off.
      const delays = timers.mock.calls.map((c) => c[1]);
      expect(delays.slice(0, 2)).toEqual([1, 2]);
      expect(delays.at(-1)).toBe(1);
    });
  });
});
