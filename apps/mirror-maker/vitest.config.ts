import { defineConfig } from 'vitest/config';

// The mirror tests start brokers and mirror makers as processes on a small machine: one file at a time.
export default defineConfig({
  test: {
    testTimeout: 120_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
