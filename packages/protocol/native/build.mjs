#!/usr/bin/env node
/**
 * Builds the CRC addon (native/crc32.cc → build/Release/klog_crc32.node), this package's
 * `install` script. It needs ISA-L's headers and library (Debian: `libisal-dev` to build,
 * `libisal2` to run); without them klog computes CRCs in JavaScript (src/crc32.ts).
 */
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildAddon } from './build-addon.mjs';

const includeDirs = ['/usr/include', '/usr/local/include', ...(process.env.CPATH ?? '').split(':').filter(Boolean)];

buildAddon({
  root: join(dirname(fileURLToPath(import.meta.url)), '..'),
  target: 'klog_crc32',
  what: 'the CRC addon',
  fallback: 'CRCs are computed in JavaScript (slower)',
  missing: () =>
    includeDirs.some((d) => existsSync(join(d, 'isa-l', 'crc.h'))) ? undefined : 'ISA-L is not installed (Debian: apt install libisal-dev)',
});
process.exit(0);
