/**
 * The Kafka listener's fetch memory (`kafka.fetch.memory.bytes`, docs/kafka-protocol.md): fetch
 * answers are built in memory and held until they leave the socket's buffer, so over all
 * connections they stay within the budget, plus the first message of each fetch (served whole
 * even when the budget is spent, so no consumer stalls). Clients that ask for 100 MiB of a
 * partition of tens of MiB and never read their sockets do not take the broker's memory with
 * them, another consumer is still served at once, and the bytes go back when they close; a
 * budget smaller than a message still answers every fetch with its first message.
 */
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { rssMiB } from '@klog/broker/testing';
import { ApiKey, encodeRequest } from '@klog/kafka-protocol';
import { afterEach, describe, expect, it } from 'vitest';
import { Broker, sleep, waitFor } from './harness.js';
import { KafkaWire } from './wire.js';
import { fetchValues, produce } from './replicated-wire.js';

const brokers: Broker[] = [];
const sockets: Socket[] = [];
afterEach(async () => {
  for (const s of sockets.splice(0)) s.destroy();
  for (const b of brokers.splice(0)) await b.remove();
});

/**
 * Above what the kernel's buffers of one loopback connection take in (`tcp_wmem` up to 4 MiB, a
 * small receive window), so a stalled answer stays in the broker.
 */
const budget = 16 * 1024 * 1024;
const valueBytes = 100_000;
/** A Kafka message (magic 1) of one value of {@link valueBytes}: offset, size, crc, magic, attributes, timestamp, key and value lengths. */
const kafkaMessageBytes = 8 + 4 + 4 + 1 + 1 + 8 + 4 + 4 + valueBytes;

/** `klog_kafka_fetch_memory_bytes` scraped from the broker's metrics endpoint. */
async function heldBytes(metricsPort: number): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith('klog_kafka_fetch_memory_bytes '));
  if (line === undefined) throw new Error('no klog_kafka_fetch_memory_bytes metric');
  return Number(line.split(' ')[1]);
}

/** A Fetch v2 frame of `topic` partition 0 from offset 0 asking for `maxBytes`, waiting for none. */
function fetchFrame(topic: string, maxBytes: number): Buffer {
  return encodeRequest({ apiKey: ApiKey.Fetch, apiVersion: 2, correlationId: 1, clientId: 'stalled' }, (w) =>
    w
      .int32(-1)
      .int32(0)
      .int32(0)
      .array([topic], (w, t) => w.string(t).array([0], (w, p) => w.int32(p).int64(0).int32(maxBytes))),
  );
}

describe('the Kafka listener’s fetch memory', () => {
  it('holds 10 stalled 100 MiB fetches of a 40 MB partition within kafka.fetch.memory.bytes, serves another consumer at once, and gives the bytes back', async () => {
    const b = await Broker.start(['--kafka-fetch-memory-bytes', String(budget), '--metrics-port', '0']);
    brokers.push(b);
    const metricsPort = b.logs.find((l) => l.msg === 'broker listening')!.metricsPort as number;
    const w = await KafkaWire.open(b.kafka);
    sockets.push(w.socket);
    const value = 'v'.repeat(valueBytes);
    for (let i = 0; i < 40; i++) expect((await produce(w, 'big', 0, 1, Array.from({ length: 10 }, () => value))).error).toBe(0);
    let hw = -1;
    await waitFor('the 400 messages flushed', async () => {
      const now = (await fetchValues(w, 'big', 0, 0)).highWatermark;
      const same = now === hw && now >= 390 * valueBytes;
      hw = now;
      return same;
    }, 15_000);
    expect(await heldBytes(metricsPort)).toBe(0);
    const baseline = rssMiB(b.proc.pid!);

    const stalled = 10;
    for (let i = 0; i < stalled; i++) {
      const s = connect(b.kafkaPort, '127.0.0.1');
      sockets.push(s);
      s.on('error', () => {});
      await once(s, 'connect');
      s.pause(); // never read: the answer stays in the broker's socket buffer
      s.write(fetchFrame('big', 100 * 1024 * 1024));
    }
    const bound = budget + stalled * kafkaMessageBytes;
    await waitFor('the stalled fetches answered', async () => (await heldBytes(metricsPort)) > 0, 10_000);
    let peak = 0;
    let peakRss = 0;
    for (let i = 0; i < 20; i++) {
      peak = Math.max(peak, await heldBytes(metricsPort));
      peakRss = Math.max(peakRss, rssMiB(b.proc.pid!));
      await sleep(100);
    }
    expect(peak).toBeGreaterThan(0); // answers are held: the clients are stalled
    expect(peak).toBeLessThanOrEqual(bound);
    // 10 answers of the whole partition would be 400 MB; within the budget it is a few MiB.
    console.log(`fetch memory held: peak ${peak} bytes (bound ${bound}); RSS ${baseline} MiB before, peak ${peakRss} MiB with ${stalled} stalled fetches`);
    expect(peakRss - baseline).toBeLessThan(150);

    // Another consumer's fetch is answered at once, with at least one message.
    const started = Date.now();
    const answer = await fetchValues(w, 'big', 0, 0);
    expect(answer.error).toBe(0);
    expect(answer.values.length).toBeGreaterThanOrEqual(1);
    expect(answer.values[0]).toBe(value);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(await heldBytes(metricsPort)).toBeLessThanOrEqual(bound);

    // The stalled clients close: every byte held goes back.
    for (const s of sockets.splice(1)) s.destroy();
    await waitFor('the held bytes back to 0', async () => (await heldBytes(metricsPort)) === 0, 10_000);
  }, 120_000);

  it('answers one message at a time, each whole and in order, when the budget is smaller than a message', async () => {
    const b = await Broker.start(['--kafka-fetch-memory-bytes', '100']);
    brokers.push(b);
    const w = await KafkaWire.open(b.kafka);
    sockets.push(w.socket);
    const values = Array.from({ length: 5 }, (_, i) => `message ${i} `.repeat(20));
    expect((await produce(w, 'small', 0, 1, values)).error).toBe(0);
    await waitFor('the messages flushed', async () => (await fetchValues(w, 'small', 0, 0)).highWatermark > 0, 15_000); // one append: flushed at once
    const read: string[] = [];
    let offset = 0;
    while (read.length < values.length) {
      const answer = await fetchValues(w, 'small', 0, offset);
      expect(answer.error).toBe(0);
      expect(answer.values).toHaveLength(1); // a 1 MiB fetch, cut to its first message by the budget
      read.push(answer.values[0]!);
      offset = answer.offsets[0]! + 1;
    }
    expect(read).toEqual(values);
  });
});
