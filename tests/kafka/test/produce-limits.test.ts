/**
 * `max.message.bytes` through the Kafka listener (docs/kafka-protocol.md, "Messages"): a Produce
 * whose message is over the limit, plain or inside a gzip wrapper, gets MESSAGE_TOO_LARGE (10)
 * and appends nothing, with acks -1 and 1; one at the limit's side of it is appended; the
 * broker stays up and serves what was appended.
 */
import { ApiKey, gzipKafkaMessageSet } from '@klog/kafka-protocol';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker } from './harness.js';
import { fetchValues, listOffset, produce } from './replicated-wire.js';
import { KafkaWire } from './wire.js';

const MAX = 1000;

describe('max.message.bytes through the Kafka listener', () => {
  let broker: Broker;
  let wire: KafkaWire;
  beforeAll(async () => {
    broker = await Broker.start(['--num-partitions', '1', '--max-message-bytes', String(MAX)]);
    wire = await KafkaWire.open(broker.kafka);
  });
  afterAll(async () => {
    wire?.close();
    await broker?.stop();
  });

  it('refuses a message over the limit with MESSAGE_TOO_LARGE and appends nothing; one under it is appended', async () => {
    const topic = 'limited';
    expect((await produce(wire, topic, 0, -1, ['small'])).error).toBe(0);
    const end = (await listOffset(wire, topic, 0, -1)).offset;
    for (const acks of [-1, 1]) {
      expect((await produce(wire, topic, 0, acks, ['x'.repeat(MAX + 1)])).error).toBe(10);
      expect((await produce(wire, topic, 0, acks, ['fits', 'y'.repeat(2 * MAX)])).error).toBe(10); // the whole set is refused
    }
    const gzipped = await gzipKafkaMessageSet([{ key: null, value: Buffer.alloc(2 * MAX, 'z') }], 1);
    const r = await wire.call(ApiKey.Produce, 2, (w) =>
      w
        .int16(-1)
        .int32(30_000)
        .array([topic], (w, t) => w.string(t).array([0], (w, p) => w.int32(p).bytes(gzipped))),
    );
    expect(r.array((r) => (r.string(), r.array((r) => (r.int32(), r.int16()))))[0]![0]).toBe(10);
    expect((await listOffset(wire, topic, 0, -1)).offset).toBe(end);
    expect((await produce(wire, topic, 0, -1, ['w'.repeat(MAX - 100)])).error).toBe(0);
    expect((await fetchValues(wire, topic, 0, 0)).values).toEqual(['small', 'w'.repeat(MAX - 100)]);
  });
});
