import { defineConfig } from 'vitest/config';
import { crcProjects } from '../protocol/vitest.crc-projects.js';

// Every test runs twice, with klog's CRC addon and with the JavaScript CRCs (see
// packages/protocol/vitest.crc-projects.ts), so both paths give the same bytes.
export default defineConfig({
  test: {
    // Property tests walk thousands of generated inputs; on a busy 2-core machine one can pass 5 s.
    testTimeout: 30_000,
    projects: crcProjects,
  },
});
