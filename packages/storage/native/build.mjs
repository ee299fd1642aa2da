#!/usr/bin/env node
/**
 * Builds the sendfile addon (native/sendfile.cc → build/Release/klog_sendfile.node) with
 * node-gyp; run by `pnpm install` as this package's `install` script. It never fails the
 * install: when the build cannot run (no compiler, no headers, not Linux, KLOG_SKIP_NATIVE=1)
 * it says why on stderr and exits 0, and klog reads with its read-and-write fallback
 * (SPEC §3, the read path).
 *
 * Node's headers are taken from the Node.js installation running this script when it ships
 * them (`<prefix>/include/node`), so the build needs no download.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const say = (msg) => process.stderr.write(`@klog/storage: ${msg}\n`);

function main() {
  if (process.env.KLOG_SKIP_NATIVE === '1') return say('KLOG_SKIP_NATIVE=1: not building the sendfile addon; reads use the read-write fallback');
  if (process.platform !== 'linux') return say(`no sendfile addon on ${process.platform}; reads use the read-write fallback`);
  let nodeGyp;
  try {
    nodeGyp = createRequire(join(root, 'package.json')).resolve('node-gyp/bin/node-gyp.js');
  } catch {
    return say('node-gyp is not installed; reads use the read-write fallback');
  }
  const args = [nodeGyp, 'rebuild', '--silent'];
  const prefix = dirname(dirname(process.execPath));
  if (existsSync(join(prefix, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${prefix}`);
  const r = spawnSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], timeout: 300_000 });
  if (r.status === 0 && existsSync(join(root, 'build', 'Release', 'klog_sendfile.node'))) return;
  say(`building the sendfile addon failed (${r.error?.message ?? `exit ${r.status}`}); reads use the read-write fallback`);
}

try {
  main();
} catch (err) {
  say(`building the sendfile addon failed (${err instanceof Error ? err.message : String(err)}); reads use the read-write fallback`);
}
process.exit(0);
