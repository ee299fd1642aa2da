/**
 * `klog consume` and `klog offsets` as users run them (real processes, a real broker): output
 * formats, stop at the end, the last N messages, and a topic or partition that does not exist.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBroker, type Broker } from '@klog/broker';
import { Producer } from '@klog/client';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runKlog } from './cli-run.js';

describe('klog consume / offsets', () => {
  let work: string;
  let broker: Broker;
  let address: string;
  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'klog-consume-test-'));
    broker = await startBroker({ logDir: join(work, 'logs'), host: '127.0.0.1', port: 0, numPartitions: 2, flushIntervalMs: 20 }, pino({ level: 'silent' }));
    address = `127.0.0.1:${broker.port}`;
    const lines = Array.from({ length: 10 }, (_, i) => `k${i}|v${i}`).join('\n');
    for (const args of [
      ['--topic', 'events', '--partition', '1', '--key-separator', '|', '--stamp-metadata', '--host', 'h1'],
      // Sets of 4, then plain messages: the last N may start inside a compressed set.
      ['--topic', 'mixed', '--partition', '0', '--compression', 'gzip', '--batch-size', '4', '--linger-ms', '200'],
    ]) {
      const r = await runKlog(['produce', '--broker-list', address, '--acks', '2', ...args], `${lines}\n`);
      expect(r.code, r.stderr).toBe(0);
    }
    await runKlog(['produce', '--broker-list', address, '--acks', '2', '--topic', 'mixed', '--partition', '0'], 'p1\np2\n');
  });
  afterAll(async () => {
    await broker.close();
    rmSync(work, { recursive: true, force: true });
  });

  /** `klog consume --broker <address> args...`, stopping after 1 s of nothing new at worst. */
  const consume = (...args: string[]) => runKlog(['consume', '--broker', address, '--max-wait-ms', '100', ...args]);

  it('an unknown topic or partition is one line naming what exists, exit 1 (simple consume and offsets)', async () => {
    for (const r of [await consume('--topic', 'nope', '--idle-timeout-ms', '500'), await runKlog(['offsets', '--broker', address, '--topic', 'nope'])]) {
      expect(r.code).toBe(1);
      expect(r.stdout).toBe('');
      expect(r.stderr).toMatch(/^klog (consume|offsets): error: unknown topic "nope" \(known: events, mixed\) on broker 127\.0\.0\.1:\d+\n$/);
    }
    const wrongPartition = await runKlog(['offsets', '--broker', address, '--topic', 'events', '--partition', '7']);
    expect(wrongPartition.code).toBe(1);
    expect(wrongPartition.stderr).toMatch(/^klog offsets: error: unknown partition 7 of topic "events" \(partitions: 0-1\) on broker/);
  });

  it('--exit-at-end stops at the end; --format prints kcat-like fields; --json one object per line', async () => {
    const formatted = await consume('--topic', 'events', '--partition', '1', '-e', '--format', '%t %p %o %k=%s %T %h\\n');
    expect(formatted.code, formatted.stderr).toBe(0);
    const lines = formatted.stdout.trimEnd().split('\n');
    expect(lines).toHaveLength(10);
    for (const [i, line] of lines.entries()) expect(line).toMatch(new RegExp(`^events 1 \\d+ k${i}=v${i} \\d{13} h1$`));
    const json = await consume('--topic', 'events', '--partition', '1', '--exit-at-end', '--json', '--max-messages', '2');
    const objects = json.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(objects.map((o) => [o.topic, o.partition, o.key, o.payload, o.host])).toEqual([
      ['events', 1, 'k0', 'v0', 'h1'],
      ['events', 1, 'k1', 'v1', 'h1'],
    ]);
    expect(objects[1]!.offset).toBeGreaterThan(objects[0]!.offset as number);
    // An empty partition with -e: nothing, at once.
    const empty = await consume('--topic', 'events', '--partition', '0', '-e');
    expect(empty).toMatchObject({ code: 0, stdout: '' });
    expect((await consume('--topic', 'events', '--json', '--print-key')).stderr).toMatch(/--json does not go with --print-key/);
    expect((await consume('--topic', 'events', '--format', '%x')).stderr).toMatch(/unknown token %x/);
  });

  it('--exit-at-end from a byte offset past the log end is OffsetOutOfRange, as without -e', async () => {
    const end = Number((await runKlog(['offsets', '--broker', address, '--topic', 'events', '--partition', '1'])).stdout.trim());
    expect(end).toBeGreaterThan(0);
    const past = await consume('--topic', 'events', '--partition', '1', '--offset', String(end + 1000), '-e');
    expect(past.code).toBe(1);
    expect(past.stdout).toBe('');
    expect(past.stderr).toMatch(new RegExp(`^klog consume: error: OffsetOutOfRange \\[code 1\\].*offset ${end + 1000}.*the partition holds \\[0, ${end}\\]\n$`));
    // At the end exactly: nothing to print, exit 0.
    expect(await consume('--topic', 'events', '--partition', '1', '--offset', String(end), '-e')).toMatchObject({ code: 0, stdout: '' });
  });

  it('offsets --time takes Kafka\'s -1 (latest) and -2 (earliest) too, and its help names the default', async () => {
    const offsets = (time: string) => runKlog(['offsets', '--broker', address, '--topic', 'events', '--partition', '1', '--time', time]);
    const [latest, earliest] = [await offsets('latest'), await offsets('earliest')];
    expect(Number(latest.stdout)).toBeGreaterThan(0);
    expect(await offsets('-1')).toMatchObject({ code: 0, stdout: latest.stdout });
    expect(await offsets('-2')).toMatchObject({ code: 0, stdout: earliest.stdout });
    expect((await offsets('-3')).code).toBe(2); // a usage error
    expect((await runKlog(['offsets', '--help'])).stdout).toMatch(/--time <latest\|earliest\|ms>[^]*\(default: latest\)/);
  });

  it('--offset -N prints the last N messages, also from inside a compressed set', async () => {
    const all = ['k0|v0', 'k1|v1', 'k2|v2', 'k3|v3', 'k4|v4', 'k5|v5', 'k6|v6', 'k7|v7', 'k8|v8', 'k9|v9', 'p1', 'p2'];
    for (const n of [1, 2, 3, 5, 12, 50]) {
      const r = await consume('--topic', 'mixed', '--offset', `-${n}`, '-e');
      expect(r.code, r.stderr).toBe(0);
      expect(r.stdout.trimEnd().split('\n'), `-${n}`).toEqual(all.slice(-n));
    }
    const keyed = await consume('--topic', 'events', '--partition', '1', '--offset', '-2', '-e', '--print-key');
    expect(keyed.stdout).toBe('k8\tv8\nk9\tv9\n');
  });

  it('produce warns when keys choose the partition but are not stored', async () => {
    const r = await runKlog(['produce', '--broker-list', address, '--topic', 'events', '--key-separator', '|'], 'a|b\n');
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/^klog produce: warning: keys \(--key-separator\) choose the partition but are not stored; add --stamp-metadata to store them$/m);
    const stored = await runKlog(['produce', '--broker-list', address, '--topic', 'events', '--key-separator', '|', '--stamp-metadata'], 'a|b\n');
    expect(stored.stderr).not.toMatch(/warning/);
  });

  // Last: it adds a topic, which the 'unknown topic' answers above would list.
  it('--json gives bytes that are not UTF-8 in base64, so no byte is lost', async () => {
    const binary = Buffer.from([0xff, 0xfe, 0x00, 0x80, 0x41]);
    const producer = new Producer({ brokerList: address, acks: 2, lingerMs: 0, stampMetadata: true });
    try {
      await producer.send('binary', [{ value: binary, key: Buffer.from([0xc3, 0x28]), partition: 0 }, { value: 'plain', key: 'k', partition: 0 }]);
    } finally {
      await producer.close();
    }
    const r = await consume('--topic', 'binary', '--partition', '0', '-e', '--json');
    expect(r.code, r.stderr).toBe(0);
    const [first, second] = r.stdout.trimEnd().split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(first).toMatchObject({ payload: binary.toString('base64'), payloadEncoding: 'base64', key: 'wyg=', keyEncoding: 'base64' });
    expect(Buffer.from(first!.payload as string, 'base64').equals(binary)).toBe(true);
    expect(second).toMatchObject({ payload: 'plain', key: 'k' });
    expect(second).not.toHaveProperty('payloadEncoding');
    expect(second).not.toHaveProperty('keyEncoding');
  });
});
