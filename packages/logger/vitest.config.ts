import { defineConfig } from 'vitest/config';

// Tests run real brokers (and, for the CLI, child processes): allow for a loaded 2-core machine.
export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 30_000,
  },
});
