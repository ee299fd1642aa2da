/**
 * Message metadata (docs/format.md §2a) and gzip message sets (§2b) through a real broker with
 * the Producer and the SimpleConsumer: what is stored, what is handed out, offsets of inner
 * messages, and the errors for corrupt or oversized compressed sets.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { gunzipSync, gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  CompressionCodec,
  decodeProduceAckResponse,
  encodeMessage,
  encodeMessageSet,
  encodeMessageSetWithHeaders,
  encodeProduceAckRequest,
  ErrorCode,
  iterateMessageSet,
} from '@klog/protocol';
import { Connection, DecompressedTooLargeError, KlogBrokerError, Producer, SimpleConsumer, type ConsumedMessage } from '../src/index.js';
import { startTestBroker, type TestBroker } from './helpers.js';

describe('message metadata and gzip message sets', () => {
  let broker: TestBroker;
  let consumer: SimpleConsumer;
  let raw: Connection;
  const producers: Producer[] = [];
  beforeAll(async () => {
    broker = await startTestBroker({ flushMessages: 1 });
    consumer = new SimpleConsumer({ host: broker.host, port: broker.port, maxFetchBytes: 64 * 1024 });
    raw = new Connection({ host: broker.host, port: broker.port });
  });
  afterAll(async () => {
    for (const p of producers) await p.close();
    await raw.close();
    await consumer.close();
    await broker.stop();
  });

  function producer(options: Omit<ConstructorParameters<typeof Producer>[0], 'brokerList'> = {}): Producer {
    const p = new Producer({ brokerList: broker.address, acks: 2, batchSize: 1000, lingerMs: 20, ...options });
    producers.push(p);
    return p;
  }

  /** Appends raw message-set bytes to partition 0 of `topic`; returns where they landed. */
  async function appendRaw(topic: string, messages: Buffer): Promise<{ offset: number; nextOffset: number }> {
    const res = await raw.request(encodeProduceAckRequest({ acks: 2, partitions: [{ topic, partition: 0, messages }] }));
    const [r] = decodeProduceAckResponse(res.body);
    expect(r!.errorCode).toBe(ErrorCode.None);
    return { offset: r!.offset, nextOffset: r!.nextOffset };
  }

  /** Every message of partition 0 from `offset` to the log end, through messages(). */
  async function readAll(topic: string, offset = 0): Promise<ConsumedMessage[]> {
    const end = await consumer.latestOffset(topic, 0);
    const out: ConsumedMessage[] = [];
    if (offset >= end) return out;
    for await (const m of consumer.messages({ topic, partition: 0, offset, maxWaitMs: 0 })) {
      out.push(m);
      if (m.nextOffset >= end) break;
    }
    return out;
  }

  /** The messages stored in the broker's segment of `topic`-0, as they are on disk. */
  function stored(topic: string): Array<{ attributes: number; payload: Buffer }> {
    const dir = join(broker.logDir, `${topic}-0`);
    const file = readdirSync(dir).find((f) => f.endsWith('.kafka'))!;
    return [...iterateMessageSet(readFileSync(join(dir, file)))].map((m) => ({ attributes: m.message.attributes, payload: m.message.payload }));
  }

  it('stampMetadata stores key, creation time and host; consumers get the value in payload and the metadata beside it', async () => {
    const p = producer({ stampMetadata: true, metadataHost: 'web-7' });
    const before = Date.now();
    const meta = await p.send('meta', [
      { value: 'first', key: 'user-1', timestamp: 1_700_000_000_000, partition: 0 },
      { value: Buffer.from([0, 1, 2]), key: Buffer.from([0xff]), partition: 0 },
      { value: 'no key', partition: 0 },
      { value: 'copied', host: 'origin-host', timestamp: 5, partition: 0 },
    ]);
    const after = Date.now();
    const r = await consumer.fetch({ topic: 'meta', partition: 0, offset: 0, maxBytes: 64 * 1024 });
    expect(r.messages.map((m) => [m.offset, m.nextOffset])).toEqual(meta.map((m) => [m.offset, m.nextOffset]));
    const [a, b, c] = r.messages;
    expect(a).toEqual({ offset: 0, nextOffset: meta[0]!.nextOffset, payload: Buffer.from('first'), key: Buffer.from('user-1'), timestamp: 1_700_000_000_000, host: 'web-7' });
    expect(b!.payload).toEqual(Buffer.from([0, 1, 2]));
    expect(b!.key).toEqual(Buffer.from([0xff]));
    expect(b!.timestamp).toBeGreaterThanOrEqual(before);
    expect(b!.timestamp).toBeLessThanOrEqual(after);
    expect(c!.payload.toString()).toBe('no key');
    expect(c!.key).toBeUndefined();
    expect(c!.host).toBe('web-7');
    expect(r.messages[3]).toMatchObject({ payload: Buffer.from('copied'), host: 'origin-host', timestamp: 5 });
    // On disk: attributes bit 2 and the header in front of the value.
    expect(stored('meta').map((m) => m.attributes)).toEqual([4, 4, 4, 4]);
    expect(stored('meta')[0]!.payload.subarray(-5).toString()).toBe('first');
  });

  it('plain messages (the default) carry no metadata and are read as before', async () => {
    const p = producer();
    const [m] = await p.send('plain', [{ value: 'hello', key: 'k', partition: 0 }]);
    expect(m).toMatchObject({ offset: 0, nextOffset: 15 });
    const r = await consumer.fetch({ topic: 'plain', partition: 0, offset: 0, maxBytes: 1000 });
    expect(r.messages).toEqual([{ offset: 0, nextOffset: 15, payload: Buffer.from('hello') }]);
    expect(stored('plain')).toEqual([{ attributes: 0, payload: Buffer.from('hello') }]);
    // A timestamp is only stored with stampMetadata: refused rather than dropped.
    await expect(p.send('plain', [{ value: 'x', timestamp: 1, partition: 0 }])).rejects.toThrow(RangeError);
    await expect(p.send('plain', [{ value: 'x', host: 'h', partition: 0 }])).rejects.toThrow(/stored only with stampMetadata/);
    await expect(producer({ stampMetadata: true }).send('plain', [{ value: 'x', key: Buffer.alloc(70_000), partition: 0 }])).rejects.toThrow(/key of 70000 bytes/);
  });

  it('gzip sends each batch as one wrapper; consumers get the inner messages, all at the wrapper offset', async () => {
    const p = producer({ compression: 'gzip' });
    const values = Array.from({ length: 5 }, (_, i) => `${'x'.repeat(1000)}-${i}`);
    const meta = await p.send('gz', values.map((value) => ({ value, partition: 0 })));
    const end = await consumer.latestOffset('gz', 0);
    // One wrapper, much smaller than the 5 plain messages (5 × 1012 bytes).
    expect(meta.map((m) => m.offset)).toEqual([0, 0, 0, 0, 0]);
    expect(meta.map((m) => m.nextOffset)).toEqual([0, 0, 0, 0, end]);
    expect(end).toBeLessThan(200);
    const disk = stored('gz');
    expect(disk).toHaveLength(1);
    expect(disk[0]!.attributes).toBe(CompressionCodec.Gzip);
    expect([...iterateMessageSet(gunzipSync(disk[0]!.payload))].map((m) => m.message.payload.toString())).toEqual(values);

    const r = await consumer.fetch({ topic: 'gz', partition: 0, offset: 0, maxBytes: 64 * 1024 });
    expect(r.messages.map((m) => m.payload.toString())).toEqual(values);
    expect(r.messages.map((m) => [m.offset, m.nextOffset])).toEqual(meta.map((m) => [m.offset, m.nextOffset]));
    expect(r.nextOffset).toBe(end);
    // Resuming from an inner message's nextOffset starts at the wrapper again: nothing is skipped.
    expect((await consumer.fetch({ topic: 'gz', partition: 0, offset: r.messages[2]!.nextOffset, maxBytes: 64 * 1024 })).messages).toHaveLength(5);
  });

  it('mixed plain, metadata and gzip (with metadata inside) messages in one partition come back in order', async () => {
    const plain = producer();
    const withMeta = producer({ stampMetadata: true, metadataHost: 'h1' });
    const gzipMeta = producer({ stampMetadata: true, metadataHost: 'h2', compression: 'gzip' });
    const gzipPlain = producer({ compression: 'gzip' });
    const sent: Array<{ value: string; key?: string; host?: string }> = [];
    await plain.send('mixed', [{ value: 'p1', partition: 0 }]);
    sent.push({ value: 'p1' });
    await gzipMeta.send('mixed', [{ value: 'g1', key: 'a', partition: 0 }, { value: 'g2', key: 'b', partition: 0 }, { value: 'g3', partition: 0 }]);
    sent.push({ value: 'g1', key: 'a', host: 'h2' }, { value: 'g2', key: 'b', host: 'h2' }, { value: 'g3', host: 'h2' });
    await withMeta.send('mixed', [{ value: 'm1', key: 'c', partition: 0 }]);
    sent.push({ value: 'm1', key: 'c', host: 'h1' });
    await gzipPlain.send('mixed', [{ value: 'z1', partition: 0 }, { value: 'z2', partition: 0 }]);
    sent.push({ value: 'z1' }, { value: 'z2' });
    await plain.send('mixed', [{ value: 'p2', partition: 0 }]);
    sent.push({ value: 'p2' });
    expect(stored('mixed').map((m) => m.attributes)).toEqual([0, 1, 4, 1, 0]);

    const got = await readAll('mixed');
    expect(got.map((m) => ({ value: m.payload.toString(), ...(m.key && { key: m.key.toString() }), ...(m.host && { host: m.host }) }))).toEqual(sent);
    // Inside a wrapper, nextOffset stays at the wrapper; otherwise it is where the next message starts.
    expect(got.map((m) => m.offset === got[0]!.offset)).toEqual([true, false, false, false, false, false, false, false]);
    for (let i = 1; i < got.length; i++) {
      const [prev, m] = [got[i - 1]!, got[i]!];
      if (m.offset === prev.offset) expect(prev.nextOffset).toBe(prev.offset);
      else expect(m.offset).toBe(prev.nextOffset);
    }
    expect(new Set(got.slice(1, 4).map((m) => m.offset)).size).toBe(1);
    expect(new Set(got.slice(5, 7).map((m) => m.offset)).size).toBe(1);
    // Restarting from the nextOffset of each message never skips one: what follows is a suffix of the log.
    for (let i = 0; i < got.length; i++) {
      const again = (await readAll('mixed', got[i]!.nextOffset)).map((m) => m.payload.toString());
      const rest = got.map((m) => m.payload.toString());
      expect(rest.slice(rest.length - again.length)).toEqual(again);
      expect(again.length).toBeGreaterThanOrEqual(got.length - i - 1);
    }
  });

  it('a corrupt gzip payload (valid CRC) is an InvalidMessage error at the wrapper offset, never data', async () => {
    await appendRaw('corrupt', encodeMessageSet([Buffer.from('fine')]));
    const bad = await appendRaw('corrupt', encodeMessage(Buffer.from('this is not gzip at all'), CompressionCodec.Gzip));
    // The valid message before it is delivered; the fetch from the bad one reports it.
    const first = await consumer.fetch({ topic: 'corrupt', partition: 0, offset: 0, maxBytes: 1000 });
    expect(first.messages.map((m) => m.payload.toString())).toEqual(['fine']);
    expect(first.nextOffset).toBe(bad.offset);
    const err = await consumer.fetch({ topic: 'corrupt', partition: 0, offset: first.nextOffset, maxBytes: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KlogBrokerError);
    expect(err).toMatchObject({ code: ErrorCode.InvalidMessage, topic: 'corrupt', partition: 0, offset: bad.offset });
    expect((err as Error).message).toMatch(/does not decompress/);
    // A truncated gzip stream, an inner message with a bad CRC, nested compression and snappy are refused the same way.
    const inner = encodeMessageSet([Buffer.from('a'), Buffer.from('b')]);
    const badCrc = Buffer.from(inner);
    badCrc[badCrc.length - 1] = badCrc[badCrc.length - 1]! ^ 0xff;
    const cases: Array<[Buffer, RegExp]> = [
      [encodeMessage(gzipSync(inner).subarray(0, 12), CompressionCodec.Gzip), /does not decompress/],
      [encodeMessage(gzipSync(badCrc), CompressionCodec.Gzip), /CRC mismatch/],
      [encodeMessage(gzipSync(inner.subarray(0, inner.length - 1)), CompressionCodec.Gzip), /ends inside a message/],
      [encodeMessage(gzipSync(encodeMessage(gzipSync(inner), CompressionCodec.Gzip)), CompressionCodec.Gzip), /itself compressed/],
      [encodeMessage(Buffer.from('snappy bytes'), CompressionCodec.Snappy), /codec 2 \(snappy\) is not supported/],
    ];
    for (const [i, [messages, why]] of cases.entries()) {
      const topic = `corrupt-${i}`;
      const at = await appendRaw(topic, messages);
      const e = await consumer.fetch({ topic, partition: 0, offset: 0, maxBytes: 1000 }).catch((x: unknown) => x);
      expect(e, `case ${i}`).toBeInstanceOf(KlogBrokerError);
      expect(e).toMatchObject({ code: ErrorCode.InvalidMessage, offset: at.offset });
      expect((e as Error).message).toMatch(why);
    }
  });

  it('a message with a bad CRC: the valid ones before it are delivered, it and those after it never are', async () => {
    // The broker refuses a bad CRC on produce, so the damage is done on disk, as a failing disk would.
    await appendRaw('bad-crc', encodeMessageSet([Buffer.from('one'), Buffer.from('two'), Buffer.from('three')]));
    const segment = join(broker.logDir, 'bad-crc-0', '00000000000000000000.kafka');
    const bytes = readFileSync(segment);
    bytes[13 + 10 + 1]! ^= 0xff; // a payload byte of "two" (the first message takes 13 bytes)
    writeFileSync(segment, bytes);
    const first = await consumer.fetch({ topic: 'bad-crc', partition: 0, offset: 0, maxBytes: 1000 });
    expect(first.messages.map((m) => m.payload.toString())).toEqual(['one']);
    expect(first.nextOffset).toBe(13);
    const err = await consumer.fetch({ topic: 'bad-crc', partition: 0, offset: 13, maxBytes: 1000 }).catch((e: unknown) => e);
    // The broker checks the first message of every fetch: it answers InvalidMessage for it.
    expect(err).toBeInstanceOf(KlogBrokerError);
    expect(err).toMatchObject({ code: ErrorCode.InvalidMessage, offset: 13 });
  });

  it('a bad metadata header is an InvalidMessage error, never data', async () => {
    // attributes bit 2 and a header size past the end of the payload.
    const at = await appendRaw('bad-header', encodeMessage(Buffer.from([0x00, 0x40, 1, 2, 3]), 0x04));
    const err = await consumer.fetch({ topic: 'bad-header', partition: 0, offset: 0, maxBytes: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KlogBrokerError);
    expect(err).toMatchObject({ code: ErrorCode.InvalidMessage, offset: at.offset });
    expect((err as Error).message).toMatch(/bad message header/);
    // Inside a gzip set too.
    // headerBytes 0x7f: the header runs past the 7-byte payload (whose CRC is right).
    const inner = Buffer.concat([encodeMessageSetWithHeaders([{ value: Buffer.from('ok') }]), encodeMessage(Buffer.from([0x00, 0x7f, 1, 0, 1, 0x6b, 0x76]), 0x04)]);
    const gz = await appendRaw('bad-header-gz', encodeMessage(gzipSync(inner), CompressionCodec.Gzip));
    const e2 = await consumer.fetch({ topic: 'bad-header-gz', partition: 0, offset: 0, maxBytes: 1000 }).catch((e: unknown) => e);
    expect(e2).toMatchObject({ code: ErrorCode.InvalidMessage, offset: gz.offset });
  });

  it('a decompression bomb is a DecompressedTooLargeError; a fetch stops before a wrapper over its budget', async () => {
    // 10 MiB of zeros in one inner message: about 10 KB compressed, far over 4 × 64 KiB.
    const bomb = encodeMessage(gzipSync(encodeMessageSet([Buffer.alloc(10 * 1024 * 1024)])), CompressionCodec.Gzip);
    expect(bomb.length).toBeLessThan(64 * 1024);
    await appendRaw('bomb', encodeMessageSet([Buffer.from('before')]));
    const at = await appendRaw('bomb', bomb);
    const first = await consumer.fetch({ topic: 'bomb', partition: 0, offset: 0, maxBytes: 64 * 1024 });
    // The message before the bomb is delivered; the fetch stops at the bomb.
    expect(first.messages.map((m) => m.payload.toString())).toEqual(['before']);
    expect(first.nextOffset).toBe(at.offset);
    expect(first.partialMessageBytes).toBeUndefined();
    const err = await consumer.fetch({ topic: 'bomb', partition: 0, offset: at.offset, maxBytes: 64 * 1024 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DecompressedTooLargeError);
    expect(err).toMatchObject({ topic: 'bomb', partition: 0, offset: at.offset, maxDecompressedBytes: 4 * 64 * 1024 });
    const iterated: string[] = [];
    await expect(
      (async () => {
        for await (const m of consumer.messages({ topic: 'bomb', partition: 0, offset: 0, maxWaitMs: 0 })) iterated.push(m.payload.toString());
      })(),
    ).rejects.toBeInstanceOf(DecompressedTooLargeError);
    expect(iterated).toEqual(['before']);

    // Two wrappers of 150 KB each against a 200 KB budget: one per fetch, both read by messages().
    const small = new SimpleConsumer({ host: broker.host, port: broker.port, maxFetchBytes: 64 * 1024, maxDecompressedBytes: 200_000 });
    try {
      const chunk = (c: string): Buffer => encodeMessage(gzipSync(encodeMessageSet([Buffer.alloc(150_000, c)])), CompressionCodec.Gzip);
      await appendRaw('budget', Buffer.concat([chunk('a'), chunk('b')]));
      const one = await small.fetch({ topic: 'budget', partition: 0, offset: 0, maxBytes: 64 * 1024 });
      expect(one.messages.map((m) => m.payload[0])).toEqual(['a'.charCodeAt(0)]);
      const all: number[] = [];
      for await (const m of small.messages({ topic: 'budget', partition: 0, offset: 0, maxWaitMs: 0 })) {
        all.push(m.payload[0]!);
        if (all.length === 2) break;
      }
      expect(all.map((c) => String.fromCharCode(c))).toEqual(['a', 'b']);
    } finally {
      await small.close();
    }
  });

  it('an empty gzip set is skipped without stalling messages()', async () => {
    await appendRaw('empty-gz', encodeMessage(gzipSync(Buffer.alloc(0)), CompressionCodec.Gzip));
    await appendRaw('empty-gz', encodeMessageSet([Buffer.from('after')]));
    const got = await readAll('empty-gz');
    expect(got.map((m) => m.payload.toString())).toEqual(['after']);
  });
});
