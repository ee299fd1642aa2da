import { defineConfig } from 'vitest/config';

// The tests run against a real ZooKeeper (scripts/zookeeper.sh); the global setup fails the
// run with instructions when none answers.
export default defineConfig({
  test: {
    globalSetup: ['./test/global-setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
