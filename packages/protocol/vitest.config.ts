import { defineConfig } from 'vitest/config';
import { crcProjects } from './vitest.crc-projects.js';

// Every test runs twice, with the CRC addon and with the JavaScript CRCs (see vitest.crc-projects.ts).
export default defineConfig({
  test: {
    // Property tests walk thousands of generated sets; on a busy 2-core machine one can pass 5 s.
    testTimeout: 30_000,
    projects: crcProjects,
  },
});
