/**
 * The `klog-broker` command (bin/klog-broker.js) starts Node with the heap settings of its first
 * line (docs/design.md §10: an old generation of 64 MiB from the start, so that a broker whose
 * live heap is a few MiB is not marked over and over), and says so in its "broker listening" line.
 */
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { removeDir, tempDir } from './helpers.js';

const bin = join(dirname(fileURLToPath(import.meta.url)), '../bin/klog-broker.js');
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) removeDir(d);
});

describe('the klog-broker command', () => {
  it('runs Node with --initial-old-space-size=64, as its "broker listening" line shows', async () => {
    const dir = tempDir('klog-bin-');
    dirs.push(dir);
    const proc = spawn(bin, ['--port', '0', '--log-dir', dir], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      const listening = await new Promise<Record<string, unknown>>((resolve, reject) => {
        proc.once('exit', (code) => reject(new Error(`klog-broker exited with ${code}`)));
        createInterface({ input: proc.stdout }).on('line', (line) => {
          const entry = JSON.parse(line) as Record<string, unknown>;
          if (entry.msg === 'broker listening') resolve(entry);
        });
      });
      expect(listening.nodeFlags).toEqual(['--initial-old-space-size=64']);
    } finally {
      proc.kill('SIGTERM');
      await new Promise((resolve) => (proc.exitCode !== null ? resolve(undefined) : proc.once('exit', resolve)));
    }
  });
});
