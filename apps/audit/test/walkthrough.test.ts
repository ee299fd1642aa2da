/**
 * docs/audit.md's walkthrough, run as a user runs it: the `sh` block of its "Walkthrough"
 * section, as written, in bash from the repository root, with only the `ZK=` line pointed at a
 * chroot of this test's own (so that runs never share ZooKeeper state). Two brokers, a producer,
 * a mirror maker dropping one message in 1,000 and `klog-audit --check`: the report shows the 20
 * lost messages in `analytics/mirror` and the block prints `exit 1`.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '../../..');

/** The first `sh` block after the "Walkthrough" heading of docs/audit.md. */
function walkthroughBlock(): string {
  const doc = readFileSync(join(root, 'docs/audit.md'), 'utf8');
  const section = doc.slice(doc.indexOf('## Walkthrough'));
  const m = /```sh\n([\s\S]*?)```/.exec(section);
  if (!m) throw new Error('docs/audit.md: no sh block in the Walkthrough section');
  return m[1]!;
}

describe('docs/audit.md walkthrough', () => {
  it('runs as written: the audit finds the 20 messages the mirror dropped and --check exits 1', async () => {
    const block = walkthroughBlock();
    expect(block).toMatch(/^ZK=127\.0\.0\.1:2181 /m);
    const zk = testConnectString('audit-walkthrough');
    const script = block.replace(/^ZK=127\.0\.0\.1:2181 /m, `ZK=${zk} `);
    const child = spawn('bash', ['-c', script], { cwd: root, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 150_000);
    try {
      const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
      expect(code, stderr).toBe(0);
      expect(stderr).not.toMatch(/no live broker|Error:|^\s+at /m);
      expect(stdout).toMatch(/^exit 1$/m);
      expect(stdout).toMatch(/^audit of online → analytics, windows of 10000 ms, grace 5000 ms/m);
      const total = /short \((\d+) messages missing\)/.exec(stdout);
      expect(total?.[1], stdout).toBe('20');
      expect(stdout).toMatch(/^short: topic clicks, window .*: analytics\/mirror counted \d+ of \d+ \(online\/consumer\)/m);
      expect(stderr).toMatch(/klog-audit: check failed: /);
    } finally {
      clearTimeout(timer);
      try {
        process.kill(-child.pid!, 'SIGKILL'); // anything the block left running
      } catch {
        // the group is gone
      }
      await removeChroot(zk).catch(() => {});
    }
  }, 180_000);
});
