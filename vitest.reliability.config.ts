import { defineConfig } from 'vitest/config';
import { NameOrderSequencer } from './test/reliability/sequencer.js';

/**
 * The reliability suite (`npm run test:reliability`): tries to lose data
 * with kills, duplicates, slow upstreams, held locks, a full disk and
 * hostile input. Files run one after another (latency figures need the
 * two cores to themselves). About 1.5 minutes when every test passes; every
 * loop stops by count or deadline, and a test that hangs fails at its 2-minute
 * timeout (the kill loop's: 2.5), so the suite ends within about 25 minutes
 * whatever the receiver does.
 */
export default defineConfig({
  test: {
    include: ['test/reliability/**/*.test.ts'],
    globalSetup: ['test/reliability/globalSetup.ts'],
    testTimeout: 120_000,
    hookTimeout: 30_000,
    pool: 'forks',
    fileParallelism: false,
    maxWorkers: 1,
    sequence: { sequencer: NameOrderSequencer },
  },
});
