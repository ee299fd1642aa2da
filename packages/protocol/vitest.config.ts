import { defineConfig } from 'vitest/config';

// Every test runs twice: with the CRC addon (where `pnpm install` built it) and with the
// JavaScript CRCs it falls back to (src/crc32.ts), so both paths give the same answers.
export default defineConfig({
  test: {
    // Property tests walk thousands of generated sets; on a busy 2-core machine one can pass 5 s.
    testTimeout: 30_000,
    projects: [
      { extends: true, test: { name: 'crc-addon' } },
      { extends: true, test: { name: 'crc-js', env: { KLOG_DISABLE_NATIVE_CRC: '1' } } },
    ],
  },
});
