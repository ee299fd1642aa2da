/**
 * A cluster is never mirrored into itself, also when it is named by two connect strings and its
 * brokers register only after the mirror started.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { BrokerProcess, MirrorProcess, cleanup, mirrorArgs, startCluster, waitFor } from '../src/testing.js';

afterAll(cleanup);

describe('klog-mirror-maker and its own cluster', () => {
  it('stops with an error when a source turns out to share brokers with the target', async () => {
    const { zookeeper } = await startCluster('self', 0);
    const alias = zookeeper.replace('127.0.0.1', 'localhost');
    expect(alias).not.toBe(zookeeper);
    const mirror = new MirrorProcess(mirrorArgs([alias], zookeeper, 'self', ['--whitelist', 'loop']));
    await waitFor('the mirror maker to start', () => mirror.logs('mirror maker started').length === 1, 20_000);
    const dir = mkdtempSync(join(tmpdir(), 'klog-mirror-self-'));
    try {
      await new BrokerProcess(0, zookeeper, dir, ['--num-partitions', '1']).start();
      await waitFor('the mirror maker to stop', () => mirror.proc.exitCode !== null, 15_000);
      expect(mirror.proc.exitCode).toBe(1);
      expect(mirror.stderr.join('')).toMatch(/shares brokers 127\.0\.0\.1:\d+ with the target: a cluster is never mirrored into itself/);
    } finally {
      await cleanup();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);
});
