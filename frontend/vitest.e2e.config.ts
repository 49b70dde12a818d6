import { defineConfig } from 'vitest/config';

// Browser tests: the real server binary (SQLite, port 0), a loopback feed
// server and Debian's Chromium through playwright-core. One file at a time
// (2 cores); every wait is on page or network state, never a sleep.
export default defineConfig({
  test: {
    include: ['e2e/**/*.e2e.ts'],
    environment: 'node',
    fileParallelism: false,
    pool: 'forks',
    testTimeout: 90_000,
    hookTimeout: 120_000,
    sequence: { concurrent: false },
  },
});
