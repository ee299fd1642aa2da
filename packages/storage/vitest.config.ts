import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Tests fdatasync real files; on a busy 2-core machine one can pass vitest's 5 s.
    testTimeout: 30_000,
  },
});
