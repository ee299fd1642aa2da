import { defineConfig } from 'vitest/config';

// The audit tests start brokers, producers and mirror makers as processes on a small machine: one file at a time.
export default defineConfig({
  test: {
    testTimeout: 180_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
