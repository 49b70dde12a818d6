import { defineConfig } from 'vitest/config';

// The benchmark runs on Vitest only to reuse the browser tests' harness; it
// measures and prints, it asserts no timing.
export default defineConfig({
  test: {
    include: ['bench/**/*.bench.ts'],
    environment: 'node',
    fileParallelism: false,
    pool: 'forks',
    testTimeout: 900_000,
    hookTimeout: 600_000,
  },
});
