/**
 * The group coordinator over the wire, in a cluster of two brokers on the real ZooKeeper: both
 * brokers name the same coordinator and the other answers NOT_COORDINATOR; generations,
 * Heartbeat's REBALANCE_IN_PROGRESS / ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID, session timeouts;
 * commits fenced by generation and stored under /consumers/<group>/offsets, where `klog groups
 * --describe` shows them; Kafka partitions numbered over the brokers. And a standalone broker's
 * group offsets surviving its restart.
 */
import { ApiKey, KafkaErrorCode, type KafkaReader, type KafkaWriter } from '@klog/kafka-protocol';
import { ZkClient } from '@klog/zk-registry';
import { removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker, klog, lines, run, sleep } from './harness.js';
import { KafkaWire } from './wire.js';

const join = (group: string, memberId: string, sessionTimeoutMs = 4000) => (w: KafkaWriter) =>
  w.string(group).int32(sessionTimeoutMs).string(memberId).string('consumer').array([{ name: 'range', metadata: Buffer.from('sub') }], (w, p) => w.string(p.name).bytes(p.metadata));
const readJoin = (r: KafkaReader) => ({ error: r.int16(), generation: r.int32(), protocol: r.string(), leader: r.string(), memberId: r.string(), members: r.array((r) => r.string() + '=' + r.bytes().toString()) });
const heartbeat = (group: string, generation: number, memberId: string) => (w: KafkaWriter) => w.string(group).int32(generation).string(memberId);
const commit = (group: string, generation: number, memberId: string, topic: string, partition: number, offset: number) => (w: KafkaWriter) =>
  w
    .string(group)
    .int32(generation)
    .string(memberId)
    .int64(-1)
    .array([topic], (w, t) => w.string(t).array([partition], (w, p) => w.int32(p).int64(offset).string(null)));
const readCommit = (r: KafkaReader) => r.array((r) => (r.string(), r.array((r) => (r.int32(), r.int16()))))[0]![0]!;
const fetchOffset = (group: string, topic: string, partition: number) => (w: KafkaWriter) =>
  w.string(group).array([topic], (w, t) => w.string(t).array([partition], (w, p) => w.int32(p)));
const readFetchOffset = (r: KafkaReader) =>
  r.array((r) => (r.string(), r.array((r) => ({ partition: r.int32(), offset: r.int64(), metadata: r.nullableString(), error: r.int16() }))))[0]![0]!;

describe('the group coordinator in a cluster', () => {
  const zookeeper = testConnectString('klog-kafka');
  let brokers: Broker[] = [];
  const wires: KafkaWire[] = [];
  beforeAll(async () => {
    brokers = [
      await Broker.start(['--zookeeper', zookeeper, '--broker-id', '0', '--num-partitions', '2']),
      await Broker.start(['--zookeeper', zookeeper, '--broker-id', '1', '--num-partitions', '2']),
    ];
  });
  afterAll(async () => {
    for (const w of wires) w.close();
    for (const b of brokers) await b.remove();
    await removeChroot(zookeeper);
  });
  const open = async (b: Broker) => {
    const w = await KafkaWire.open(b.kafka);
    wires.push(w);
    return w;
  };

  it('Metadata numbers a topic’s partitions over the brokers that hold it, by broker id', async () => {
    // A paper topic is on the brokers it was produced to (klog's own producer, one to each).
    for (const b of brokers) expect((await klog(['produce', '--broker-list', b.klog, '--topic', 'spread'], { input: 'x\n' })).code).toBe(0);
    await sleep(1500);
    const l = await run('kcat', ['-b', brokers[1]!.kafka, '-L', '-t', 'spread']);
    const text = l.stdout.toString();
    expect(text).toContain(' 2 brokers:');
    expect(text).toContain('topic "spread" with 4 partitions:');
    expect(lines(text).filter((x) => x.includes('partition ')).map((x) => x.trim().split(',').slice(0, 2).join(','))).toEqual([
      'partition 0, leader 0',
      'partition 1, leader 0',
      'partition 2, leader 1',
      'partition 3, leader 1',
    ]);
    // A produce to a partition another broker leads is refused, not appended here.
    const w = await open(brokers[0]!);
    const r = await w.call(ApiKey.Produce, 2, (w) => w.int16(1).int32(1000).array(['spread'], (w, t) => w.string(t).array([2], (w, p) => w.int32(p).bytes(Buffer.alloc(0)))));
    expect(r.array((r) => (r.string(), r.array((r) => (r.int32(), r.int16()))))[0]![0]).toBe(KafkaErrorCode.NotLeaderForPartition);
  });

  it('one coordinator per group; generations, heartbeats, session timeouts and fenced commits', async () => {
    const group = 'wire-group';
    const c0 = await open(brokers[0]!);
    const c1 = await open(brokers[1]!);
    const find = async (w: KafkaWire) => {
      const r = await w.call(ApiKey.FindCoordinator, 0, (w) => w.string(group));
      return { error: r.int16(), nodeId: r.int32(), host: r.string(), port: r.int32() };
    };
    const f0 = await find(c0);
    expect(await find(c1)).toEqual(f0);
    const coordinator = brokers[f0.nodeId]!;
    expect(f0.port).toBe(coordinator.kafkaPort);
    const other = brokers[1 - f0.nodeId]!;
    const wrong = await open(other);
    expect(readJoin(await wrong.call(ApiKey.JoinGroup, 0, join(group, ''))).error).toBe(KafkaErrorCode.NotCoordinator);
    expect((await wrong.call(ApiKey.Heartbeat, 0, heartbeat(group, 1, 'x'))).int16()).toBe(KafkaErrorCode.NotCoordinator);

    const a = await open(coordinator);
    const b = await open(coordinator);
    const ja = readJoin(await a.call(ApiKey.JoinGroup, 0, join(group, '')));
    expect(ja).toMatchObject({ error: 0, generation: 1, protocol: 'range', leader: ja.memberId });
    expect(ja.members).toEqual([`${ja.memberId}=sub`]);
    const sync = (w: KafkaWire, gen: number, member: string, assignments: [string, string][]) =>
      w.call(ApiKey.SyncGroup, 0, (w) => w.string(group).int32(gen).string(member).array(assignments, (w, [m, x]) => w.string(m).bytes(Buffer.from(x))));
    let s = await sync(a, 1, ja.memberId, [[ja.memberId, 'all']]);
    expect([s.int16(), s.bytes().toString()]).toEqual([0, 'all']);
    expect((await a.call(ApiKey.Heartbeat, 0, heartbeat(group, 1, ja.memberId))).int16()).toBe(0);

    // A second member: the first learns of the rebalance from its heartbeat and rejoins.
    const jbAnswer = b.call(ApiKey.JoinGroup, 0, join(group, ''));
    await sleep(100);
    expect((await a.call(ApiKey.Heartbeat, 0, heartbeat(group, 1, ja.memberId))).int16()).toBe(KafkaErrorCode.RebalanceInProgress);
    const ja2 = readJoin(await a.call(ApiKey.JoinGroup, 0, join(group, ja.memberId)));
    const jb = readJoin(await jbAnswer);
    expect([ja2.generation, jb.generation, ja2.leader, jb.leader]).toEqual([2, 2, ja.memberId, ja.memberId]);
    expect(jb.members).toEqual([]);
    expect(ja2.members.sort()).toEqual([`${ja.memberId}=sub`, `${jb.memberId}=sub`].sort());
    const sb = sync(b, 2, jb.memberId, []);
    s = await sync(a, 2, ja.memberId, [[ja.memberId, 'p0'], [jb.memberId, 'p1']]);
    expect(s.int16()).toBe(0);
    const rb = await sb;
    expect([rb.int16(), rb.bytes().toString()]).toEqual([0, 'p1']);
    const bLastSeen = Date.now();
    // From here on b is silent; a heartbeats every 500 ms on a connection of its own (a Kafka
    // client's heartbeat thread), so a slow step below cannot let a's session lapse.
    const keepAlive = await open(coordinator);
    const aHeartbeats: { code: number; at: number }[] = [];
    const rebalanced = (async () => {
      for (;;) {
        const code = (await keepAlive.call(ApiKey.Heartbeat, 0, heartbeat(group, 2, ja.memberId))).int16();
        aHeartbeats.push({ code, at: Date.now() });
        if (code !== 0 || Date.now() - bLastSeen > 30_000) return code;
        await sleep(500);
      }
    })();

    // The old generation is fenced: heartbeats and commits of generation 1 are refused.
    expect((await a.call(ApiKey.Heartbeat, 0, heartbeat(group, 1, ja.memberId))).int16()).toBe(KafkaErrorCode.IllegalGeneration);
    expect(readCommit(await a.call(ApiKey.OffsetCommit, 2, commit(group, 1, ja.memberId, 'spread', 0, 0)))).toBe(KafkaErrorCode.IllegalGeneration);
    expect(readCommit(await a.call(ApiKey.OffsetCommit, 2, commit(group, 2, 'zombie', 'spread', 0, 0)))).toBe(KafkaErrorCode.UnknownMemberId);
    expect(readCommit(await a.call(ApiKey.OffsetCommit, 2, commit(group, -1, '', 'spread', 0, 0)))).toBe(KafkaErrorCode.IllegalGeneration);
    // Partition 2 is broker 1's klog partition 0: the commit lands on /consumers/<group>/offsets/spread/1-0.
    expect(readCommit(await a.call(ApiKey.OffsetCommit, 2, commit(group, 2, ja.memberId, 'spread', 2, 0)))).toBe(0);
    expect(readFetchOffset(await a.call(ApiKey.OffsetFetch, 1, fetchOffset(group, 'spread', 2)))).toMatchObject({ partition: 2, offset: 0, error: 0 });
    expect(readFetchOffset(await a.call(ApiKey.OffsetFetch, 1, fetchOffset(group, 'spread', 1)))).toMatchObject({ offset: -1, error: 0 });
    const zk = await ZkClient.connect(zookeeper);
    try {
      expect((await zk.getData(`/consumers/${group}/offsets/spread/1-0`))?.data.toString()).toBe('0');
    } finally {
      await zk.close();
    }
    const d = await klog(['groups', '--zookeeper', zookeeper, '--describe', group, '--json']);
    expect(d.code, d.stderr).toBe(0);
    type Row = { topic: string; brokerId: number; partition: number; offset: number | null; logEnd: number | null; lag: number | null };
    const described = JSON.parse(d.stdout.toString()) as { partitions: Row[] };
    const row = described.partitions.find((p) => p.topic === 'spread' && p.brokerId === 1 && p.partition === 0);
    expect(row).toMatchObject({ offset: 0 });

    // b went silent: after its session timeout (4 s) it is no member, and a is asked to rejoin;
    // until then every heartbeat of a was answered 0.
    expect(await rebalanced).toBe(KafkaErrorCode.RebalanceInProgress);
    const removedAt = aHeartbeats.at(-1)!.at;
    expect(aHeartbeats.slice(0, -1).every((h) => h.code === 0)).toBe(true);
    expect(removedAt - bLastSeen).toBeGreaterThanOrEqual(3500);
    keepAlive.close();
    expect((await b.call(ApiKey.Heartbeat, 0, heartbeat(group, 2, jb.memberId))).int16()).toBe(KafkaErrorCode.UnknownMemberId);
    expect((await a.call(ApiKey.Heartbeat, 0, heartbeat(group, 2, ja.memberId))).int16()).toBe(KafkaErrorCode.RebalanceInProgress);
    expect((await a.call(ApiKey.LeaveGroup, 0, (w) => w.string(group).string(ja.memberId))).int16()).toBe(0);
    expect(readCommit(await a.call(ApiKey.OffsetCommit, 2, commit(group, -1, '', 'spread', 2, 0)))).toBe(0);
  }, 60_000);
});

describe('group offsets of a standalone broker', () => {
  it('are kept in the log dir and survive a restart', async () => {
    let broker = await Broker.start();
    try {
      expect((await run('kcat', ['-b', broker.kafka, '-P', '-t', 'kept'], { input: 'a\nb\nc\n' })).code).toBe(0);
      let w = await KafkaWire.open(broker.kafka);
      expect(readCommit(await w.call(ApiKey.OffsetCommit, 2, commit('kept-group', -1, '', 'kept', 0, 25)))).toBe(0);
      w.close();
      await broker.stop();
      broker = await Broker.start([], broker.logDir);
      w = await KafkaWire.open(broker.kafka);
      // 25 is inside the second message (24 bytes each, with kcat's timestamp): the next message's offset is stored.
      expect(readFetchOffset(await w.call(ApiKey.OffsetFetch, 1, fetchOffset('kept-group', 'kept', 0)))).toMatchObject({ offset: 48, error: 0 });
      w.close();
    } finally {
      await broker.remove();
    }
  });
});
