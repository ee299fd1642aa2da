/**
 * GroupConsumer with message metadata and gzip message sets (docs/format.md §2a-§2b) against a
 * real ZooKeeper and broker: metadata on GroupMessage, and the commit position of a compressed
 * set across a restart (at-least-once: never past a wrapper not wholly handed out).
 */
import { gzipSync } from 'node:zlib';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { CompressionCodec, encodeMessage, encodeMessageSet, encodeProduceAckRequest } from '@klog/protocol';
import { ZkClient, offsetPath } from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import {
  Connection,
  DecompressedTooLargeError,
  GroupConsumer,
  SimpleConsumer,
  ZkProducer,
  type GroupConsumerConfig,
  type GroupMessage,
  type MessageStream,
} from '../src/index.js';
import { startTestBroker, type TestBroker } from './helpers.js';

/** Takes `n` messages from a fresh iterator of `stream`, failing after `timeoutMs`. */
async function take(stream: MessageStream, n: number, timeoutMs = 15_000): Promise<GroupMessage[]> {
  const it = stream[Symbol.asyncIterator]();
  const out: GroupMessage[] = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    let timer: NodeJS.Timeout | undefined;
    const r = await Promise.race([it.next(), new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), deadline - Date.now())))]);
    clearTimeout(timer);
    if (r === 'timeout') throw new Error(`got ${out.length} of ${n} messages: ${out.map((m) => m.payload.toString()).join(' ')}`);
    if (r.done) throw new Error(`stream ended after ${out.length} of ${n} messages`);
    out.push(r.value);
  }
  return out;
}

describe('GroupConsumer with metadata and gzip message sets', () => {
  let connect: string;
  let broker: TestBroker;
  let zk: ZkClient;
  const toClose: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    await assertZooKeeperRunning();
  });

  afterEach(async () => {
    for (const c of toClose.splice(0).reverse()) await c.close().catch(() => {});
    await broker?.stop();
    await zk?.close();
    await removeChroot(connect);
  });

  /** One broker (id 0) with one partition per topic, in a fresh chroot. */
  async function cluster(): Promise<void> {
    connect = testConnectString();
    zk = await ZkClient.connect(connect);
    broker = await startTestBroker({ zookeeper: connect, brokerId: 0, numPartitions: 1, flushMessages: 1, zkSessionTimeoutMs: 4000 });
  }

  function consumer(config: Partial<GroupConsumerConfig> & { groupId: string }): GroupConsumer {
    const c = new GroupConsumer({
      zookeeper: connect,
      zkSessionTimeoutMs: 4000,
      rebalanceBackoffMs: 200,
      rebalanceMaxRetries: 20,
      maxWaitMs: 200,
      autoOffsetReset: 'smallest',
      autoCommit: false,
      ...config,
    });
    toClose.push(c);
    return c;
  }

  function producer(options: Partial<ConstructorParameters<typeof ZkProducer>[0]> = {}): ZkProducer {
    const p = new ZkProducer({ zookeeper: connect, acks: 2, batchSize: 1000, lingerMs: 20, ...options });
    toClose.push(p);
    return p;
  }

  const committed = async (group: string): Promise<string | undefined> => (await zk.getData(offsetPath(group, 'events', 0, 0)))?.data.toString();

  it('hands out metadata, and commits past a gzip set only once all its messages were handed out', async () => {
    await cluster();
    const gz = producer({ compression: 'gzip', stampMetadata: true, metadataHost: 'app-3' });
    const sent = await gz.send(
      'events',
      Array.from({ length: 5 }, (_, i) => ({ value: `v${i}`, key: `k${i}`, timestamp: 1_700_000_000_000 + i })),
    );
    expect(new Set(sent.map((m) => m.offset))).toEqual(new Set([0]));
    const [plain] = await producer().send('events', [{ value: 'plain' }]);
    const end = plain!.nextOffset!;

    // First member: takes 3 of the 5 messages of the wrapper, commits, leaves.
    const c1 = consumer({ groupId: 'g' });
    const s1 = (await c1.createMessageStreams({ events: 1 }))['events']![0]!;
    const first = await take(s1, 3);
    expect(first.map((m) => [m.payload.toString(), m.key?.toString(), m.timestamp, m.host])).toEqual([
      ['v0', 'k0', 1_700_000_000_000, 'app-3'],
      ['v1', 'k1', 1_700_000_000_001, 'app-3'],
      ['v2', 'k2', 1_700_000_000_002, 'app-3'],
    ]);
    expect(first.map((m) => [m.offset, m.nextOffset])).toEqual([[0, 0], [0, 0], [0, 0]]);
    await c1.commitOffsets();
    expect(await committed('g')).toBe('0');
    await c1.close();

    // After the restart the whole wrapper comes again (at-least-once), then the plain message.
    const c2 = consumer({ groupId: 'g' });
    const s2 = (await c2.createMessageStreams({ events: 1 }))['events']![0]!;
    const second = await take(s2, 6);
    expect(second.map((m) => m.payload.toString())).toEqual(['v0', 'v1', 'v2', 'v3', 'v4', 'plain']);
    expect(second.map((m) => m.nextOffset)).toEqual([0, 0, 0, 0, plain!.offset, end]);
    expect(second[5]).toEqual({ topic: 'events', brokerId: 0, partition: 0, offset: plain!.offset, nextOffset: end, payload: Buffer.from('plain') });
    // Committing what the application finished: the 4th inner message keeps the wrapper, the 5th passes it.
    await c2.commitOffsets([second[3]!]);
    expect(await committed('g')).toBe('0');
    await c2.commitOffsets([second[4]!]);
    expect(await committed('g')).toBe(String(plain!.offset));
    await c2.commitOffsets();
    expect(await committed('g')).toBe(String(end));
    await c2.close();

    // Nothing is handed out twice once committed.
    const c3 = consumer({ groupId: 'g' });
    const s3 = (await c3.createMessageStreams({ events: 1 }))['events']![0]!;
    await expect(take(s3, 1, 800)).rejects.toThrow(/got 0 of 1/);
  });

  it('a decompression bomb makes the stream throw DecompressedTooLargeError', async () => {
    await cluster();
    // Create the topic through the broker, then append a bomb after one plain message.
    await producer().send('events', [{ value: 'before' }]);
    const bomb = encodeMessage(gzipSync(encodeMessageSet([Buffer.alloc(8 * 1024 * 1024)])), CompressionCodec.Gzip);
    const raw = new Connection({ host: broker.host, port: broker.port });
    toClose.push(raw);
    await raw.request(encodeProduceAckRequest({ acks: 2, partitions: [{ topic: 'events', partition: 0, messages: bomb }] }));
    const simple = new SimpleConsumer({ host: broker.host, port: broker.port });
    toClose.push(simple);
    const bombAt = (await simple.fetch({ topic: 'events', partition: 0, offset: 0, maxBytes: 1000 })).nextOffset;

    const c = consumer({ groupId: 'g', maxFetchBytes: 64 * 1024, fetchBytes: 64 * 1024 });
    const s = (await c.createMessageStreams({ events: 1 }))['events']![0]!;
    const it = s[Symbol.asyncIterator]();
    const first = await it.next();
    expect(first.done ? undefined : first.value.payload.toString()).toBe('before');
    const err = await it.next().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DecompressedTooLargeError);
    expect(err).toMatchObject({ topic: 'events', partition: 0, offset: bombAt, maxDecompressedBytes: 4 * 64 * 1024 });
  });
});
