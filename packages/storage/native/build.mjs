#!/usr/bin/env node
/**
 * Builds the sendfile addon (native/sendfile.cc → build/Release/klog_sendfile.node), this
 * package's `install` script. Without it klog reads with its read-and-write fallback (docs/design.md §3,
 * the read path).
 */
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildAddon } from '@klog/protocol/native/build-addon.mjs';

buildAddon({
  root: join(dirname(fileURLToPath(import.meta.url)), '..'),
  target: 'klog_sendfile',
  what: 'the sendfile addon',
  fallback: 'reads use the read-write fallback',
});
process.exit(0);
