import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { randomBytes } from 'node:crypto';
import { pino } from 'pino';
import {
  AckLevel,
  Decoder,
  ErrorCode,
  OffsetTime,
  RequestType,
  decodeFetchResponse,
  decodeMetadataResponse,
  decodeOffsetsResponse,
  decodeProduceAckResponse,
  encodeControlledShutdownRequest,
  encodeFetchRequest,
  encodeFrame,
  encodeMessageSet,
  encodeMetadataRequest,
  encodeMultiProduceRequest,
  encodeOffsetsRequest,
  encodeProduceAckRequest,
  iterateMessageSet,
  type AckLevelValue,
  type FetchResponse,
} from '@klog/protocol';
import { startBroker, type Broker, type BrokerConfig } from '../src/index.js';
import { WireClient, removeDir, tempDir } from './helpers.js';

const silent = pino({ level: 'silent' });

let dir: string;
let broker: Broker | undefined;
let clients: WireClient[] = [];

beforeEach(() => {
  dir = tempDir();
});
afterEach(async () => {
  for (const c of clients) c.close();
  clients = [];
  await broker?.close();
  broker = undefined;
  removeDir(dir);
});

async function start(settings: Partial<BrokerConfig> = {}): Promise<Broker> {
  broker = await startBroker({ logDir: dir, port: 0, ...settings }, silent);
  return broker;
}

async function client(): Promise<WireClient> {
  const c = await WireClient.connect(broker!.port);
  clients.push(c);
  return c;
}

function payloads(n: number, size: number, seed = 0): Buffer[] {
  return Array.from({ length: n }, (_, i) => {
    const b = Buffer.alloc(size, (i + seed) % 251);
    b.writeUInt32BE(i + seed, 0);
    return b;
  });
}

async function produceAck(c: WireClient, topic: string, partition: number, messages: Buffer, acks: AckLevelValue = AckLevel.Flushed) {
  const r = await c.request(encodeProduceAckRequest({ acks, partitions: [{ topic, partition, messages }] }));
  expect(r.code).toBe(ErrorCode.None);
  return decodeProduceAckResponse(new Decoder(r.body))[0]!;
}

async function fetch(c: WireClient, topic: string, partition: number, offset: number, maxBytes: number, maxWaitMs?: number): Promise<FetchResponse> {
  const r = await c.request(encodeFetchRequest({ topic, partition, offset, maxBytes, maxWaitMs }));
  return decodeFetchResponse(r.code, new Decoder(r.body));
}

async function latest(c: WireClient, topic: string, partition: number, time: number = OffsetTime.Latest): Promise<number[]> {
  const r = await c.request(encodeOffsetsRequest({ topic, partition, time, maxOffsets: 1 }));
  expect(r.code).toBe(ErrorCode.None);
  return decodeOffsetsResponse(new Decoder(r.body));
}

/** Reads every message of a partition from `from` to the visible end. */
async function readAll(c: WireClient, topic: string, partition: number, from = 0): Promise<{ offset: number; nextOffset: number; payload: Buffer }[]> {
  const out: { offset: number; nextOffset: number; payload: Buffer }[] = [];
  let offset = from;
  for (;;) {
    const r = await fetch(c, topic, partition, offset, 64 * 1024);
    expect(r.errorCode).toBe(ErrorCode.None);
    if (r.messages.length === 0) return out;
    for (const m of iterateMessageSet(r.messages, offset)) {
      out.push({ offset: m.offset, nextOffset: m.nextOffset, payload: Buffer.from(m.message.payload) });
      offset = m.nextOffset;
    }
  }
}

describe('broker (standalone)', () => {
  it('stores fire-and-forget message sets as they came and serves them back byte for byte', async () => {
    await start({ flushMessages: 10_000, flushIntervalMs: 20 });
    const c = await client();
    const sent = payloads(1000, 200);
    for (let i = 0; i < sent.length; i += 50) {
      c.send(encodeMultiProduceRequest([{ topic: 'events', partition: 0, messages: encodeMessageSet(sent.slice(i, i + 50)) }]));
    }
    // An acknowledged, flushed produce after them on the same connection: everything before it is visible then.
    const last = await produceAck(c, 'events', 0, encodeMessageSet([Buffer.from('last')]));
    expect(last.offset).toBe(1000 * 210);
    const got = await readAll(c, 'events', 0);
    expect(got).toHaveLength(1001);
    got.slice(0, 1000).forEach((m, i) => {
      expect(m.offset).toBe(i * 210);
      expect(m.nextOffset).toBe(m.offset + 4 + 6 + 200);
      expect(m.payload.equals(sent[i]!)).toBe(true);
    });
    expect(await latest(c, 'events', 0)).toEqual([1000 * 210 + 14]);
  });

  it('answers requests on one connection in order, also when they are pipelined', async () => {
    await start({ flushMessages: 1 });
    const c = await client();
    await produceAck(c, 't', 0, encodeMessageSet(payloads(10, 10)));
    const sizes = Array.from({ length: 200 }, (_, i) => 20 * (i % 10) + 20);
    const responses = await Promise.all(sizes.map((maxBytes) => c.request(encodeFetchRequest({ topic: 't', partition: 0, offset: 0, maxBytes }))));
    responses.forEach((r, i) => {
      expect(r.code).toBe(0);
      expect(r.body.length).toBe(Math.min(sizes[i]!, 200));
    });
  });

  it('serves many connections at once', async () => {
    await start({ flushMessages: 1, numPartitions: 4 });
    const cs = await Promise.all(Array.from({ length: 40 }, () => client()));
    const results = await Promise.all(
      cs.map((c, i) => produceAck(c, `topic-${i % 5}`, i % 4, encodeMessageSet([Buffer.from(`hello ${i}`)]))),
    );
    expect(results.every((r) => r.errorCode === ErrorCode.None)).toBe(true);
    const counts = await Promise.all(cs.slice(0, 20).map(async (c, i) => (await readAll(c, `topic-${i % 5}`, i % 4)).length));
    expect(counts.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(20);
    const total = (await Promise.all([0, 1, 2, 3, 4].flatMap((t) => [0, 1, 2, 3].map((p) => readAll(cs[0]!, `topic-${t}`, p))))).flat();
    expect(total).toHaveLength(40);
  });

  it('rejects a message over max.message.bytes: it never enters the log', async () => {
    await start({ maxMessageBytes: 1000, flushMessages: 1 });
    const c = await client();
    const ok = await produceAck(c, 'big', 0, encodeMessageSet([Buffer.alloc(1000, 1)]));
    expect(ok).toMatchObject({ errorCode: ErrorCode.None, offset: 0, nextOffset: 1010 });
    const tooBig = await produceAck(c, 'big', 0, encodeMessageSet([Buffer.alloc(10, 1), Buffer.alloc(1001, 2)]));
    expect(tooBig).toMatchObject({ errorCode: ErrorCode.MessageSizeTooLarge, offset: -1, nextOffset: 1000 }); // nextOffset: the limit
    c.send(encodeMultiProduceRequest([{ topic: 'big', partition: 0, messages: encodeMessageSet([Buffer.alloc(5000)]) }]));
    const after = await produceAck(c, 'big', 0, encodeMessageSet([Buffer.from('x')]));
    expect(after.offset).toBe(1010);
    expect((await readAll(c, 'big', 0)).map((m) => m.payload.length)).toEqual([1000, 1]);
    expect(await broker!.metrics.value('klog_messages_in_total', { topic: 'big' })).toBe(2);
  });

  it('rejects a message set with a bad CRC or a partial message', async () => {
    await start({ flushMessages: 1 });
    const c = await client();
    const set = encodeMessageSet([Buffer.from('abc'), Buffer.from('def')]);
    const flipped = Buffer.from(set);
    flipped[flipped.length - 1]! ^= 0xff;
    expect((await produceAck(c, 'crc', 0, flipped)).errorCode).toBe(ErrorCode.InvalidMessage);
    expect((await produceAck(c, 'crc', 0, set.subarray(0, set.length - 1))).errorCode).toBe(ErrorCode.InvalidMessage);
    expect(await readAll(c, 'crc', 0)).toEqual([]);
  });

  it('answers fetch errors: out of range with earliest and end, wrong partition, bad size, not a boundary', async () => {
    await start({ flushMessages: 1, numPartitions: 2 });
    const c = await client();
    await produceAck(c, 'e', 0, encodeMessageSet([Buffer.from('one'), Buffer.from('two')]));
    expect(await fetch(c, 'e', 0, 500, 100)).toMatchObject({ errorCode: ErrorCode.OffsetOutOfRange, earliest: 0, end: 26 });
    expect(await fetch(c, 'e', 0, 26, 100)).toMatchObject({ errorCode: ErrorCode.None, messages: Buffer.alloc(0) });
    expect((await fetch(c, 'e', 2, 0, 100)).errorCode).toBe(ErrorCode.WrongPartition);
    expect((await fetch(c, 'e', 0, 0, -1)).errorCode).toBe(ErrorCode.InvalidFetchSize);
    expect((await fetch(c, 'e', 0, 3, 100)).errorCode).toBe(ErrorCode.InvalidMessageOffset);
    expect((await fetch(c, 'e', 0, 13, 100)).errorCode).toBe(ErrorCode.None);
    // A fetch size smaller than the message: the head of it, for the client to grow its size.
    const small = await fetch(c, 'e', 0, 0, 5);
    expect(small.errorCode).toBe(ErrorCode.None);
    expect(small.messages.length).toBe(5);
    // A topic nobody wrote to is an empty log.
    expect(await fetch(c, 'nothing', 0, 0, 100)).toMatchObject({ errorCode: ErrorCode.None });
    expect((await fetch(c, 'nothing', 0, 10, 100)).errorCode).toBe(ErrorCode.OffsetOutOfRange);
  });

  it('answers an unknown request type and a malformed body with an error and keeps the connection', async () => {
    await start({ flushMessages: 1 });
    const c = await client();
    expect((await c.request(encodeFrame(42, (e) => e.writeInt32(7)))).code).toBe(ErrorCode.UnknownRequestType);
    // CONTROLLED_SHUTDOWN to a standalone broker: it is no controller (docs/replication.md §6.5).
    expect((await c.request(encodeControlledShutdownRequest({ brokerId: 1, brokerEpoch: 5 }))).code).toBe(ErrorCode.NotController);
    expect((await c.request(encodeFrame(RequestType.Fetch, (e) => e.writeInt16(500)))).code).toBe(ErrorCode.InvalidRequest);
    expect((await c.request(encodeFrame(RequestType.Fetch, (e) => e.writeString('../etc').writeInt32(0).writeInt64(0).writeInt32(10)))).code).toBe(
      ErrorCode.InvalidTopic,
    );
    const r = await c.request(encodeMetadataRequest(['fresh']));
    expect(decodeMetadataResponse(new Decoder(r.body))).toEqual([{ topic: 'fresh', errorCode: 0, partitions: 1 }]);
  });

  it('closes a connection whose frame size is out of bounds and keeps serving others', async () => {
    await start({ flushMessages: 1, maxRequestBytes: 1024 * 1024 });
    const bad = await client();
    const good = await client();
    const closed = new Promise((resolve) => bad.socket.on('close', resolve));
    bad.socket.write(Buffer.from([0x7f, 0xff, 0xff, 0xff, 0, 1]));
    await closed;
    expect((await produceAck(good, 'ok', 0, encodeMessageSet([Buffer.from('still here')]))).errorCode).toBe(0);
  });

  it('answers a long-poll fetch at the log end as soon as new data is flushed', async () => {
    await start({ flushMessages: 1 });
    const c = await client();
    const writer = await client();
    const start_ = Date.now();
    const pending = fetch(c, 'lp', 0, 0, 1000, 10_000);
    setTimeout(() => void produceAck(writer, 'lp', 0, encodeMessageSet([Buffer.from('wake up')]), AckLevel.Appended), 200);
    const r = await pending;
    expect(r.errorCode).toBe(0);
    expect([...iterateMessageSet(r.messages)].map((m) => m.message.payload.toString())).toEqual(['wake up']);
    expect(Date.now() - start_).toBeLessThan(5000);
    // With nothing arriving it answers empty after maxWaitMs.
    const t0 = Date.now();
    const empty = await fetch(c, 'lp', 0, 17, 1000, 300);
    expect(empty).toMatchObject({ errorCode: 0, messages: Buffer.alloc(0) });
    expect(Date.now() - t0).toBeGreaterThanOrEqual(250);
  });

  it('stops a long-poll wait when its connection closes', async () => {
    await start({ flushMessages: 1 });
    const cs = await Promise.all(Array.from({ length: 50 }, () => client()));
    for (const [i, c] of cs.entries()) {
      void fetch(c, i % 2 ? 'never-created' : 'waiting', 0, 0, 1000, 600_000).catch(() => {});
    }
    await produceAck(await client(), 'waiting', 0, encodeMessageSet([]));
    const waiting = async (): Promise<number> => broker!.metrics.value('klog_long_polls_waiting');
    const t0 = Date.now();
    while ((await waiting()) < 50 && Date.now() - t0 < 2000) await new Promise((r) => setTimeout(r, 20));
    expect(await waiting()).toBe(50);
    for (const c of cs) c.close();
    while ((await waiting()) > 0 && Date.now() - t0 < 4000) await new Promise((r) => setTimeout(r, 20));
    expect(await waiting()).toBe(0);
  });

  it('shows only flushed messages to fetches (flush.policy=interval)', async () => {
    await start({ flushPolicy: 'interval', flushMessages: 1000, flushIntervalMs: 60_000 });
    const c = await client();
    const r = await produceAck(c, 'f', 0, encodeMessageSet(payloads(5, 10)), AckLevel.Appended);
    expect(r.nextOffset).toBe(100);
    expect(await readAll(c, 'f', 0)).toHaveLength(0);
    expect(await latest(c, 'f', 0)).toEqual([0]);
    await produceAck(c, 'f', 0, encodeMessageSet(payloads(1, 10)), AckLevel.Flushed);
    expect(await readAll(c, 'f', 0)).toHaveLength(6);
  });

  it('answers acks -1 on a paper topic once flushed, as acks 2 (flush.policy=interval)', async () => {
    await start({ flushPolicy: 'interval', flushMessages: 1000, flushIntervalMs: 60_000 });
    const c = await client();
    await produceAck(c, 'f', 0, encodeMessageSet(payloads(5, 10)), AckLevel.Appended);
    expect(await readAll(c, 'f', 0)).toHaveLength(0);
    const r = await produceAck(c, 'f', 0, encodeMessageSet(payloads(1, 10)), AckLevel.All);
    expect(r).toMatchObject({ errorCode: ErrorCode.None, offset: 100, nextOffset: 120 });
    expect(await readAll(c, 'f', 0)).toHaveLength(6);
  });

  it('deletes aged segments, answers OffsetOutOfRange below them, and never restarts offsets at 0', async () => {
    const settings = { segmentBytes: 1024, retentionMs: 1000, retentionCheckIntervalMs: 100, flushMessages: 1 };
    await start(settings);
    let c = await client();
    let end = 0;
    for (let i = 0; i < 20; i++) end = (await produceAck(c, 'r', 0, encodeMessageSet(payloads(2, 100, i * 2)))).nextOffset;
    expect(end).toBe(20 * 2 * 110);
    expect((await latest(c, 'r', 0, OffsetTime.Earliest))[0]).toBe(0);
    await new Promise((r) => setTimeout(r, 1600));
    const earliest = (await latest(c, 'r', 0, OffsetTime.Earliest))[0]!;
    expect(earliest).toBe(end);
    expect(await fetch(c, 'r', 0, 0, 1000)).toMatchObject({ errorCode: ErrorCode.OffsetOutOfRange, earliest: end, end });
    expect(await fetch(c, 'r', 0, end, 1000)).toMatchObject({ errorCode: ErrorCode.None, messages: Buffer.alloc(0) });
    // Across a restart the log goes on from where it was.
    c.close();
    await broker!.close();
    await start(settings);
    c = await client();
    expect(await latest(c, 'r', 0)).toEqual([end]);
    const next = await produceAck(c, 'r', 0, encodeMessageSet([Buffer.from('after restart')]));
    expect(next.offset).toBe(end);
    expect((await readAll(c, 'r', 0, end)).map((m) => m.payload.toString())).toEqual(['after restart']);
  });

  it('never answers OffsetOutOfRange inside [earliest, visible end] while segments roll under load', async () => {
    await start({ segmentBytes: 2048, flushMessages: 7, flushIntervalMs: 5 });
    const producer = await client();
    const consumer = await client();
    const total = 3000;
    let produced = 0;
    const produce = (async () => {
      while (produced < total) {
        const batch = payloads(Math.min(13, total - produced), 37, produced);
        await produceAck(producer, 'roll', 0, encodeMessageSet(batch), AckLevel.Appended);
        produced += batch.length;
      }
      await produceAck(producer, 'roll', 0, encodeMessageSet([]), AckLevel.Flushed);
    })();
    const seen: number[] = [];
    let offset = 0;
    while (seen.length < total) {
      const r = await fetch(consumer, 'roll', 0, offset, 300, 50);
      expect(r.errorCode).toBe(ErrorCode.None);
      for (const m of iterateMessageSet(r.messages, offset)) {
        seen.push(m.message.payload.readUInt32BE(0));
        offset = m.nextOffset;
      }
    }
    await produce;
    expect(seen).toEqual(Array.from({ length: total }, (_, i) => i));
  });

  it('survives 10,000 random and truncated requests and then serves normally', async () => {
    await start({ flushMessages: 1, maxRequestBytes: 64 * 1024 });
    const valid = [
      encodeFetchRequest({ topic: 'h', partition: 0, offset: 0, maxBytes: 100 }),
      encodeOffsetsRequest({ topic: 'h', partition: 0, time: -1, maxOffsets: 1 }),
      encodeProduceAckRequest({ acks: 1, partitions: [{ topic: 'h', partition: 0, messages: encodeMessageSet([Buffer.from('x')]) }] }),
      encodeMetadataRequest(['h']),
    ];
    // Well-framed frames (truncated bodies, random bodies of every request type and unknown ones)
    // share one connection, as their framing stays intact; raw noise, whose size prefix is
    // random, goes on a connection of its own each time.
    const framed = await client();
    let framedCount = 0;
    const noise: Buffer[] = [];
    for (let i = 0; i < 10_000; i++) {
      const kind = i % 3;
      if (kind === 0) {
        noise.push(randomBytes(1 + (i % 40)));
      } else if (kind === 1) {
        const v = valid[i % valid.length]!;
        const cut = 6 + (i % Math.max(1, v.length - 6));
        const frame = Buffer.from(v.subarray(0, cut));
        frame.writeInt32BE(cut - 4, 0); // a well-framed but truncated body
        framed.socket.write(frame);
        framedCount++;
      } else {
        const body = randomBytes(i % 64);
        framed.socket.write(encodeFrame(i % 8, (e) => e.writeBytes(body)));
        framedCount++;
      }
    }
    for (let i = 0; i < noise.length; i += 200) {
      await Promise.all(
        noise.slice(i, i + 200).map(async (bytes) => {
          const c = await WireClient.connect(broker!.port);
          c.socket.end(bytes);
          await new Promise((r) => c.socket.once('close', r));
        }),
      );
    }
    // Every well-framed request was read and handled (answered, or dropped for PRODUCE), and the
    // connection that carried them is still open.
    const handled = async (): Promise<number> =>
      Object.values((await broker!.metrics.toJSON())['klog_requests_total'] ?? {}).reduce((a, b) => a + b, 0);
    const t0 = Date.now();
    while ((await handled()) < framedCount && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 20));
    expect(await handled()).toBeGreaterThanOrEqual(framedCount);
    expect(framed.closed).toBe(false);
    const fresh = await client();
    const r = await produceAck(fresh, 'after-noise', 0, encodeMessageSet([Buffer.from('fine')]));
    expect(r).toMatchObject({ errorCode: 0, offset: 0 });
    expect((await readAll(fresh, 'after-noise', 0)).map((m) => m.payload.toString())).toEqual(['fine']);
    // Whatever the noise appended to topic "h" is whole, valid messages only.
    await readAll(fresh, 'h', 0);
  }, 30_000);
});
