/**
 * Fire-and-forget produce requests that arrive together are appended together (ProduceRun): the
 * log holds the same bytes, in the same order, as with one append per set, and a bad set is
 * dropped alone.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import {
  AckLevel,
  Decoder,
  ErrorCode,
  decodeFetchResponse,
  decodeProduceAckResponse,
  encodeFetchRequest,
  encodeMessageSet,
  encodeMultiProduceRequest,
  encodeProduceAckRequest,
  encodeProduceRequest,
  iterateMessageSet,
} from '@klog/protocol';
import { startBroker, type Broker } from '../src/index.js';
import { WireClient, removeDir, tempDir } from './helpers.js';

const silent = pino({ level: 'silent' });
let dir: string;
let broker: Broker | undefined;
let c: WireClient | undefined;

beforeEach(() => {
  dir = tempDir();
});
afterEach(async () => {
  c?.close();
  await broker?.close();
  broker = undefined;
  removeDir(dir);
});

/** A one-message set whose payload is `label`. */
function set(label: string): Buffer {
  return encodeMessageSet([Buffer.from(label)]);
}

/** Every payload of a partition, as strings, once an acknowledged flush has made all of it visible. */
async function payloadsOf(topic: string, partition: number): Promise<string[]> {
  const ack = await c!.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic, partition, messages: set('end') }] }));
  expect(ack.code).toBe(ErrorCode.None);
  expect(decodeProduceAckResponse(new Decoder(ack.body))[0]!.errorCode).toBe(ErrorCode.None);
  const r = await c!.request(encodeFetchRequest({ topic, partition, offset: 0, maxBytes: 1 << 20 }));
  const f = decodeFetchResponse(r.code, new Decoder(r.body));
  return [...iterateMessageSet(f.messages)].map((m) => m.message.payload.toString()).filter((p) => p !== 'end');
}

describe('fire-and-forget produce requests that arrive together', () => {
  it('are appended in arrival order per partition, across partitions and request types', async () => {
    broker = await startBroker({ logDir: dir, port: 0, numPartitions: 2 }, silent);
    c = await WireClient.connect(broker.port);
    const frames: Buffer[] = [];
    const want: Record<number, string[]> = { 0: [], 1: [] };
    for (let i = 0; i < 300; i++) {
      const partition = i % 7 < 5 ? 0 : 1; // runs of the same partition, then a change
      const label = `m${i}`;
      want[partition]!.push(label);
      frames.push(i % 2 === 0 ? encodeMultiProduceRequest([{ topic: 't', partition, messages: set(label) }]) : encodeProduceRequest({ topic: 't', partition, messages: set(label) }));
    }
    c.socket.write(Buffer.concat(frames)); // one write: the broker gets them together
    expect(await payloadsOf('t', 0)).toEqual(want[0]);
    expect(await payloadsOf('t', 1)).toEqual(want[1]);
    const metrics = broker.metrics;
    expect(await metrics.value('klog_messages_in_total', { topic: 't' })).toBe(302);
    expect(await metrics.value('klog_requests_total', { type: 'MultiProduce' })).toBe(150);
  });

  it('drop a set with a bad CRC, or over the size limit, and keep the sets around it', async () => {
    broker = await startBroker({ logDir: dir, port: 0, maxMessageBytes: 100 }, silent);
    c = await WireClient.connect(broker.port);
    const bad = Buffer.from(encodeMessageSet([Buffer.from('bad crc')]));
    bad[bad.length - 1]! ^= 1;
    const frames = [
      encodeMultiProduceRequest([{ topic: 'd', partition: 0, messages: set('a') }]),
      encodeMultiProduceRequest([{ topic: 'd', partition: 0, messages: set('b') }]),
      encodeMultiProduceRequest([{ topic: 'd', partition: 0, messages: bad }]),
      encodeMultiProduceRequest([{ topic: 'd', partition: 0, messages: encodeMessageSet([Buffer.alloc(101)]) }]),
      encodeMultiProduceRequest([{ topic: 'd', partition: 0, messages: set('c') }]),
      encodeMultiProduceRequest([{ topic: 'd', partition: 0, messages: encodeMessageSet([Buffer.from('d'), Buffer.from('e')]) }]),
    ];
    c.socket.write(Buffer.concat(frames));
    expect(await payloadsOf('d', 0)).toEqual(['a', 'b', 'c', 'd', 'e']);
  });

  it('drop every set with a bad CRC wherever it is in the run (first, side by side, last), and only those', async () => {
    broker = await startBroker({ logDir: dir, port: 0 }, silent);
    c = await WireClient.connect(broker.port);
    /** A set of `labels`, its message `damaged` (an index) with a wrong CRC when given. */
    const setOf = (labels: string[], damaged?: number): Buffer => {
      const s = Buffer.from(encodeMessageSet(labels.map((l) => Buffer.from(l))));
      if (damaged !== undefined) {
        let pos = 0;
        for (let i = 0; i < damaged; i++) pos += 4 + s.readInt32BE(pos);
        s[pos + 6]! ^= 0x40; // the crc field
      }
      return s;
    };
    const sets = [
      setOf(['x1'], 0),
      setOf(['a', 'b']),
      setOf(['x2', 'x3'], 1),
      setOf(['x4'], 0),
      setOf(['c']),
      setOf(['d', 'e', 'f']),
      setOf(['x5', 'x6', 'x7'], 2),
      setOf(['g']),
      setOf(['x8'], 0),
    ];
    c.socket.write(Buffer.concat(sets.map((messages) => encodeMultiProduceRequest([{ topic: 'f', partition: 0, messages }]))));
    expect(await payloadsOf('f', 0)).toEqual(['a', 'b', 'c', 'd', 'e', 'f', 'g']);
    expect(await broker.metrics.value('klog_messages_in_total', { topic: 'f' })).toBe(8);
  });

  it('a set cut short is not joined with the set after it', async () => {
    broker = await startBroker({ logDir: dir, port: 0 }, silent);
    c = await WireClient.connect(broker.port);
    const whole = set('whole');
    // A set whose last message claims more bytes than the set has: with the next set's bytes
    // after it, it would look like a longer message.
    const cut = Buffer.concat([set('x'), encodeMessageSet([Buffer.alloc(40)]).subarray(0, 20)]);
    c.socket.write(
      Buffer.concat([
        encodeMultiProduceRequest([{ topic: 'e', partition: 0, messages: cut }]),
        encodeMultiProduceRequest([{ topic: 'e', partition: 0, messages: Buffer.concat([whole, whole]) }]),
      ]),
    );
    expect(await payloadsOf('e', 0)).toEqual(['whole', 'whole']);
  });
});
