/** The mirror's `acks` setting (docs/replication.md §14): 1, 2, or `all` for a replicated target; never 0. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseAcksSetting, readConfigFile, resolveConfig } from '../src/config.js';

describe('acks', () => {
  it('takes 1, 2, all and -1', () => {
    expect([1, '2', 'all', '-1', -1].map((v) => parseAcksSetting(v, 'acks'))).toEqual([1, 2, -1, -1, -1]);
    expect(() => parseAcksSetting('0', 'acks')).toThrow(ConfigError);
    expect(() => parseAcksSetting('most', '--acks')).toThrow('--acks "most" must be 1, 2 or all (the mirror commits only what the target acknowledged)');
  });

  it('reads acks=all from a properties file', () => {
    const dir = mkdtempSync(join(tmpdir(), 'klog-mirror-acks-'));
    try {
      const file = join(dir, 'mirror.properties');
      writeFileSync(file, 'source=h:2181/a\ntarget=h:2181/t\ngroup=m\nwhitelist=.*\nacks=all\n');
      expect(resolveConfig(readConfigFile(file)).acks).toBe(-1);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
