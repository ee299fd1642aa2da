/**
 * kcat (librdkafka 2.0, Debian's `kcat`) against the Kafka listener, unmodified: what it
 * produces reads back identically through kcat and through `klog consume`; what `klog produce`
 * wrote reads back identically through kcat; keys survive both ways; `kcat -L` lists the broker,
 * topics and partitions; `kcat -e` exits at the end of the partition because the high watermark
 * is the last message's offset + 1; `kcat -Q` (ListOffsets v1 by time) answers the first message
 * whose timestamp is at or after the time, the earliest offset for a time before every message,
 * -1 only for a time after them all.
 */
import { existsSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker, klog, lines, run } from './harness.js';

/** A real text file of whole lines: the system's dpkg log, else a generated one. */
function textFile(): Buffer {
  const path = '/var/log/dpkg.log';
  const text = existsSync(path) ? readFileSync(path) : Buffer.from(Array.from({ length: 5000 }, (_, i) => `line ${i} ${'x'.repeat(i % 300)}`).join('\n') + '\n');
  const end = text.lastIndexOf(10);
  return text.subarray(0, end + 1); // whole lines, each ending in \n; kcat -C prints one \n after each
}

let broker: Broker;
beforeAll(async () => {
  broker = await Broker.start();
});
afterAll(async () => {
  await broker?.remove();
});

const kcat = (args: string[], input?: Buffer | string) => run('kcat', ['-b', broker.kafka, ...args], { input, timeoutMs: 60_000 });

describe('kcat against the Kafka listener', () => {
  it('kcat -P of a text file reads back byte-identical through kcat -C -e and klog consume', async () => {
    const text = textFile();
    const p = await kcat(['-P', '-t', 'kcat-text'], text);
    expect(p.code, p.stderr).toBe(0);
    const c = await kcat(['-C', '-e', '-o', 'beginning', '-t', 'kcat-text']);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout.equals(text)).toBe(true);
    const k = await klog(['consume', '--broker', broker.klog, '--topic', 'kcat-text', '--offset', 'earliest', '--idle-timeout-ms', '1500']);
    expect(k.code, k.stderr).toBe(0);
    expect(k.stdout.equals(text)).toBe(true);
  });

  it('klog produce of a text file reads back byte-identical through kcat -C -e', async () => {
    const text = textFile();
    const p = await klog(['produce', '--broker-list', broker.klog, '--topic', 'klog-text'], { input: text });
    expect(p.code, p.stderr).toBe(0);
    const c = await kcat(['-C', '-e', '-o', 'beginning', '-t', 'klog-text']);
    expect(c.code, c.stderr).toBe(0);
    expect(c.stdout.equals(text)).toBe(true);
  });

  it('keys survive both ways: kcat -K: to klog consume --print-key, klog produce --key-separator to kcat -K:', async () => {
    const keyed = 'alpha:1\nbeta:two\ngamma:\n';
    expect((await kcat(['-P', '-t', 'kcat-keys', '-K:'], keyed)).code).toBe(0);
    expect((await kcat(['-C', '-e', '-o', 'beginning', '-t', 'kcat-keys', '-K:'])).stdout.toString()).toBe(keyed);
    const k = await klog(['consume', '--broker', broker.klog, '--topic', 'kcat-keys', '--offset', 'earliest', '--idle-timeout-ms', '1500', '--print-key']);
    expect(lines(k.stdout)).toEqual(['alpha\t1', 'beta\ttwo', 'gamma\t']);

    const p = await klog(['produce', '--broker-list', broker.klog, '--topic', 'klog-keys', '--key-separator', ':', '--stamp-metadata'], { input: keyed });
    expect(p.code, p.stderr).toBe(0);
    expect((await kcat(['-C', '-e', '-o', 'beginning', '-t', 'klog-keys', '-K:'])).stdout.toString()).toBe(keyed);
  });

  it('the high watermark is the last message offset + 1: kcat -e stops exactly there', async () => {
    expect((await kcat(['-P', '-t', 'kcat-end'], 'one\ntwo\nthree\n')).code).toBe(0);
    const c = await kcat(['-C', '-e', '-o', 'beginning', '-t', 'kcat-end', '-f', '%o %s\n']);
    expect(c.code, c.stderr).toBe(0);
    const got = lines(c.stdout).map((l) => l.split(' '));
    expect(got.map((g) => g[1])).toEqual(['one', 'two', 'three']);
    const offsets = got.map((g) => Number(g[0]));
    // klog byte offsets: 10 bytes of message head, 2 + 11 of metadata header (kcat's timestamp), 3 of value.
    expect(offsets).toEqual([0, 26, 52]);
    const last = offsets[2]!;
    const end = await klog(['offsets', '--broker', broker.klog, '--topic', 'kcat-end', '--time', 'latest']);
    const visibleEnd = Number(lines(end.stdout).at(-1));
    expect(visibleEnd).toBeGreaterThan(last + 1);
    // librdkafka reports the end at the high watermark it was given: last offset + 1.
    expect(c.stderr).toContain(`Reached end of topic kcat-end [0] at offset ${last + 1}`);
    // A fetch from inside the last message starts at the next message: none, the end.
    const tail = await kcat(['-C', '-e', '-o', String(last + 1), '-t', 'kcat-end']);
    expect(tail.code).toBe(0);
    expect(tail.stdout.length).toBe(0);
    // From inside the first message: the second one on.
    const mid = await kcat(['-C', '-e', '-o', String(offsets[0]! + 3), '-t', 'kcat-end']);
    expect(lines(mid.stdout)).toEqual(['two', 'three']);
  });

  it('kcat -L lists the broker, the topics and their partitions', async () => {
    await kcat(['-P', '-t', 'kcat-listed'], 'x\n');
    const l = await kcat(['-L']);
    expect(l.code, l.stderr).toBe(0);
    const text = l.stdout.toString();
    expect(text).toContain(`broker 0 at ${broker.kafka}`);
    expect(text).toContain('topic "kcat-listed" with 1 partitions:');
    expect(text).toMatch(/partition 0, leader 0, replicas: 0, isrs: 0/);
  });

  it('kcat -Q answers the first message at or after a time: the earliest offset for time 0, -1 after every message', async () => {
    expect((await kcat(['-P', '-t', 'kcat-times'], 'first\n')).code).toBe(0);
    await new Promise((r) => setTimeout(r, 50));
    expect((await kcat(['-P', '-t', 'kcat-times'], 'second\nthird\n')).code).toBe(0);
    const c = await kcat(['-C', '-e', '-o', 'beginning', '-t', 'kcat-times', '-f', '%T %o %s\n']);
    const got = lines(c.stdout).map((l) => l.split(' ').map((x, i) => (i < 2 ? Number(x) : x)) as [number, number, string]);
    expect(got.map((g) => g[2])).toEqual(['first', 'second', 'third']);
    const [t1, o1] = got[0]!;
    const [t2, o2] = got[1]!;
    expect(t2).toBeGreaterThan(t1);
    const query = async (topic: string, time: number) => {
      const q = await kcat(['-Q', '-t', `${topic}:0:${time}`]);
      expect(q.code, q.stderr).toBe(0);
      return Number(/offset (-?\d+)/.exec(q.stdout.toString())?.[1]);
    };
    expect(await query('kcat-times', 0)).toBe(o1);
    expect(await query('kcat-times', t1)).toBe(o1);
    expect(await query('kcat-times', t1 + 1)).toBe(o2);
    expect(await query('kcat-times', t2)).toBe(o2);
    expect(await query('kcat-times', Date.now() + 3_600_000)).toBe(-1);
    // Messages without a timestamp (klog produce) count as written when their segment was last written.
    const p = await klog(['produce', '--broker-list', broker.klog, '--topic', 'klog-times', '--acks', '2'], { input: 'a\nb\n' });
    expect(p.code, p.stderr).toBe(0);
    expect(await query('klog-times', 0)).toBe(0);
    expect(await query('klog-times', Date.now() + 3_600_000)).toBe(-1);
  });
});
