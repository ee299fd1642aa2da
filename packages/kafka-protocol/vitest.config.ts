import { defineConfig } from 'vitest/config';

// Every test runs twice: with klog's CRC addon (where `pnpm install` built it; Kafka message
// sets get their CRCs in one call) and with the JavaScript CRCs it falls back to, so both paths
// give the same bytes.
export default defineConfig({
  test: {
    // Property tests walk thousands of generated inputs; on a busy 2-core machine one can pass 5 s.
    testTimeout: 30_000,
    projects: [
      { extends: true, test: { name: 'crc-addon' } },
      { extends: true, test: { name: 'crc-js', env: { KLOG_DISABLE_NATIVE_CRC: '1' } } },
    ],
  },
});
