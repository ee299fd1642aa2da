/**
 * bench/peers must never report a comparison that did not happen (bench/peers/README.md, "A run
 * that is not a comparison says so"):
 * - `install.sh` installs every peer package Debian offers, even when `apt-cache policy` writes
 *   more after the line that names the candidate (a `grep -q` in a pipeline under
 *   `set -o pipefail` used to fail there, and every peer was reported "cannot be had here");
 * - `bench.mjs` prints an INCOMPLETE banner and exits 1 when a system asked for did not run, and
 *   exits 0 without it when every one did.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';

const repoRoot = resolve(import.meta.dirname, '../../..');
const dirs: string[] = [];

function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'klog-bench-test-'));
  dirs.push(dir);
  return dir;
}

afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

/** Writes an executable shell script `name` into `bin`. */
function fake(bin: string, name: string, body: string): void {
  const path = join(bin, name);
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
}

/**
 * Runs bench/peers/install.sh for `packages` with Debian's tools replaced by fakes: dpkg-query
 * finds nothing installed, `apt-cache policy` offers a candidate for every package but `nosuch`
 * and then writes 2 MB more (as a long policy does), `id -u` says root, and apt-get and npm only
 * record their arguments in `calls`; the policy-rc.d that keeps services from starting goes into
 * the temp dir (`KLOG_PEERS_POLICY_RC_D`), never /usr/sbin.
 */
function runInstall(packages: string[]): { stderr: string; calls: string[] } {
  const dir = tempDir();
  const bin = join(dir, 'bin');
  const calls = join(dir, 'calls');
  writeFileSync(calls, '');
  mkdirSync(bin);
  fake(bin, 'dpkg-query', 'exit 1');
  fake(bin, 'apt-cache', [
    'if [ "$2" = nosuch ]; then echo "N: Unable to locate package $2"; exit 0; fi',
    'echo "$2:"; echo "  Installed: (none)"; echo "  Candidate: 1.0-1"',
    'sleep 0.2',
    'head -c 2000000 /dev/zero | tr "\\0" "x"',
  ].join('\n'));
  fake(bin, 'id', '[ "$1" = -u ] && { echo 0; exit 0; }; exec /usr/bin/id "$@"');
  fake(bin, 'apt-get', `echo "apt-get $*" >> ${calls}`);
  fake(bin, 'npm', `echo "npm $*" >> ${calls}`);
  const r = spawnSync('bash', [join(repoRoot, 'bench/peers/install.sh'), ...packages], {
    env: { ...process.env, PATH: `${bin}:${process.env.PATH ?? ''}`, KLOG_PEERS_POLICY_RC_D: join(dir, 'policy-rc.d') },
    encoding: 'utf8',
  });
  const recorded = readFileSync(calls, 'utf8').split('\n').filter((l) => l.startsWith('apt-get install'));
  return { stderr: r.stderr, calls: recorded };
}

describe('bench/peers/install.sh', () => {
  it('installs every package with a candidate, though apt-cache writes on after the candidate line', () => {
    const r = runInstall(['nats-server', 'redis-server']);
    expect(r.stderr).not.toContain('cannot be had here');
    expect(r.calls).toEqual(['apt-get install -y -q --no-install-recommends nats-server redis-server']);
  });

  it('reports and skips a package Debian does not offer, and installs the others', () => {
    const r = runInstall(['nosuch', 'nats-server']);
    expect(r.stderr).toContain('install: Debian package nosuch cannot be had here');
    expect(r.stderr).not.toContain('nats-server cannot be had here');
    expect(r.calls).toEqual(['apt-get install -y -q --no-install-recommends nats-server']);
  });
});

describe('bench/peers/bench.mjs', () => {
  /** Runs the benchmark's latency phase for klog alone, at 100 msg/s for 1 s, with more arguments. */
  function bench(extra: string[]): { stdout: string; stderr: string; status: number | null } {
    const out = join(tempDir(), 'peers.json');
    const r = spawnSync(process.execPath, [
      join(repoRoot, 'bench/peers/bench.mjs'), '--only', 'klog', '--phases', 'latency',
      '--latency-rates', '100', '--latency-seconds', '1', '--out', out, ...extra,
    ], { cwd: repoRoot, encoding: 'utf8', timeout: 100_000 });
    return { stdout: r.stdout, stderr: r.stderr, status: r.status };
  }

  it('says INCOMPLETE and exits 1 when a system asked for did not run', () => {
    const r = bench(['--budget-s', '1']);
    expect(r.status).toBe(1);
    expect(r.stdout).toContain('!! INCOMPLETE: 1 of the systems asked for did not run in full; this is not a comparison');
    expect(r.stdout).toMatch(/klog: did not run: time budget/);
    expect(r.stderr).toContain('!! INCOMPLETE');
  });

  it('exits 0 without the banner when every system asked for ran', () => {
    const r = bench([]);
    expect(r.stderr).not.toContain('INCOMPLETE');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/klog/);
  });
});
