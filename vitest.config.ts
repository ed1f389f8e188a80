import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    exclude: ['test/reliability/**'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Tests start real servers on 127.0.0.1 and real child processes; two
    // cores, so keep the worker pool small and predictable.
    pool: 'forks',
    maxWorkers: 2,
  },
});
