/**
 * GroupConsumer against a real ZooKeeper and real brokers in cluster mode (docs/design.md §4): consume a
 * topic over two brokers, commit and resume, auto.offset.reset, invalid stored offsets,
 * OffsetOutOfRange, sharing among members, and a rebalance that runs out of attempts.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ZkClient, offsetPath, ownerPath } from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { waitFor as poll } from '@klog/retry';
import { GroupConsumer, Producer, RebalanceFailedError, ZkProducer, type GroupConsumerConfig, type GroupMessage, type MessageStream } from '../src/index.js';
import { startTestBroker, type TestBroker } from './helpers.js';

interface LogEntry {
  level: string;
  msg: string | undefined;
  obj: Record<string, unknown>;
}

/** A pino-compatible logger that records what it is given. */
function recordingLogger(): { entries: LogEntry[]; logger: NonNullable<GroupConsumerConfig['logger']> } {
  const entries: LogEntry[] = [];
  const at = (level: string) => (obj: object, msg?: string) => void entries.push({ level, msg, obj: obj as Record<string, unknown> });
  return { entries, logger: { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') } };
}

/**
 * One iterator per stream, shared by {@link take} and {@link drain}: a next() that lost a race
 * against a timeout stays pending and its message goes to the following call, never lost.
 */
const readers = new WeakMap<MessageStream, { it: AsyncIterator<GroupMessage>; pending?: Promise<IteratorResult<GroupMessage>> }>();

async function nextOf(stream: MessageStream, ms: number): Promise<IteratorResult<GroupMessage> | 'timeout'> {
  let reader = readers.get(stream);
  if (!reader) readers.set(stream, (reader = { it: stream[Symbol.asyncIterator]() }));
  const p = (reader.pending ??= reader.it.next());
  let timer: NodeJS.Timeout | undefined;
  const r = await Promise.race([p, new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), Math.max(0, ms))))]);
  clearTimeout(timer);
  if (r !== 'timeout') reader.pending = undefined;
  return r;
}

/** Takes `n` messages from a stream, failing after `timeoutMs`. */
async function take(stream: MessageStream, n: number, timeoutMs = 15_000): Promise<GroupMessage[]> {
  const out: GroupMessage[] = [];
  const deadline = Date.now() + timeoutMs;
  while (out.length < n) {
    const r = await nextOf(stream, deadline - Date.now());
    if (r === 'timeout') throw new Error(`got ${out.length} of ${n} messages within ${timeoutMs} ms: ${out.map((m) => `${m.brokerId}-${m.partition}@${m.offset}:${m.payload.toString()}`).join(' ')}`);
    if (r.done) throw new Error(`stream ended after ${out.length} of ${n} messages`);
    out.push(r.value);
  }
  return out;
}

/** The messages a stream yields within `ms` (for checking that nothing more comes). */
async function drain(stream: MessageStream, ms: number): Promise<GroupMessage[]> {
  const out: GroupMessage[] = [];
  const deadline = Date.now() + ms;
  for (;;) {
    const left = deadline - Date.now();
    if (left <= 0) return out;
    const r = await nextOf(stream, left);
    if (r === 'timeout' || r.done) return out;
    out.push(r.value);
  }
}

/** Polls `check` every 50 ms, 15 s at the most by default. */
const waitFor = (what: string, check: () => boolean | Promise<boolean>, timeoutMs = 15_000): Promise<void> => poll(what, check, timeoutMs);

const key = (m: GroupMessage): string => `${m.brokerId}-${m.partition}@${m.offset}`;

describe('GroupConsumer', () => {
  let connect: string;
  let brokers: TestBroker[] = [];
  let zk: ZkClient;
  const toClose: Array<{ close(): Promise<void> }> = [];

  beforeAll(async () => {
    await assertZooKeeperRunning();
  });

  /** Two brokers (ids 0 and 1) with 2 partitions per topic, flushing every message, in a fresh chroot. */
  async function cluster(): Promise<void> {
    connect = testConnectString();
    zk = await ZkClient.connect(connect);
    brokers = [];
    for (const brokerId of [0, 1]) {
      brokers.push(await startTestBroker({ zookeeper: connect, brokerId, numPartitions: 2, flushMessages: 1, zkSessionTimeoutMs: 4000 }));
    }
  }

  afterEach(async () => {
    for (const c of toClose.splice(0).reverse()) await c.close().catch(() => {});
    for (const b of brokers) await b.stop();
    brokers = [];
    await zk?.close();
    await removeChroot(connect);
  });

  function consumer(config: Partial<GroupConsumerConfig> & { groupId: string }): GroupConsumer {
    const c = new GroupConsumer({ zookeeper: connect, zkSessionTimeoutMs: 4000, rebalanceBackoffMs: 200, rebalanceMaxRetries: 20, maxWaitMs: 200, ...config });
    toClose.push(c);
    return c;
  }

  /** Sends `n` records with keys `k0..` and values `<prefix><i>`, acknowledged once flushed. */
  async function produce(topic: string, n: number, prefix = 'm'): Promise<Array<{ brokerId: number; partition: number; offset?: number; value: string }>> {
    const producer = new ZkProducer({ zookeeper: connect, acks: 2 });
    try {
      const records = Array.from({ length: n }, (_, i) => ({ key: `k${i % 17}`, value: `${prefix}${i}` }));
      const meta = await producer.send(topic, records);
      return meta.map((m, i) => ({ brokerId: m.brokerId, partition: m.partition, offset: m.offset, value: records[i]!.value }));
    } finally {
      await producer.close();
    }
  }

  it('consumes every message of a topic spread over two brokers, in order per partition', async () => {
    await cluster();
    const sent = await produce('events', 200);
    expect(new Set(sent.map((s) => `${s.brokerId}-${s.partition}`)).size).toBe(4);
    const c = consumer({ groupId: 'g1', autoOffsetReset: 'smallest' });
    const streams = await c.createMessageStreams({ events: 2 });
    expect(streams['events']).toHaveLength(2);
    expect(c.ownedPartitions()).toEqual([0, 1].flatMap((brokerId) => [0, 1].map((partition) => ({ topic: 'events', brokerId, partition }))));
    // Thread 0 owns broker 0's partitions, thread 1 broker 1's, as Algorithm 1 says.
    for (const [brokerId, partition, thread] of [[0, 0, 0], [0, 1, 0], [1, 0, 1], [1, 1, 1]] as const) {
      expect((await zk.getData(ownerPath('g1', 'events', brokerId, partition)))?.data.toString()).toBe(`${c.consumerId}-${thread}`);
    }
    const onBroker = (b: number): number => sent.filter((s) => s.brokerId === b).length;
    const [got0, got1] = await Promise.all([take(streams['events']![0]!, onBroker(0)), take(streams['events']![1]!, onBroker(1))]);
    expect(got0.every((m) => m.brokerId === 0) && got1.every((m) => m.brokerId === 1)).toBe(true);
    const got = [...got0, ...got1];
    for (const bp of ['0-0', '0-1', '1-0', '1-1']) {
      const offsets = got.filter((m) => `${m.brokerId}-${m.partition}` === bp).map((m) => m.offset);
      expect(offsets).toEqual([...offsets].sort((x, y) => x - y));
    }
    expect(got.map((m) => m.payload.toString()).sort()).toEqual(sent.map((s) => s.value).sort());
    for (const m of got) {
      expect(sent.find((s) => s.value === m.payload.toString())).toMatchObject({ brokerId: m.brokerId, partition: m.partition, offset: m.offset });
    }
    // Nothing more arrives, and the iterators wait rather than end.
    expect(await drain(streams['events']![0]!, 300)).toEqual([]);
    // New messages arrive on the open streams.
    const more = await produce('events', 20, 'late');
    const late = await Promise.all([
      take(streams['events']![0]!, more.filter((s) => s.brokerId === 0).length),
      take(streams['events']![1]!, more.filter((s) => s.brokerId === 1).length),
    ]);
    expect(late.flat().map((m) => m.payload.toString()).sort()).toEqual(more.map((s) => s.value).sort());
    // close() ends the iterators.
    const pending = nextOf(streams['events']![0]!, 10_000);
    await c.close();
    expect(await pending).toEqual({ done: true, value: undefined });
    expect(await zk.getChildren(`/consumers/g1/ids`)).toEqual([]);
    expect(await zk.getChildren(`/consumers/g1/owners/events`)).toEqual([]);
  });

  it('commitOffsets writes the next offset of what was handed out; a new member resumes there exactly', async () => {
    await cluster();
    const sent = await produce('resume', 100);
    const a = consumer({ groupId: 'g', autoOffsetReset: 'smallest', autoCommit: false });
    const [streamA] = (await a.createMessageStreams({ resume: 1 }))['resume']!;
    const first = await take(streamA!, 40);
    await a.commitOffsets();
    const last = new Map<string, number>();
    for (const m of first) last.set(`${m.brokerId}-${m.partition}`, m.nextOffset);
    for (const [bp, next] of last) {
      const [b, p] = bp.split('-').map(Number);
      expect((await zk.getData(offsetPath('g', 'resume', b!, p!)))?.data.toString()).toBe(String(next));
    }
    await a.close(); // autoCommit off: close commits nothing more
    const b = consumer({ groupId: 'g', autoOffsetReset: 'smallest' });
    const [streamB] = (await b.createMessageStreams({ resume: 1 }))['resume']!;
    const rest = await take(streamB!, 60);
    expect(await drain(streamB!, 300)).toEqual([]);
    const all = [...first, ...rest].map(key);
    expect(new Set(all).size).toBe(100);
    expect([...first, ...rest].map((m) => m.payload.toString()).sort()).toEqual(sent.map((s) => s.value).sort());
  });

  it('auto-commit and close commit what was consumed', async () => {
    await cluster();
    await produce('auto', 30);
    const a = consumer({ groupId: 'g', autoOffsetReset: 'smallest', autoCommitIntervalMs: 100 });
    const [s] = (await a.createMessageStreams({ auto: 1 }))['auto']!;
    const got = await take(s!, 30);
    const expected = new Map<string, number>();
    for (const m of got) expected.set(`${m.brokerId}-${m.partition}`, m.nextOffset);
    await waitFor('auto-commit', async () => {
      for (const [bp, next] of expected) {
        const [b, p] = bp.split('-').map(Number);
        if ((await zk.getData(offsetPath('g', 'auto', b!, p!)))?.data.toString() !== String(next)) return false;
      }
      return true;
    }, 5000);
  });

  it('auto.offset.reset: largest starts at the log end, smallest at the beginning', async () => {
    await cluster();
    const old = await produce('reset', 20, 'old');
    const largest = consumer({ groupId: 'late', autoOffsetReset: 'largest' });
    const [sl] = (await largest.createMessageStreams({ reset: 1 }))['reset']!;
    const fresh = await produce('reset', 10, 'new');
    const gotLate = await take(sl!, 10);
    expect(gotLate.map((m) => m.payload.toString()).sort()).toEqual(fresh.map((s) => s.value).sort());
    expect(await drain(sl!, 300)).toEqual([]);

    const smallest = consumer({ groupId: 'early', autoOffsetReset: 'smallest' });
    const [ss] = (await smallest.createMessageStreams({ reset: 1 }))['reset']!;
    const gotAll = await take(ss!, 30);
    expect(gotAll.map((m) => m.payload.toString()).sort()).toEqual([...old, ...fresh].map((s) => s.value).sort());
  });

  it('a stored offset that is not a number or is negative is treated as missing, with a warning', async () => {
    await cluster();
    const sent = await produce('bad', 40);
    await zk.put(offsetPath('g', 'bad', 0, 0), 'abc');
    await zk.put(offsetPath('g', 'bad', 0, 1), '-5');
    await zk.put(offsetPath('g', 'bad', 1, 0), '');
    const { entries, logger } = recordingLogger();
    const c = consumer({ groupId: 'g', autoOffsetReset: 'smallest', logger });
    const [s] = (await c.createMessageStreams({ bad: 1 }))['bad']!;
    const got = await take(s!, 40);
    expect(got.map((m) => m.payload.toString()).sort()).toEqual(sent.map((x) => x.value).sort());
    const warned = entries.filter((e) => e.level === 'warn' && /invalid committed offset/.test(e.msg ?? ''));
    expect(warned.map((e) => [e.obj['brokerId'], e.obj['partition'], e.obj['value']])).toEqual([
      [0, 0, 'abc'],
      [0, 1, '-5'],
      [1, 0, ''],
    ]);
  });

  it('OffsetOutOfRange applies the reset policy once, with a warning', async () => {
    await cluster();
    const sent = await produce('oor', 40);
    const inP00 = sent.filter((s) => s.brokerId === 0 && s.partition === 0);
    expect(inP00.length).toBeGreaterThan(0);
    await zk.put(offsetPath('g', 'oor', 0, 0), '999999');
    const { entries, logger } = recordingLogger();
    const c = consumer({ groupId: 'g', autoOffsetReset: 'smallest', logger });
    const [s] = (await c.createMessageStreams({ oor: 1 }))['oor']!;
    // Other partitions have no offset: smallest. Partition 0-0 is out of range: reset to earliest.
    const got = await take(s!, 40);
    expect(got.map((m) => m.payload.toString()).sort()).toEqual(sent.map((x) => x.value).sort());
    expect(await drain(s!, 500)).toEqual([]);
    const warned = entries.filter((e) => /offset out of range/.test(e.msg ?? ''));
    expect(warned).toHaveLength(1);
    expect(warned[0]).toMatchObject({ level: 'warn', obj: { brokerId: 0, partition: 0, offset: 999999, earliest: 0, resetTo: 0 } });

    // With largest, an out-of-range offset jumps to the end: only later messages come.
    await zk.put(offsetPath('g2', 'oor', 1, 1), '123456789');
    const rec2 = recordingLogger();
    const d = consumer({ groupId: 'g2', autoOffsetReset: 'largest', logger: rec2.logger });
    const [sd] = (await d.createMessageStreams({ oor: 1 }))['oor']!;
    await waitFor('the reset', () => rec2.entries.some((e) => /offset out of range/.test(e.msg ?? '')));
    expect(await drain(sd!, 300)).toEqual([]);
    const later = await produce('oor', 8, 'later');
    const gotLater = await take(sd!, 8);
    expect(gotLater.map((m) => m.payload.toString()).sort()).toEqual(later.map((x) => x.value).sort());
    expect(rec2.entries.filter((e) => /offset out of range/.test(e.msg ?? ''))).toHaveLength(1);
  });

  it('members share the partitions; when one leaves the other takes everything, its own partitions resuming from its commit', async () => {
    await cluster();
    const sent = await produce('shared', 120);
    const a = consumer({ groupId: 'g', autoOffsetReset: 'smallest', consumerId: 'a' });
    const [sa] = (await a.createMessageStreams({ shared: 1 }))['shared']!;
    const b = consumer({ groupId: 'g', autoOffsetReset: 'smallest', consumerId: 'b' });
    await b.createMessageStreams({ shared: 1 });
    await waitFor('two partitions each', () => a.ownedPartitions().length === 2 && b.ownedPartitions().length === 2);
    expect(a.ownedPartitions().map((p) => p.brokerId)).toEqual([0, 0]);
    expect(b.ownedPartitions().map((p) => p.brokerId)).toEqual([1, 1]);
    const gotA = await take(sa!, 10);
    await b.close();
    await waitFor('a owns all four', () => a.ownedPartitions().length === 4);
    const got: GroupMessage[] = [...gotA];
    const seen = new Set(got.map(key));
    // Everything arrives; b's messages were committed on close, a's before its rebalance.
    for (;;) {
      const more = await drain(sa!, 700);
      if (more.length === 0) break;
      for (const m of more) {
        got.push(m);
        seen.add(key(m));
      }
    }
    const fromB = sent.filter((s) => s.brokerId === 1).length;
    const fromA = sent.length - fromB;
    // a read broker 0's messages; b's were not consumed by b (nobody read its stream), so a reads them all.
    expect(got.filter((m) => m.brokerId === 0)).toHaveLength(fromA);
    expect(got.filter((m) => m.brokerId === 1)).toHaveLength(fromB);
    expect(seen.size).toBe(sent.length);
  });

  it('a rebalance that keeps finding a partition owned fails clearly and leaves no claim behind', async () => {
    await cluster();
    await produce('held', 4);
    // Another session holds the last partition (as a member that has not released it yet would).
    const other = await ZkClient.connect(connect);
    toClose.push(other);
    await other.create(ownerPath('g', 'held', 1, 1), 'ghost-0', { mode: 'ephemeral' });
    const { entries, logger } = recordingLogger();
    const c = consumer({ groupId: 'g', rebalanceMaxRetries: 3, rebalanceBackoffMs: 50, logger });
    const err = await c.createMessageStreams({ held: 1 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RebalanceFailedError);
    expect((err as Error).message).toMatch(/after 3 attempts/);
    expect(entries.filter((e) => e.msg === 'rebalance attempt failed; backing off')).toHaveLength(3);
    expect(entries.some((e) => e.level === 'error' && /rebalance failed/.test(e.msg ?? ''))).toBe(true);
    // Partitions 0-0, 0-1, 1-0 were claimed in each attempt and released again.
    expect(await zk.getChildren('/consumers/g/owners/held')).toEqual(['1-1']);
    expect(await zk.getChildren('/consumers/g/ids')).toEqual([]);
  });

  it('streams throw when a later rebalance runs out of attempts', async () => {
    await cluster();
    await produce('later', 4);
    const c = consumer({ groupId: 'g', consumerId: 'c', rebalanceMaxRetries: 2, rebalanceBackoffMs: 50 });
    const [s] = (await c.createMessageStreams({ later: 1 }))['later']!;
    const pending = s![Symbol.asyncIterator]().next();
    // A ghost session holds the partitions of a broker that is about to join.
    const other = await ZkClient.connect(connect);
    toClose.push(other);
    await other.create(ownerPath('g', 'later', 2, 1), 'ghost-0', { mode: 'ephemeral' });
    const third = await startTestBroker({ zookeeper: connect, brokerId: 2, numPartitions: 2, flushMessages: 1 });
    brokers.push(third);
    const direct = new Producer({ brokerList: third.address, acks: 1 });
    await direct.send('later', [{ value: 'x', partition: 0 }]); // creates the topic on broker 2, which registers it
    await direct.close();
    await expect(pending).rejects.toBeInstanceOf(RebalanceFailedError);
    await expect(s![Symbol.asyncIterator]().next()).rejects.toBeInstanceOf(RebalanceFailedError);
    expect(c.ownedPartitions()).toEqual([]);
    expect(await zk.getChildren('/consumers/g/owners/later')).toEqual(['2-1']);
    expect(await zk.getChildren('/consumers/g/ids')).toEqual([]);
  });
});
