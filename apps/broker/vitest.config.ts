import { defineConfig } from 'vitest/config';

// The broker tests start brokers as processes; on a small, busy machine one start can take
// seconds, so a test gets more than vitest's default 5 s.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
