/** Producer against a real broker: acknowledgements, partitioning, batching, errors (docs/design.md §5). */
import { createHook } from 'node:async_hooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode } from '@klog/protocol';
import { hashPartitioner, KlogBrokerError, KlogConnectionError, parseBrokerList, Producer, RecordTooLargeError, SimpleConsumer } from '../src/index.js';
import { startTestBroker, type TestBroker } from './helpers.js';

describe('Producer', () => {
  let a: TestBroker;
  let b: TestBroker;
  beforeAll(async () => {
    // Slow flushing so that only acks 2 can make messages visible at once.
    a = await startTestBroker({ numPartitions: 2, flushMessages: 100_000, flushIntervalMs: 60_000, maxMessageBytes: 4096 });
    b = await startTestBroker({ numPartitions: 3 });
  });
  afterAll(async () => {
    await a.stop();
    await b.stop();
  });

  it('numbers partitions over the broker list: each broker in order, its partitions', async () => {
    const p = new Producer({ brokerList: `${a.address},${b.address}`, acks: 1 });
    expect(await p.partitionCount('spread')).toBe(5);
    const meta = await p.send('spread', [0, 1, 2, 3, 4].map((partition) => ({ value: `to ${partition}`, partition })));
    expect(meta.map((m) => m.partition)).toEqual([0, 1, 2, 3, 4]);
    await p.close();
    // Partition 3 over the list is partition 1 of broker b.
    const c = new SimpleConsumer({ host: b.host, port: b.port });
    const got = [];
    for await (const m of c.messages({ topic: 'spread', partition: 1, offset: 0, maxWaitMs: 200 })) {
      got.push(m.payload.toString());
      break;
    }
    expect(got).toEqual(['to 3']);
    await c.close();
  });

  it('acks 1 returns the offset of every record', async () => {
    const p = new Producer({ brokerList: a.address, acks: 1 });
    const meta = await p.send('acked', [{ value: 'one', partition: 0 }, { value: 'three', partition: 0 }, { value: 'x', partition: 1 }]);
    expect(meta).toEqual([
      { topic: 'acked', partition: 0, offset: 0, nextOffset: 13 },
      { topic: 'acked', partition: 0, offset: 13, nextOffset: 28 },
      { topic: 'acked', partition: 1, offset: 0, nextOffset: 11 },
    ]);
    const more = await p.send('acked', [{ value: 'four', partition: 0 }]);
    expect(more[0]).toMatchObject({ offset: 28, nextOffset: 28 + 14 });
    await p.close();
  });

  it('acks 2 returns offsets once flushed, so a fetch sees the messages at once', async () => {
    const p = new Producer({ brokerList: a.address, acks: 2, batchSize: 3 });
    const values = ['alpha', 'beta', 'gamma', 'delta'];
    const meta = await p.send('flushed', values.map((value) => ({ value, partition: 0 })));
    expect(meta.map((m) => m.offset)).toEqual([0, 15, 29, 44]);
    const c = new SimpleConsumer({ host: a.host, port: a.port });
    const r = await c.fetch({ topic: 'flushed', partition: 0, offset: 0, maxBytes: 1024 });
    expect(r.messages.map((m) => [m.offset, m.payload.toString()])).toEqual(meta.map((m, i) => [m.offset, values[i]]));
    expect(r.nextOffset).toBe(meta[3]!.nextOffset);
    await c.close();
    await p.close();
  });

  it('partitions by key deterministically: the same key always lands in the same partition', async () => {
    const p = new Producer({ brokerList: `${a.address},${b.address}`, acks: 1 });
    const keys = Array.from({ length: 40 }, (_, i) => `user-${i % 10}`);
    const first = await p.send('keyed', keys.map((key, i) => ({ key, value: `${key} #${i}` })));
    const second = await p.send('keyed', keys.map((key) => ({ key, value: 'again' })));
    const partitionOf = new Map<string, number>();
    [...first, ...second].forEach((m, i) => {
      const key = keys[i % keys.length]!;
      expect(m.partition).toBe(hashPartitioner(Buffer.from(key), 5));
      if (partitionOf.has(key)) expect(m.partition).toBe(partitionOf.get(key));
      partitionOf.set(key, m.partition);
    });
    // Ten keys over five partitions use more than one partition.
    expect(new Set(partitionOf.values()).size).toBeGreaterThan(1);
    // A second producer (fresh state) agrees.
    const p2 = new Producer({ brokerList: `${a.address},${b.address}`, acks: 1 });
    const again = await p2.send('keyed', [{ key: 'user-3', value: 'x' }]);
    expect(again[0]!.partition).toBe(partitionOf.get('user-3'));
    await p.close();
    await p2.close();
  });

  it('spreads keyless records over partitions a batch at a time (sticky)', async () => {
    const p = new Producer({ brokerList: b.address, acks: 1, batchSize: 10 });
    const meta = await p.send('random', Array.from({ length: 300 }, (_, i) => ({ value: `m${i}` })));
    expect(new Set(meta.map((m) => m.partition))).toEqual(new Set([0, 1, 2]));
    // Ten records to one partition, the next ten to another.
    for (let i = 0; i < 300; i += 10) {
      expect(new Set(meta.slice(i, i + 10).map((m) => m.partition)).size).toBe(1);
      if (i > 0) expect(meta[i]!.partition).not.toBe(meta[i - 1]!.partition);
    }
    await p.close();
  });

  it("keylessPartitioning 'random' picks a partition per record", async () => {
    const p = new Producer({ brokerList: b.address, acks: 1, batchSize: 1000, keylessPartitioning: 'random' });
    const meta = await p.send('random', Array.from({ length: 300 }, (_, i) => ({ value: `m${i}` })));
    expect(new Set(meta.map((m) => m.partition))).toEqual(new Set([0, 1, 2]));
    await p.close();
    expect(() => new Producer({ brokerList: b.address, keylessPartitioning: 'round-robin' as 'random' })).toThrow(RangeError);
  });

  it('batches by count and by linger time', async () => {
    const p = new Producer({ brokerList: b.address, batchSize: 10, lingerMs: 50 });
    // Fewer than batchSize: sent once the linger time is up, without flush().
    await p.send('linger', [{ value: 'late', partition: 0 }]);
    const c = new SimpleConsumer({ host: b.host, port: b.port });
    const started = Date.now();
    let got: string | undefined;
    for await (const m of c.messages({ topic: 'linger', partition: 0, offset: 0, maxWaitMs: 2000 })) {
      got = m.payload.toString();
      break;
    }
    expect(got).toBe('late');
    expect(Date.now() - started).toBeLessThan(3000);
    await c.close();
    await p.close();
  });

  it('lingerMs 0: the records of one event-loop turn go together at its end, with no timer armed', async () => {
    const p = new Producer({ brokerList: b.address, acks: 0, lingerMs: 0 });
    await p.send('turn', [{ value: 'warm', partition: 2 }]);
    await p.flush();
    // Let a linger timer armed for the first record run out (a flush leaves it armed).
    await new Promise((resolve) => setTimeout(resolve, 10));
    // A Node timer fires after at least 1 ms: every Timeout created while the records are batched
    // and sent is counted (the connection is open and the metadata known, so nothing else arms one).
    let timeouts = 0;
    const hook = createHook({
      init(_id, type) {
        if (type === 'Timeout') timeouts++;
      },
    }).enable();
    try {
      await Promise.all([p.send('turn', [{ value: 'one', partition: 2 }]), p.send('turn', [{ value: 'two', partition: 2 }])]);
      await new Promise<void>((resolve) => setImmediate(resolve));
    } finally {
      hook.disable();
    }
    expect(timeouts).toBe(0);
    const c = new SimpleConsumer({ host: b.host, port: b.port });
    const got: string[] = [];
    for await (const m of c.messages({ topic: 'turn', partition: 2, offset: 0, maxWaitMs: 2000 })) {
      got.push(m.payload.toString());
      if (got.length === 3) break;
    }
    expect(got).toEqual(['warm', 'one', 'two']);
    await c.close();
    await p.close();
  });

  it('rejects a message over the broker limit with a typed error, and an unknown partition', async () => {
    const p = new Producer({ brokerList: a.address, acks: 1 });
    const err = await p.send('big', [{ value: Buffer.alloc(5000), partition: 0 }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KlogBrokerError);
    expect((err as KlogBrokerError).code).toBe(ErrorCode.MessageSizeTooLarge);
    expect((err as KlogBrokerError).topic).toBe('big');
    await expect(p.send('big', [{ value: 'x', partition: 2 }])).rejects.toThrow(RangeError);
    await p.close();
    await expect(p.send('big', [{ value: 'x' }])).rejects.toThrow(/closed/);
  });

  it('bounds the bytes in flight and still delivers everything', async () => {
    const p = new Producer({ brokerList: b.address, acks: 1, batchSize: 20, maxInFlightBytes: 8 * 1024 });
    const records = Array.from({ length: 2000 }, (_, i) => ({ value: Buffer.alloc(100, i & 0xff), partition: 2 }));
    const meta = await p.send('bounded', records);
    expect(meta).toHaveLength(2000);
    for (let i = 1; i < meta.length; i++) expect(meta[i]!.offset).toBe(meta[i - 1]!.nextOffset);
    await p.close();
  });

  it('reports an unreachable broker as a connection error', async () => {
    const p = new Producer({ brokerList: '127.0.0.1:1', connectTimeoutMs: 2000 });
    await expect(p.send('nowhere', [{ value: 'x' }])).rejects.toBeInstanceOf(KlogConnectionError);
    await p.close();
  });

  it('batchSize 1, acks 0 with stampMetadata: topics of 45 and 3 characters come back in order, byte-exact, with key, timestamp and host', async () => {
    const long = 'one-message-requests.with_a_long-topic-name-x'; // 45 characters: over the 32 copied a character at a time
    const short = 'o1r';
    expect(long).toHaveLength(45);
    const p = new Producer({ brokerList: b.address, batchSize: 1, acks: 0, lingerMs: 0, stampMetadata: true, metadataHost: 'stamp-host.example' });
    const sizes = [0, 1, 5, 100, 1000, 4000];
    const recordsOf = (topic: string): { value: Buffer; partition: number; timestamp: number; key?: string }[] =>
      Array.from({ length: 60 }, (_, i) => ({
        value: Buffer.alloc(sizes[i % sizes.length]!, `${topic}:${i}|`),
        partition: 1,
        timestamp: 1_700_000_000_000 + i,
        ...(i % 3 === 0 ? { key: `k${i}` } : {}),
      }));
    const records = new Map([long, short].map((t) => [t, recordsOf(t)]));
    // Interleaved sends to both topics (the second topic's metadata request goes out between messages of the first).
    const sends: Promise<unknown>[] = [];
    for (let i = 0; i < 60; i += 10) for (const topic of [long, short]) sends.push(p.send(topic, records.get(topic)!.slice(i, i + 10)));
    await Promise.all(sends);
    await p.flush();
    await p.close();
    const c = new SimpleConsumer({ host: b.host, port: b.port });
    for (const topic of [long, short]) {
      const got: { payload: Buffer; key?: Buffer; timestamp?: number; host?: string; nextOffset: number }[] = [];
      for await (const m of c.messages({ topic, partition: 1, offset: 0, maxWaitMs: 200 })) {
        got.push(m);
        if (got.length === 60) break;
      }
      expect(got.map((m) => m.payload.toString('hex'))).toEqual(records.get(topic)!.map((r) => r.value.toString('hex')));
      expect(got.map((m) => m.timestamp)).toEqual(records.get(topic)!.map((r) => r.timestamp));
      expect(got.map((m) => m.host)).toEqual(records.get(topic)!.map(() => 'stamp-host.example'));
      expect(got.map((m) => m.key?.toString())).toEqual(records.get(topic)!.map((r) => r.key));
      expect(await c.latestOffset(topic, 1)).toBe(got.at(-1)!.nextOffset);
    }
    await c.close();
  });

  it('parses broker lists and rejects bad ones', () => {
    expect(parseBrokerList('a:1, b:2,[::1]:3')).toEqual([
      { host: 'a', port: 1 },
      { host: 'b', port: 2 },
      { host: '::1', port: 3 },
    ]);
    expect(() => parseBrokerList('')).toThrow(/empty/);
    expect(() => parseBrokerList('a:1,b')).toThrow(/"b"/);
    expect(() => parseBrokerList('a:70000')).toThrow(/host:port/);
  });
});

describe('Producer: a record over the broker\'s max.message.bytes', () => {
  let broker: TestBroker;
  beforeAll(async () => {
    broker = await startTestBroker({ numPartitions: 1, flushMessages: 1, maxMessageBytes: 1000 });
  });
  afterAll(async () => {
    await broker.stop();
  });

  /** Every payload of the partition, in log order. */
  async function stored(topic: string): Promise<string[]> {
    const c = new SimpleConsumer({ host: broker.host, port: broker.port });
    const end = await c.latestOffset(topic, 0);
    const got: string[] = [];
    for await (const m of c.messages({ topic, partition: 0, offset: 0, maxWaitMs: 100 })) {
      got.push(m.payload.toString());
      if (m.nextOffset >= end) break;
    }
    await c.close();
    return got;
  }

  it('fails only its own send, saying its size and the limit; the records batched with it are stored', async () => {
    const p = new Producer({ brokerList: broker.address, acks: 2, batchSize: 100, lingerMs: 50 });
    const values = [...Array.from({ length: 5 }, (_, i) => `before-${i}`), 'x'.repeat(2000), ...Array.from({ length: 5 }, (_, i) => `after-${i}`)];
    // One call per record, all in one batch (one request): only the oversize one fails.
    const results = await Promise.allSettled(values.map((value) => p.send('sized', [{ value, partition: 0 }])));
    expect(results.map((r) => r.status)).toEqual([...Array<string>(5).fill('fulfilled'), 'rejected', ...Array<string>(5).fill('fulfilled')]);
    const err = (results[5] as PromiseRejectedResult).reason as RecordTooLargeError;
    expect(err).toBeInstanceOf(RecordTooLargeError);
    expect(err.code).toBe(ErrorCode.MessageSizeTooLarge);
    expect(err.payloadBytes).toBe(2000);
    expect(err.maxMessageBytes).toBe(1000);
    expect(err.message).toMatch(/2000 bytes is over the broker's limit of 1000 bytes/);
    expect(await stored('sized')).toEqual(values.filter((v) => v.length < 1000));
    // One call holding the oversize record: that call fails, its other records are stored.
    await expect(p.send('sized2', [{ value: 'a', partition: 0 }, { value: 'y'.repeat(1001), partition: 0 }, { value: 'b', partition: 0 }])).rejects.toBeInstanceOf(RecordTooLargeError);
    await p.flush();
    expect(await stored('sized2')).toEqual(['a', 'b']);
    // settle 'each': the call resolves with each record's result, the oversize one's being its error.
    const each = await p.send('sized3', [{ value: 'c', partition: 0 }, { value: 'z'.repeat(1500), partition: 0 }, { value: 'd', partition: 0 }], { settle: 'each' });
    expect(each[0]).toMatchObject({ topic: 'sized3', partition: 0, offset: 0 });
    expect(each[1]).toBeInstanceOf(RecordTooLargeError);
    expect((each[1] as RecordTooLargeError).payloadBytes).toBe(1500);
    expect(each[2]).toMatchObject({ topic: 'sized3', partition: 0 });
    expect(await stored('sized3')).toEqual(['c', 'd']);
    await p.close();
  });
});
