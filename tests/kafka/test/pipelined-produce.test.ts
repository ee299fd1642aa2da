/**
 * Produce requests sent back to back on one connection, as librdkafka sends them
 * (docs/kafka-protocol.md, "Messages", requests of one connection): mostly acks -1, every fourth
 * acks 1, whose answer is ready at once and must still wait for the acks -1 answers before it.
 * The broker appends each while the ones before it wait for their flush, answers all in order,
 * and handles any other request only once every produce before it is answered (a ListOffsets
 * between them sees each earlier produce). The requests are over 64 KiB, so each is cut from
 * several socket chunks and copied together in the listener's pooled buffers, and converted in
 * its shared buffer; with three connections at once (one sending gzip, inflated off the event
 * loop while its request is held) what each reads back is its own values, in order.
 */
import { randomBytes } from 'node:crypto';
import { gzipKafkaMessageSet } from '@klog/kafka-protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker } from './harness.js';
import { fetchValues, listOffset, produce, produceSet } from './replicated-wire.js';
import { KafkaWire } from './wire.js';

const REQUESTS = 24;
const VALUES_PER_REQUEST = 300;
/** Values of 400 random base64 characters: a request of ~130 KB, ~100 KB gzipped. */
const valuesOf = (): string[] => Array.from({ length: VALUES_PER_REQUEST }, () => randomBytes(300).toString('base64'));

/** `values` as one gzip wrapper. */
const gzipped = (values: readonly string[]): Promise<Buffer> =>
  gzipKafkaMessageSet(
    values.map((v) => ({ key: null, value: Buffer.from(v), timestamp: Date.now() })),
    1,
  );

describe('Produce with acks -1 pipelined on one connection', () => {
  let broker: Broker;
  let wire: KafkaWire;
  beforeAll(async () => {
    broker = await Broker.start(['--num-partitions', '1']);
    wire = await KafkaWire.open(broker.kafka);
  });
  afterAll(async () => {
    wire?.close();
    await broker?.stop();
  });

  it('answers every produce in order, a ListOffsets between them after the produces before it are flushed, and reads back every value', async () => {
    await burst(wire, 'pipelined');
  });

  it('three connections bursting at once, one with gzip, each read back their own values', async () => {
    const others = [await KafkaWire.open(broker.kafka), await KafkaWire.open(broker.kafka)];
    try {
      await Promise.all([burst(wire, 'pipelined-a'), burst(others[0]!, 'pipelined-b'), burst(others[1]!, 'pipelined-c', true)]);
    } finally {
      for (const w of others) w.close();
    }
  });
});

/** Produces {@link REQUESTS} sets to `topic` without waiting, ListOffsets between them, and checks the answers and what is read back. */
async function burst(wire: KafkaWire, topic: string, gzip = false): Promise<void> {
  expect((await produce(wire, topic, 0, -1, ['first'])).error).toBe(0); // the topic exists before the burst
  // Sent without waiting: a produce, and after every third a ListOffsets of the latest offset.
  const values = Array.from({ length: REQUESTS }, valuesOf);
  const sets = gzip ? await Promise.all(values.map(gzipped)) : [];
  const produces: Promise<{ error: number; offset: number }>[] = [];
  const latest: { after: number; answer: Promise<{ error: number; offset: number }> }[] = [];
  for (let r = 0; r < REQUESTS; r++) {
    const acks = r % 4 === 3 ? 1 : -1;
    produces.push(gzip ? produceSet(wire, topic, 0, acks, sets[r]!) : produce(wire, topic, 0, acks, values[r]!));
    if (r % 3 === 2) latest.push({ after: r, answer: listOffset(wire, topic, 0, -1) });
  }
  const answers = await Promise.all(produces);
  for (const a of answers) expect(a.error).toBe(0);
  const bases = answers.map((a) => a.offset);
  for (let r = 1; r < REQUESTS; r++) expect(bases[r]).toBeGreaterThan(bases[r - 1]!);
  const end = (await listOffset(wire, topic, 0, -1)).offset;
  for (const { after, answer } of latest) {
    const { error, offset } = await answer;
    expect(error).toBe(0);
    // The high watermark is the last visible message's offset + 1: at or past the last acks -1
    // produce up to `after` (flushed before the ListOffsets was handled; an acks 1 answer comes
    // once appended), and before the produce after `after` (not handled yet).
    let flushed = after;
    while (flushed % 4 === 3) flushed--;
    expect(offset - 1).toBeGreaterThanOrEqual(bases[flushed]!);
    expect(offset - 1).toBeLessThan(after + 1 < REQUESTS ? bases[after + 1]! : end);
  }
  const read: string[] = [];
  for (let offset = bases[0]!; offset < end; ) {
    const f = await fetchValues(wire, topic, 0, offset);
    expect(f.error).toBe(0);
    read.push(...f.values);
    offset = f.offsets[f.offsets.length - 1]! + 1;
  }
  expect(read).toEqual(values.flat());
}
