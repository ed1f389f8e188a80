import { defineConfig } from 'vitest/config';
import { NameOrderSequencer } from './test/reliability/sequencer.js';

/**
 * The reliability suite (`npm run test:reliability`): tries to lose data
 * with kills, duplicates, slow upstreams, held locks, a full disk and
 * hostile input. Files run one after another (latency figures need the
 * two cores to themselves); the whole suite is bounded to about 5 minutes.
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
