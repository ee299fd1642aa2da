/** SimpleConsumer against a real broker: fetch, offsets, errors, long poll, large messages (docs/design.md §3). */
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ErrorCode } from '@klog/protocol';
import { KlogBrokerError, MessageTooLargeError, OffsetOutOfRangeError, Producer, SimpleConsumer } from '../src/index.js';
import { startTestBroker, type TestBroker } from './helpers.js';

describe('SimpleConsumer', () => {
  let broker: TestBroker;
  let producer: Producer;
  let consumer: SimpleConsumer;
  beforeAll(async () => {
    broker = await startTestBroker({ flushMessages: 1, segmentBytes: 1024 * 1024 });
    producer = new Producer({ brokerList: broker.address, acks: 2 });
    consumer = new SimpleConsumer({ host: broker.host, port: broker.port, maxFetchBytes: 64 * 1024 });
  });
  afterAll(async () => {
    await consumer.close();
    await producer.close();
    await broker.stop();
  });

  it('fetch returns whole messages, drops a trailing partial one and gives the next offset', async () => {
    await producer.send('cut', ['aaaa', 'bbbb', 'cccc'].map((value) => ({ value, partition: 0 })));
    // Each message is 14 bytes; 30 bytes hold two and 2 bytes of the third.
    const r = await consumer.fetch({ topic: 'cut', partition: 0, offset: 0, maxBytes: 30 });
    expect(r.messages.map((m) => [m.offset, m.nextOffset, m.payload.toString()])).toEqual([
      [0, 14, 'aaaa'],
      [14, 28, 'bbbb'],
    ]);
    expect(r.nextOffset).toBe(28);
    const rest = await consumer.fetch({ topic: 'cut', partition: 0, offset: r.nextOffset, maxBytes: 30 });
    expect(rest.messages.map((m) => m.payload.toString())).toEqual(['cccc']);
    // Nothing whole: no messages, nextOffset stays, and the size of the next message is known.
    const small = await consumer.fetch({ topic: 'cut', partition: 0, offset: 0, maxBytes: 10 });
    expect(small).toMatchObject({ messages: [], nextOffset: 0, partialMessageBytes: 14 });
  });

  it('OffsetOutOfRange carries the requested offset, earliest and end', async () => {
    const [last] = (await producer.send('range', [{ value: 'only', partition: 0 }])).slice(-1);
    const err = await consumer.fetch({ topic: 'range', partition: 0, offset: 5000, maxBytes: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(OffsetOutOfRangeError);
    expect(err).toMatchObject({ code: ErrorCode.OffsetOutOfRange, topic: 'range', partition: 0, offset: 5000, earliest: 0, end: last!.nextOffset });
    expect((err as Error).message).toMatch(/\[0, 14\]/);
    // At the end: an empty set, not an error.
    const atEnd = await consumer.fetch({ topic: 'range', partition: 0, offset: last!.nextOffset!, maxBytes: 100 });
    expect(atEnd.messages).toEqual([]);
  });

  it('an offset inside a message is an error, never data', async () => {
    await producer.send('inside', [{ value: 'hello world', partition: 0 }]);
    const err = await consumer.fetch({ topic: 'inside', partition: 0, offset: 3, maxBytes: 100 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KlogBrokerError);
    expect([ErrorCode.InvalidMessageOffset, ErrorCode.InvalidMessage]).toContain((err as KlogBrokerError).code);
    expect(err).toMatchObject({ topic: 'inside', partition: 0, offset: 3 });
  });

  it('offsetsBefore, earliestOffset and latestOffset', async () => {
    const meta = await producer.send('offs', [{ value: '1', partition: 0 }, { value: '22', partition: 0 }]);
    expect(await consumer.earliestOffset('offs', 0)).toBe(0);
    expect(await consumer.latestOffset('offs', 0)).toBe(meta[1]!.nextOffset);
    expect(await consumer.offsetsBefore('offs', 0, -1, 1)).toEqual([meta[1]!.nextOffset]);
    const before = await consumer.offsetsBefore('offs', 0, Date.now() + 60_000, 10);
    expect(before).toContain(0);
  });

  it('a long poll returns as soon as data arrives', async () => {
    await producer.send('poll', [{ value: 'first', partition: 0 }]);
    const end = await consumer.latestOffset('poll', 0);
    const started = Date.now();
    const fetched = consumer.fetch({ topic: 'poll', partition: 0, offset: end, maxBytes: 1024, maxWaitMs: 10_000 });
    setTimeout(() => void producer.send('poll', [{ value: 'wake up', partition: 0 }]), 300);
    const r = await fetched;
    const waited = Date.now() - started;
    expect(r.messages.map((m) => m.payload.toString())).toEqual(['wake up']);
    expect(waited).toBeGreaterThanOrEqual(250);
    expect(waited).toBeLessThan(5000);
  });

  it('a long poll with no data answers empty after maxWaitMs', async () => {
    await producer.send('quiet', [{ value: 'first', partition: 0 }]);
    const end = await consumer.latestOffset('quiet', 0);
    const started = Date.now();
    const r = await consumer.fetch({ topic: 'quiet', partition: 0, offset: end, maxBytes: 1024, maxWaitMs: 400 });
    expect(r.messages).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(350);
  });

  it('the iterator follows the log and wakes up for new messages', async () => {
    await producer.send('follow', [{ value: 'a', partition: 0 }]);
    const stop = new AbortController();
    const got: string[] = [];
    const reading = (async () => {
      for await (const m of consumer.messages({ topic: 'follow', partition: 0, offset: 0, maxWaitMs: 5000, signal: stop.signal })) {
        got.push(m.payload.toString());
        if (got.length === 3) stop.abort();
      }
    })();
    await new Promise((r) => setTimeout(r, 300));
    await producer.send('follow', [{ value: 'b', partition: 0 }, { value: 'c', partition: 0 }]);
    await reading;
    expect(got).toEqual(['a', 'b', 'c']);
  });

  it('an idle iterator without long poll backs off instead of spinning, and stops on abort', async () => {
    const c = new SimpleConsumer({ host: broker.host, port: broker.port });
    const fetch = vi.spyOn(c, 'fetch');
    const stop = new AbortController();
    setTimeout(() => stop.abort(), 1500);
    const started = Date.now();
    for await (const _ of c.messages({ topic: 'idle', partition: 0, offset: 0, maxWaitMs: 0, signal: stop.signal })) expect.fail('no data expected');
    expect(Date.now() - started).toBeLessThan(2500);
    // Back-off 10, 20, 40, ... 1000 ms: about 8 fetches in 1.5 s, not thousands.
    expect(fetch.mock.calls.length).toBeLessThan(15);
    await c.close();
  });

  it('grows the fetch size for a message larger than it: no spin, no skip', async () => {
    const big = Buffer.alloc(20_000, 7);
    await producer.send('large', [
      { value: 'small before', partition: 0 },
      { value: big, partition: 0 },
      { value: 'small after', partition: 0 },
    ]);
    const c = new SimpleConsumer({ host: broker.host, port: broker.port, maxFetchBytes: 64 * 1024 });
    const fetch = vi.spyOn(c, 'fetch');
    const got: Buffer[] = [];
    for await (const m of c.messages({ topic: 'large', partition: 0, offset: 0, fetchBytes: 100, maxWaitMs: 100 })) {
      got.push(m.payload);
      if (got.length === 3) break;
    }
    expect(got[0]!.toString()).toBe('small before');
    expect(got[1]!.equals(big)).toBe(true);
    expect(got[2]!.toString()).toBe('small after');
    // 100, then one grown fetch of 25,600 that holds the big message (and the one after it).
    const sizes = fetch.mock.calls.map(([f]) => f.maxBytes);
    expect(sizes).toEqual([100, 100, 25_600]);
    await c.close();
  });

  it('past the cap it throws MessageTooLargeError naming topic, partition, offset and size', async () => {
    const [meta] = await producer.send('huge', [{ value: Buffer.alloc(10_000), partition: 0 }]);
    const c = new SimpleConsumer({ host: broker.host, port: broker.port, maxFetchBytes: 4096 });
    const fetch = vi.spyOn(c, 'fetch');
    const err = await (async () => {
      for await (const _ of c.messages({ topic: 'huge', partition: 0, offset: 0, fetchBytes: 512, maxWaitMs: 100 })) expect.fail('nothing fits');
    })().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(MessageTooLargeError);
    expect(err).toMatchObject({ topic: 'huge', partition: 0, offset: meta!.offset, size: 10_010, maxFetchBytes: 4096 });
    expect((err as Error).message).toMatch(/offset 0 of topic huge partition 0 is 10010 bytes/);
    // 512, then the cap, then the error: a bounded number of fetches.
    expect(fetch.mock.calls.map(([f]) => f.maxBytes)).toEqual([512, 4096]);
    await c.close();
  });

  it('rejects a fetch size above the cap before sending anything', async () => {
    await expect(consumer.fetch({ topic: 'cut', partition: 0, offset: 0, maxBytes: 1 << 20 })).rejects.toThrow(RangeError);
  });
});
