import { describe, expect, it } from 'vitest';
import { GroupCommitter } from '../../src/ingest/GroupCommitter.js';
import { ManualClock } from '../../src/util/clock.js';

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
});
