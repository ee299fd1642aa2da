/**
 * 10,000 hostile requests on the Kafka port: random bytes, requests recorded from kcat and
 * kafkajs (packages/kafka-protocol/fixtures) with bytes mutated, and huge or negative sizes and
 * counts. The broker stays up, answers the real clients afterwards, logs no internal error, and
 * the data stored before reads back identically through both protocols.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker, klog, run } from './harness.js';

const fixtureDir = join(dirname(fileURLToPath(import.meta.url)), '../../../packages/kafka-protocol/fixtures');
const fixtures = readdirSync(fixtureDir)
  .filter((n) => n.endsWith('.hex'))
  .map((n) => Buffer.from(readFileSync(join(fixtureDir, n), 'utf8').replace(/\s/g, ''), 'hex'));

/** A small deterministic generator, so a failing run can be repeated. */
function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => ((s = (Math.imul(s ^ (s >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0) / 2 ** 32);
}

function hostileRequest(i: number, next: () => number): Buffer {
  const kind = i % 4;
  const pick = (n: number) => Math.floor(next() * n);
  if (kind === 0) {
    // Random bytes behind a size that matches them.
    const body = randomBytes(1 + pick(200));
    const f = Buffer.alloc(4 + body.length);
    f.writeInt32BE(body.length, 0);
    body.copy(f, 4);
    return f;
  }
  const base = Buffer.from(fixtures[pick(fixtures.length)]!);
  if (kind === 1 || kind === 2) {
    // A recorded request with 1-4 bytes after the size changed (kind 2: only in the body, after the header).
    const from = kind === 1 ? 4 : Math.min(base.length - 1, 14);
    for (let k = 1 + pick(4); k > 0; k--) base[from + pick(base.length - from)] = pick(256);
    return base;
  }
  // Huge or impossible sizes and counts.
  const huge = [0x7fffffff, -1, -0x80000000, 1 << 30, 0, 3];
  if (pick(2) === 0) {
    base.writeInt32BE(huge[pick(huge.length)]!, 0);
    return base;
  }
  const at = 14 + pick(Math.max(1, base.length - 18));
  base.writeInt32BE(huge[pick(huge.length)]!, Math.min(at, base.length - 4));
  return base;
}

/** Sends one request on its own connection, then waits for the broker to answer or close (at most 2 s). */
function send(port: number, frame: Buffer): Promise<void> {
  return new Promise((resolve) => {
    const s = connect(port, '127.0.0.1');
    const done = (): void => {
      clearTimeout(timer);
      s.destroy();
      resolve();
    };
    const timer = setTimeout(done, 2000);
    s.on('error', done);
    s.on('close', done);
    s.on('data', done);
    s.on('connect', () => s.write(frame));
  });
}

let broker: Broker;
beforeAll(async () => {
  broker = await Broker.start(['--max-request-bytes', String(1 << 20)]);
});
afterAll(async () => {
  await broker?.remove();
});

describe('hostile requests on the Kafka port', () => {
  it('10,000 of them: the broker stays up and the stored data is intact', async () => {
    const text = Array.from({ length: 2000 }, (_, i) => `stored line ${i} ${'y'.repeat(i % 97)}`).join('\n') + '\n';
    expect((await run('kcat', ['-b', broker.kafka, '-P', '-t', 'intact', '-K:'], { input: text.replace(/^/gm, 'key:').replace(/key:$/, '') })).code).toBe(0);
    const before = await run('kcat', ['-b', broker.kafka, '-C', '-e', '-o', 'beginning', '-t', 'intact', '-K:']);
    expect(before.stdout.toString()).toBe(text.replace(/^/gm, 'key:').replace(/key:$/, ''));

    const next = rng(20261201);
    const total = 10_000;
    const concurrency = 32;
    let sent = 0;
    await Promise.all(
      Array.from({ length: concurrency }, async () => {
        while (sent < total) {
          const i = sent++;
          await send(broker.kafkaPort, hostileRequest(i, next));
        }
      }),
    );
    expect(sent).toBe(total);
    expect(broker.proc.exitCode).toBeNull();
    const refused = broker.logs.filter((l) => typeof l.msg === 'string' && /^bad Kafka request|size out of bounds/.test(l.msg)).length;
    console.log(`hostile: ${refused} refused with the connection closed, the rest answered or dropped by the client`);
    expect(refused).toBeGreaterThan(total / 4);
    const internal = broker.logs.filter((l) => typeof l.level === 'number' && l.level >= 50);
    expect(internal.map((l) => l.msg)).toEqual([]);

    const after = await run('kcat', ['-b', broker.kafka, '-C', '-e', '-o', 'beginning', '-t', 'intact', '-K:']);
    expect(after.code, after.stderr).toBe(0);
    expect(after.stdout.equals(before.stdout)).toBe(true);
    const k = await klog(['consume', '--broker', broker.klog, '--topic', 'intact', '--offset', 'earliest', '--idle-timeout-ms', '1500']);
    expect(k.stdout.toString()).toBe(text);
  }, 300_000);
});
