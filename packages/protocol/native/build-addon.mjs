/**
 * Builds one of klog's native addons with node-gyp, from the package's `binding.gyp`; the
 * packages' `install` scripts (`pnpm install`) call it. It never fails the install: when the
 * build cannot run (no compiler, no headers, a missing library, another platform,
 * KLOG_SKIP_NATIVE=1) it says why on stderr, and klog runs the addon's JavaScript fallback.
 *
 * Node's headers are taken from the Node.js installation running the build when it ships them
 * (`<prefix>/include/node`), so the build needs no download.
 */
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';

/**
 * @param {object} o
 * @param {string} o.root the package directory (holds binding.gyp)
 * @param {string} o.target the gyp target; the addon is `build/Release/<target>.node`
 * @param {string} o.what the addon, in the messages ("the sendfile addon")
 * @param {string} o.fallback what klog does without it ("reads use the read-write fallback")
 * @param {() => string | undefined} [o.missing] why the build cannot run here, checked first
 */
export function buildAddon({ root, target, what, fallback, missing }) {
  const require = createRequire(join(root, 'package.json'));
  const name = require('./package.json').name;
  const addon = join('build', 'Release', `${target}.node`);
  // An addon built before stays where it is, and is what klog loads: say so rather than the fallback.
  const say = (msg) => process.stderr.write(`${name}: ${msg}; ${existsSync(join(root, addon)) ? `the ${addon} built before stays in use` : fallback}\n`);
  try {
    if (process.env.KLOG_SKIP_NATIVE === '1') return say(`KLOG_SKIP_NATIVE=1: not building ${what}`);
    if (process.platform !== 'linux') return say(`no ${what} on ${process.platform}`);
    const why = missing?.();
    if (why !== undefined) return say(`not building ${what}: ${why}`);
    let nodeGyp;
    try {
      nodeGyp = require.resolve('node-gyp/bin/node-gyp.js');
    } catch {
      return say(`node-gyp is not installed, so no ${what}`);
    }
    const args = [nodeGyp, 'rebuild', '--silent'];
    const prefix = dirname(dirname(process.execPath));
    if (existsSync(join(prefix, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${prefix}`);
    const r = spawnSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], timeout: 300_000 });
    if (r.status === 0 && existsSync(join(root, addon))) return;
    say(`building ${what} failed (${r.error?.message ?? `exit ${r.status}`})`);
  } catch (err) {
    say(`building ${what} failed (${err instanceof Error ? err.message : String(err)})`);
  }
}
