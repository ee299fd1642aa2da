/**
 * `klog produce --stamp-metadata --compression gzip`, `klog consume --print-key` (simple and
 * group mode) and `klog perf produce --compression gzip`, as child processes against real brokers.
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBroker, type Broker } from '@klog/broker';
import { iterateMessageSet } from '@klog/protocol';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type KlogRun, runKlog } from './cli-run.js';

const klog = (args: string[], input = ''): Promise<KlogRun> => runKlog(args, input);

describe('klog with metadata and gzip', () => {
  let work: string;
  let zookeeper: string;
  let broker: Broker;
  let address: string;
  beforeAll(async () => {
    await assertZooKeeperRunning();
    zookeeper = testConnectString();
    work = mkdtempSync(join(tmpdir(), 'klog-cli-gzip-'));
    broker = await startBroker(
      { logDir: join(work, 'logs'), host: '127.0.0.1', port: 0, brokerId: 0, zookeeper, numPartitions: 1, flushMessages: 1 },
      pino({ level: 'silent' }),
    );
    address = `127.0.0.1:${broker.port}`;
  });
  afterAll(async () => {
    await broker.close();
    await removeChroot(zookeeper);
    rmSync(work, { recursive: true, force: true });
  });

  /** Attributes of the messages stored in partition 0 of `topic`. */
  function storedAttributes(topic: string): number[] {
    const dir = join(work, 'logs', `${topic}-0`);
    const file = readdirSync(dir).find((f) => f.endsWith('.kafka'))!;
    return [...iterateMessageSet(readFileSync(join(dir, file)))].map((m) => m.message.attributes);
  }

  it('produce --stamp-metadata --compression gzip; consume prints values, --print-key the keys', async () => {
    const input = 'k1|first\nk2|second\nthird\n';
    const p = await klog(
      ['produce', '--broker-list', address, '--topic', 'gz', '--partition', '0', '--key-separator', '|', '--stamp-metadata', '--host', 'cli-host', '--compression', 'gzip', '--acks', '1', '--linger-ms', '50'],
      input,
    );
    expect(p.code, p.stderr).toBe(0);
    expect(p.stderr).toMatch(/produced 3 messages/);
    expect(storedAttributes('gz')).toEqual([1]);
    const plain = await klog(['consume', '--broker', address, '--topic', 'gz', '--max-messages', '3']);
    expect(plain.code, plain.stderr).toBe(0);
    expect(plain.stdout).toBe('first\nsecond\nthird\n');
    const keyed = await klog(['consume', '--broker', address, '--topic', 'gz', '--print-offsets', '--print-key', '--max-messages', '3']);
    expect(keyed.stdout).toBe('0\tk1\tfirst\n0\tk2\tsecond\n0\t\tthird\n');
    // Group mode: the same lines, keys first.
    const group = await klog(['consume', '--zookeeper', zookeeper, '--group', 'readers', '--topic', 'gz', '--from-beginning', '--print-key', '--max-messages', '3']);
    expect(group.code, group.stderr).toBe(0);
    expect(group.stdout).toBe('k1\tfirst\nk2\tsecond\n\tthird\n');
    // --print-metadata: creation time and host, then the key.
    const meta = await klog(['consume', '--broker', address, '--topic', 'gz', '--print-metadata', '--print-key', '--max-messages', '3']);
    expect(meta.code, meta.stderr).toBe(0);
    const lines = meta.stdout.trimEnd().split('\n').map((l) => l.split('\t'));
    expect(lines.map((l) => l.slice(1))).toEqual([['cli-host', 'k1', 'first'], ['cli-host', 'k2', 'second'], ['cli-host', '', 'third']]);
    for (const [time] of lines) expect(Math.abs(Date.parse(time!) - Date.now())).toBeLessThan(120_000);
  });

  it('dump-log decodes the metadata header, and --deep prints the messages inside a gzip set', async () => {
    const plainRun = await klog(
      ['produce', '--broker-list', address, '--topic', 'dump-meta', '--partition', '0', '--key-separator', '|', '--stamp-metadata', '--host', 'dump-host', '--acks', '1'],
      'k1|first\n',
    );
    expect(plainRun.code, plainRun.stderr).toBe(0);
    const gz = await klog(
      ['produce', '--broker-list', address, '--topic', 'dump-meta', '--partition', '0', '--key-separator', '|', '--stamp-metadata', '--host', 'dump-host', '--compression', 'gzip', '--acks', '1', '--linger-ms', '50'],
      'k2|second\nthird\n',
    );
    expect(gz.code, gz.stderr).toBe(0);
    const dir = join(work, 'logs', 'dump-meta-0');
    const shallow = await klog(['dump-log', '--print-payloads', dir]);
    expect(shallow.code, shallow.stderr).toBe(0);
    const lines = shallow.stdout.split('\n');
    // The keyed message: key, creation time and host decoded, the value printed without the header bytes.
    const keyed = lines.findIndex((l) => l.startsWith('offset: 0 '));
    expect(lines[keyed]).toMatch(/codec: none crc: \d+ valid: true keysize: 2 key: k1 timestamp: \d{4}-\d\d-\d\dT[\d:.]+Z host: dump-host valuesize: 5$/);
    expect(lines[keyed + 1]).toBe('payload: first');
    // The gzip set is one message; without --deep its inner messages are not printed.
    const wrapper = lines.find((l) => / codec: gzip /.test(l))!;
    expect(wrapper).toMatch(/^offset: (\d+) /);
    const wrapperOffset = /^offset: (\d+) /.exec(wrapper)![1];
    expect(lines.filter((l) => l.startsWith('| '))).toEqual([]);
    const deep = await klog(['dump-log', '--deep', '--print-payloads', dir]);
    expect(deep.code, deep.stderr).toBe(0);
    const inner = deep.stdout.split('\n').filter((l) => l.startsWith('| '));
    expect(inner).toHaveLength(4);
    expect(inner[0]).toMatch(new RegExp(`^\\| offset: ${wrapperOffset} position: 0 size: \\d+ .* codec: none .* valid: true keysize: 2 key: k2 timestamp: \\S+Z host: dump-host valuesize: 6$`));
    expect(inner[1]).toBe('| payload: second');
    expect(inner[2]).toMatch(new RegExp(`^\\| offset: ${wrapperOffset} position: [1-9]\\d* .* host: dump-host valuesize: 5$`));
    expect(inner[2]).not.toMatch(/key:/);
    expect(inner[3]).toBe('| payload: third');
    const summary = await klog(['dump-log', '--deep', '--summary', dir]);
    expect(summary.stdout).toMatch(/2 messages \(2 inside compressed sets\), (\d+) of \1 bytes read, .* ok/);
  });

  it('plain produce stays plain; --host needs --stamp-metadata; --compression is checked', async () => {
    const p = await klog(['produce', '--broker-list', address, '--topic', 'plain', '--partition', '0', '--key-separator', '|', '--acks', '1'], 'k|v\n');
    expect(p.code, p.stderr).toBe(0);
    expect(storedAttributes('plain')).toEqual([0]);
    const c = await klog(['consume', '--broker', address, '--topic', 'plain', '--print-key', '--max-messages', '1']);
    expect(c.stdout).toBe('\tv\n');
    const m = await klog(['consume', '--broker', address, '--topic', 'plain', '--print-metadata', '--max-messages', '1']);
    expect(m.stdout).toBe('-\t-\tv\n');
    const host = await klog(['produce', '--broker-list', address, '--topic', 'plain', '--host', 'h']);
    expect(host.code).not.toBe(0);
    expect(host.stderr).toMatch(/--host is stored only with --stamp-metadata or --audit/);
    const bad = await klog(['produce', '--broker-list', address, '--topic', 'plain', '--compression', 'snappy']);
    expect(bad.code).not.toBe(0);
    expect(bad.stderr).toMatch(/--compression.*expected none or gzip/);
  });

  it('perf produce --compression gzip, then perf consume reads every message', async () => {
    const p = await klog(['perf', 'produce', '--broker-list', address, '--topic', 'perf-gz', '--messages', '5000', '--size', '100', '--batch-size', '100', '--compression', 'gzip', '--acks', '1', '--json']);
    expect(p.code, p.stderr).toBe(0);
    expect(JSON.parse(p.stdout)).toMatchObject({ messages: 5000, bytes: 500_000, compression: 'gzip' });
    expect(new Set(storedAttributes('perf-gz'))).toEqual(new Set([1]));
    const c = await klog(['perf', 'consume', '--broker', address, '--topic', 'perf-gz', '--messages', '5000', '--json']);
    expect(c.code, c.stderr).toBe(0);
    expect(JSON.parse(c.stdout)).toMatchObject({ messages: 5000, bytes: 500_000 });
  });
});
