/**
 * The Kafka listener under the broker's connection limits, shared with klog's own listener
 * (docs/format.md §5, connection limits): `max.connections` counts the connections of both and
 * refuses one more with a log line; a half-sent Kafka frame is closed after
 * `connections.max.idle.ms`; the request bytes buffered over all connections stay within
 * `queued.max.request.bytes` (10 connections each holding most of a 60 MiB frame keep the
 * broker's RSS low), and the memory goes back.
 */
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { rssFallsBelow, rssMiB, rssWhile, sendAllButLastByte } from '@klog/broker/testing';
import { ApiKey } from '@klog/kafka-protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { Broker, sleep, waitFor } from './harness.js';
import { KafkaWire } from './wire.js';

const brokers: Broker[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const b of brokers.splice(0)) await b.remove();
});

async function start(args: string[]): Promise<Broker> {
  const b = await Broker.start(args);
  brokers.push(b);
  return b;
}

async function open(port: number): Promise<Socket> {
  const s = connect(port, '127.0.0.1');
  sockets.push(s);
  s.on('error', () => {});
  await once(s, 'connect');
  return s;
}

/** Resolves when `s` closes (an error before, such as ECONNRESET, does not reject). */
function closedOf(s: Socket): Promise<void> {
  return new Promise((resolve) => (s.destroyed ? resolve() : s.once('close', () => resolve())));
}

/** `p`, or a rejection naming `what` after `ms`. */
function within<T>(ms: number, what: string, p: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not within ${ms} ms`)), ms)));
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

/** The head of a Kafka request frame of `size` bytes: ApiVersions v0, correlation id 1, client id "x". */
function frameHead(size: number): Buffer {
  const head = Buffer.alloc(4 + 2 + 2 + 4 + 2 + 1);
  head.writeInt32BE(size, 0);
  head.writeInt16BE(ApiKey.ApiVersions, 4);
  head.writeInt16BE(0, 6);
  head.writeInt32BE(1, 8);
  head.writeInt16BE(1, 12);
  head.write('x', 14);
  return head;
}

describe('the Kafka listener under the broker’s connection limits', () => {
  it('counts its connections in max.connections with klog’s, and refuses one more with a log line', async () => {
    const b = await start(['--max-connections', '3']);
    await open(b.port);
    await open(b.port);
    const kafka = await KafkaWire.open(b.kafka);
    sockets.push(kafka.socket);
    const extra = await open(b.kafkaPort);
    await within(10_000, 'the connection past max.connections closed', closedOf(extra));
    await waitFor('the refusal logged', () => b.logs.some((l) => l.msg === 'connection refused: max.connections reached'), 5000);
    expect(b.logs.find((l) => l.msg === 'connection refused: max.connections reached')).toMatchObject({ maxConnections: 3, refused: 1, listener: 'kafka' });
    // The Kafka connection admitted is served.
    expect((await kafka.call(ApiKey.ApiVersions, 0, () => {})).int16()).toBe(0);
    // A klog connection past the limit is refused too.
    const klogExtra = await open(b.port);
    await within(10_000, 'the klog connection past max.connections closed', closedOf(klogExtra));
  });

  it('closes a connection holding a half-sent Kafka frame after connections.max.idle.ms', async () => {
    const b = await start(['--connections-max-idle-ms', '1000']);
    const s = await open(b.kafkaPort);
    s.write(frameHead(1000)); // 15 of 1004 bytes, never the rest
    const closed = closedOf(s);
    const started = Date.now();
    await within(10_000, 'the half-sent frame closed', closed);
    expect(Date.now() - started).toBeGreaterThanOrEqual(900);
    expect(b.logs.find((l) => l.msg === 'closing idle connection')).toMatchObject({ maxIdleMs: 1000, bufferedBytes: 15 });
    // A connection that keeps completing requests is not idle.
    const w = await KafkaWire.open(b.kafka);
    sockets.push(w.socket);
    for (let i = 0; i < 6; i++) {
      expect((await w.call(ApiKey.ApiVersions, 0, () => {})).int16()).toBe(0);
      await sleep(300);
    }
    expect(w.socket.destroyed).toBe(false);
  });

  it('holds 10 connections of 60 MiB half-sent Kafka frames under 300 MiB RSS, closes them when idle, and gives the memory back', async () => {
    const b = await start(['--connections-max-idle-ms', '4000']);
    const pid = b.proc.pid!;
    const baseline = rssMiB(pid);
    const frameBytes = 60 * 1024 * 1024;
    const closed: Promise<unknown>[] = [];
    const writers = Array.from({ length: 10 }, async () => {
      const s = await open(b.kafkaPort);
      closed.push(closedOf(s));
      await sendAllButLastByte(s, frameHead(frameBytes), frameBytes);
    });
    // The frames are held for 2.5 s, then the idle timeout closes every one of them.
    const { held, peak } = await rssWhile(pid, 2500, async () => {
      await waitFor('10 connections open', () => closed.length === 10, 10_000);
      await within(30_000, 'the idle timeout closing every one of them', Promise.all(closed));
      await Promise.all(writers);
    });
    expect(held).toBeLessThan(300);
    expect(peak).toBeLessThan(300);
    await waitFor('10 idle closes logged', () => b.logs.filter((l) => l.msg === 'closing idle connection').length >= 10, 5000);
    // The memory goes back once V8 collects the frame buffers: an idle broker may take tens of seconds to.
    const after = await rssFallsBelow(pid, baseline + 40, 60_000);
    expect(after).toBeLessThan(baseline + 40);
    // And the listener still serves.
    const w = await KafkaWire.open(b.kafka);
    sockets.push(w.socket);
    expect((await w.call(ApiKey.ApiVersions, 0, () => {})).int16()).toBe(0);
  }, 180_000);
});
