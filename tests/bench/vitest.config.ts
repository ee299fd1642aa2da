import { defineConfig } from 'vitest/config';

// The benchmark's own scripts run as child processes; one of them starts a broker.
export default defineConfig({
  test: {
    testTimeout: 120_000,
    fileParallelism: false,
  },
});
