/**
 * The requests the replicated-topic tests send by hand (Produce v2, Fetch v2, ListOffsets v1,
 * OffsetCommit v2, OffsetFetch v1, and klog's own PRODUCE_ACK), each with its answer for one
 * partition decoded.
 */
import { once } from 'node:events';
import { connect } from 'node:net';
import { ApiKey, decodeKafkaMessageSet, encodeKafkaMessageSet, type KafkaReader } from '@klog/kafka-protocol';
import { AckLevel, Decoder, decodeProduceAckResponse, encodeMessageSet, encodeProduceAckRequest } from '@klog/protocol';
import type { KafkaWire } from './wire.js';

/** Produce v2 of `values` to one partition: its error code and base offset. */
export function produce(w: KafkaWire, topic: string, partition: number, acks: number, values: readonly string[]): Promise<{ error: number; offset: number }> {
  const set = encodeKafkaMessageSet(
    values.map((v) => ({ key: null, value: Buffer.from(v), timestamp: Date.now() })),
    1,
  );
  return produceSet(w, topic, partition, acks, set);
}

/** Produce v2 of the Kafka message set `set` (gzip wrappers too) to one partition: its error code and base offset. */
export async function produceSet(w: KafkaWire, topic: string, partition: number, acks: number, set: Buffer): Promise<{ error: number; offset: number }> {
  const r = await w.call(ApiKey.Produce, 2, (w) =>
    w
      .int16(acks)
      .int32(30_000)
      .array([topic], (w, t) => w.string(t).array([partition], (w, p) => w.int32(p).bytes(set))),
  );
  const [answer] = r.array((r) => (r.string(), r.array((r) => ({ partition: r.int32(), error: r.int16(), offset: r.int64(), time: r.int64() }))))[0]!;
  return { error: answer!.error, offset: answer!.offset };
}

/** Fetch v2 (no waiting) of one partition from `offset`: error code, high watermark, the values served and their offsets. */
export async function fetchValues(
  w: KafkaWire,
  topic: string,
  partition: number,
  offset: number,
): Promise<{ error: number; highWatermark: number; values: string[]; offsets: number[] }> {
  const r = await w.call(ApiKey.Fetch, 2, (w) =>
    w
      .int32(-1)
      .int32(0)
      .int32(0)
      .array([topic], (w, t) => w.string(t).array([partition], (w, p) => w.int32(p).int64(offset).int32(1 << 20))),
  );
  r.int32(); // throttle_time_ms
  const partitionAnswer = (r: KafkaReader) => ({ partition: r.int32(), error: r.int16(), highWatermark: r.int64(), records: r.bytes() });
  const [answer] = r.array((r) => (r.string(), r.array(partitionAnswer)))[0]!;
  const messages = await decodeKafkaMessageSet(answer!.records, { maxInnerBytes: 1 << 20, allowPartialTail: true });
  return { error: answer!.error, highWatermark: answer!.highWatermark, values: messages.map((m) => m.value?.toString() ?? ''), offsets: messages.map((m) => m.offset) };
}

/** ListOffsets v1 of one partition at `timestamp` (-1 latest, -2 earliest, else ms): error code, timestamp and offset. */
export async function listOffset(
  w: KafkaWire,
  topic: string,
  partition: number,
  timestamp: number,
): Promise<{ error: number; timestamp: number; offset: number }> {
  const r = await w.call(ApiKey.ListOffsets, 1, (w) =>
    w.int32(-1).array([topic], (w, t) => w.string(t).array([partition], (w, p) => w.int32(p).int64(timestamp))),
  );
  const partitionAnswer = (r: KafkaReader) => ({ partition: r.int32(), error: r.int16(), timestamp: r.int64(), offset: r.int64() });
  const [answer] = r.array((r) => (r.string(), r.array(partitionAnswer)))[0]!;
  return answer!;
}

/** OffsetCommit v2 outside any generation (generation -1, no member) of one partition: the error code. */
export async function commitOffset(w: KafkaWire, group: string, topic: string, partition: number, offset: number): Promise<number> {
  const r = await w.call(ApiKey.OffsetCommit, 2, (w) =>
    w
      .string(group)
      .int32(-1)
      .string('')
      .int64(-1)
      .array([topic], (w, t) => w.string(t).array([partition], (w, p) => w.int32(p).int64(offset).string(null))),
  );
  return r.array((r) => (r.string(), r.array((r) => (r.int32(), r.int16()))))[0]![0]!;
}

/** OffsetFetch v1 of one partition: the committed offset (-1 for none) and the error code. */
export async function fetchCommitted(w: KafkaWire, group: string, topic: string, partition: number): Promise<{ offset: number; error: number }> {
  const r = await w.call(ApiKey.OffsetFetch, 1, (w) => w.string(group).array([topic], (w, t) => w.string(t).array([partition], (w, p) => w.int32(p))));
  const partitionAnswer = (r: KafkaReader) => ({ partition: r.int32(), offset: r.int64(), metadata: r.nullableString(), error: r.int16() });
  const [answer] = r.array((r) => (r.string(), r.array(partitionAnswer)))[0]!;
  return { offset: answer!.offset, error: answer!.error };
}

/**
 * klog's own PRODUCE_ACK with acks 2 (docs/format.md §11) of one message to a partition of the
 * broker at `hostPort`: answered once the broker flushed it (on a replicated partition its
 * leader's own log, whatever the high watermark). @returns the klog error code and offset
 */
export async function produceFlushedKlog(hostPort: string, topic: string, partition: number, value: string): Promise<{ error: number; offset: number }> {
  const [host, port] = hostPort.split(':');
  const socket = connect(Number(port), host);
  try {
    await once(socket, 'connect');
    const messages = encodeMessageSet([Buffer.from(value)]);
    socket.write(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic, partition, messages }] }));
    let got = Buffer.alloc(0);
    while (got.length < 4 || got.length < 4 + got.readInt32BE(0)) got = Buffer.concat([got, (await once(socket, 'data'))[0] as Buffer]);
    const d = new Decoder(got, 4, 4 + got.readInt32BE(0));
    if (d.readInt16() !== 0) throw new Error('PRODUCE_ACK refused');
    const [r] = decodeProduceAckResponse(d);
    return { error: r!.errorCode, offset: r!.offset };
  } finally {
    socket.destroy();
  }
}
