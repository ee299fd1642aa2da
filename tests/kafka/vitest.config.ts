import { defineConfig } from 'vitest/config';

// System tests start brokers and consumers as processes on a small machine: one file at a time.
export default defineConfig({
  test: {
    testTimeout: 180_000,
    hookTimeout: 60_000,
    fileParallelism: false,
  },
});
