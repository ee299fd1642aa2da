/**
 * Replicated topics through the Kafka listener, as they are (docs/kafka-protocol.md,
 * "Partitions"; docs/replication.md), on 3 brokers over the real ZooKeeper: `kcat -L` lists each
 * partition with its leader, replicas and ISR as ZooKeeper has them; kcat with acks -1 and kafkajs
 * (producer and consumer group) write and read back through the leaders; a follower answers
 * NOT_LEADER_FOR_PARTITION; with the followers frozen a message flushed on the leader stays
 * invisible until the high watermark passes it (Fetch and ListOffsets latest), and once the ISR has shrunk below
 * `min.insync.replicas` acks -1 is refused with NOT_ENOUGH_REPLICAS and nothing is appended;
 * Produce requests with acks -1 sent back to back are appended while the first waits for the
 * high watermark, and answered in order;
 * committed offsets go to `/consumers/<group>/offsets/<topic>/<partition>`, moved to a message
 * boundary only by a coordinator that holds a replica; a paper topic's only by the broker that
 * holds the partition, never from the coordinator's own partition of the same number.
 */
import { ApiKey, KafkaErrorCode } from '@klog/kafka-protocol';
import { ZkClient } from '@klog/zk-registry';
import { Kafka, logLevel } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { klog, lines, run, waitFor } from './harness.js';
import { KafkaReplicatedCluster } from './replicated-cluster.js';
import { commitOffset, fetchCommitted, fetchValues, listOffset, produce, produceFlushedKlog } from './replicated-wire.js';
import { KafkaWire } from './wire.js';

const TOPIC = 'events';
const PARTITIONS = 3;
/** Followers are frozen for about replica.lag.time.max.ms: well within the session timeout. */
const LAG_MS = 3000;
const SESSION_MS = 15_000;

const cluster = new KafkaReplicatedCluster({
  brokers: 3,
  sessionTimeoutMs: SESSION_MS,
  properties: { 'replica.lag.time.max.ms': LAG_MS, 'replica.fetch.wait.max.ms': 200, 'replica.fetch.backoff.ms': 200 },
});
const wires: KafkaWire[] = [];
const open = async (id: number): Promise<KafkaWire> => {
  const w = await KafkaWire.open(cluster.kafka(id));
  wires.push(w);
  return w;
};
const kcat = (id: number, args: string[], input?: string) => run('kcat', ['-b', cluster.kafka(id), ...args], { input, timeoutMs: 60_000 });

beforeAll(async () => {
  process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
  await cluster.start();
  await cluster.createTopic(TOPIC, PARTITIONS, 3, 2);
});
afterAll(async () => {
  for (const w of wires) w.close();
  await cluster.close();
});

describe('a replicated topic through the Kafka listener', () => {
  it('kcat -L on every broker lists each partition with its leader, replicas and ISR as in ZooKeeper', async () => {
    const states = await cluster.waitForIsr(TOPIC, PARTITIONS, 3);
    const replicas = await cluster.replicas(TOPIC);
    for (let id = 0; id < 3; id++) {
      const l = await kcat(id, ['-L', '-t', TOPIC]);
      expect(l.code, l.stderr).toBe(0);
      const text = l.stdout.toString();
      expect(text).toContain(' 3 brokers:');
      for (let b = 0; b < 3; b++) expect(text).toContain(`broker ${b} at ${cluster.kafka(b)}`);
      expect(text).toContain(`topic "${TOPIC}" with ${PARTITIONS} partitions:`);
      const rows = lines(text).filter((x) => x.includes('partition ')).map((x) => x.trim());
      expect(rows).toEqual(states.map((s, p) => `partition ${p}, leader ${s.leader}, replicas: ${replicas[p]!.join(',')}, isrs: ${s.isr.join(',')}`));
    }
  });

  it('kcat -P with acks -1 through any broker, then kcat -C -e reads every message back and stops at the high watermark', async () => {
    const values = Array.from({ length: 300 }, (_, i) => `kcat ${String(i).padStart(3, '0')}`);
    const p = await kcat(1, ['-P', '-t', TOPIC, '-X', 'acks=-1'], values.join('\n') + '\n');
    expect(p.code, p.stderr).toBe(0);
    const c = await kcat(2, ['-C', '-e', '-o', 'beginning', '-t', TOPIC, '-f', '%p %o %s\n']);
    expect(c.code, c.stderr).toBe(0);
    const got = lines(c.stdout).map((l) => l.split(' '));
    expect(got.map((g) => `${g[2]} ${g[3]}`).sort()).toEqual(values);
    // Each partition ends where ListOffsets latest says: its last message's offset + 1.
    for (let partition = 0; partition < PARTITIONS; partition++) {
      const offsets = got.filter((g) => Number(g[0]) === partition).map((g) => Number(g[1]));
      const end = offsets.length === 0 ? 0 : offsets.at(-1)! + 1;
      const leader = (await cluster.state(TOPIC, partition))!.leader;
      expect(await listOffset(await open(leader), TOPIC, partition, -1)).toMatchObject({ error: 0, offset: end });
      if (offsets.length > 0) expect(c.stderr).toContain(`Reached end of topic ${TOPIC} [${partition}] at offset ${end}`);
    }
  });

  it('kafkajs: a producer with acks -1 and a consumer group read back every message; offsets committed per partition, at message boundaries', async () => {
    const kafka = new Kafka({ brokers: cluster.bootstrap, clientId: 'kafkajs-replicated', logLevel: logLevel.NOTHING });
    const producer = kafka.producer();
    await producer.connect();
    const values = Array.from({ length: 600 }, (_, i) => `kafkajs ${String(i).padStart(3, '0')}`);
    for (let i = 0; i < values.length; i += 60) {
      const results = await producer.send({ topic: TOPIC, acks: -1, messages: values.slice(i, i + 60).map((value) => ({ value })) });
      for (const r of results) expect(r.errorCode).toBe(0);
    }
    await producer.disconnect();

    const group = 'kafkajs-replicated';
    const consumer = kafka.consumer({ groupId: group, maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topic: TOPIC, fromBeginning: true });
    const got: string[] = [];
    await consumer.run({ eachMessage: async ({ message }) => void got.push(message.value!.toString()) });
    await waitFor('the consumer to read every kafkajs message', () => got.filter((v) => v.startsWith('kafkajs ')).length >= values.length, 60_000);
    await consumer.disconnect(); // commits what it read
    expect(got.filter((v) => v.startsWith('kafkajs ')).sort()).toEqual(values);

    // The commits are the replicated layout's (docs/replication.md §14), each at the partition's end:
    // every broker holds a replica (RF 3), so the coordinator moved "last offset + 1" to the next message, the end.
    const zk = await ZkClient.connect(cluster.connect);
    try {
      for (let partition = 0; partition < PARTITIONS; partition++) {
        const node = await zk.getData(`/consumers/${group}/offsets/${TOPIC}/${partition}`);
        expect(node, `partition ${partition}`).toBeDefined();
        const leader = (await cluster.state(TOPIC, partition))!.leader;
        const end = await fetchValues(await open(leader), TOPIC, partition, Number(node!.data.toString()));
        expect(end).toMatchObject({ error: 0, values: [] });
        const kafkaEnd = (await listOffset(await open(leader), TOPIC, partition, -1)).offset;
        expect(Number(node!.data.toString())).toBeGreaterThanOrEqual(kafkaEnd);
      }
    } finally {
      await zk.close();
    }
  });

  it('a follower answers Produce, Fetch and ListOffsets with NOT_LEADER_FOR_PARTITION; a partition past the count is UNKNOWN_TOPIC_OR_PARTITION', async () => {
    const s = (await cluster.state(TOPIC, 0))!;
    const follower = s.isr.find((id) => id !== s.leader)!;
    const w = await open(follower);
    expect((await produce(w, TOPIC, 0, -1, ['to a follower'])).error).toBe(KafkaErrorCode.NotLeaderForPartition);
    expect((await produce(w, TOPIC, 0, 1, ['to a follower'])).error).toBe(KafkaErrorCode.NotLeaderForPartition);
    expect((await fetchValues(w, TOPIC, 0, 0)).error).toBe(KafkaErrorCode.NotLeaderForPartition);
    expect((await listOffset(w, TOPIC, 0, -1)).error).toBe(KafkaErrorCode.NotLeaderForPartition);
    expect((await produce(w, TOPIC, PARTITIONS, 1, ['past the count'])).error).toBe(KafkaErrorCode.UnknownTopicOrPartition);
    const leader = await open(s.leader);
    expect((await fetchValues(leader, TOPIC, 0, 0)).values).not.toContain('to a follower');
  });

  it('with the followers frozen, a message flushed on the leader waits for the high watermark; below min.insync.replicas acks -1 gets NOT_ENOUGH_REPLICAS and appends nothing', async () => {
    const topic = 'frozen';
    await cluster.createTopic(topic, 1, 3, 2);
    const s = (await cluster.state(topic, 0))!;
    const followers = s.isr.filter((id) => id !== s.leader);
    const w = await open(s.leader);
    expect(await produce(w, topic, 0, -1, ['before'])).toMatchObject({ error: 0, offset: 0 });
    const hwBefore = (await listOffset(w, topic, 0, -1)).offset;
    for (const id of followers) cluster.brokers[id]!.proc.kill('SIGSTOP');
    try {
      // Flushed on the leader (klog's acks 2), not on the frozen ISR members: not visible.
      const appended = await produceFlushedKlog(cluster.brokers[s.leader]!.klog, topic, 0, 'past the high watermark');
      expect(appended.error).toBe(0);
      const hidden = await fetchValues(w, topic, 0, 0);
      const latest = await listOffset(w, topic, 0, -1);
      const isrMeanwhile = (await cluster.state(topic, 0))!.isr;
      expect(isrMeanwhile, 'the ISR shrank before the checks: the machine is too slow for this test').toHaveLength(3);
      expect(hidden).toMatchObject({ error: 0, highWatermark: hwBefore, values: ['before'] });
      expect(latest.offset).toBe(hwBefore);
      // The leader removes the frozen followers from the ISR; the high watermark moves past the message.
      await waitFor('the ISR to shrink to the leader', async () => (await cluster.state(topic, 0))!.isr.length === 1, 30_000);
      await waitFor('the message to become visible', async () => (await fetchValues(w, topic, 0, 0)).values.length === 2, 10_000);
      expect((await listOffset(w, topic, 0, -1)).offset).toBe(appended.offset + 1);
      // ISR 1 < min.insync.replicas 2: refused whole, nothing appended.
      expect(await produce(w, topic, 0, -1, ['refused'])).toMatchObject({ error: KafkaErrorCode.NotEnoughReplicas, offset: -1 });
    } finally {
      for (const id of followers) cluster.brokers[id]!.proc.kill('SIGCONT');
    }
    await cluster.waitForIsr(topic, 1, 3);
    expect((await produce(w, topic, 0, -1, ['after'])).error).toBe(0);
    expect((await fetchValues(w, topic, 0, 0)).values).toEqual(['before', 'past the high watermark', 'after']);
  });
});

describe('Produce with acks -1 to a replicated topic, pipelined on one connection', () => {
  it('appends the requests after one waiting for the high watermark, and answers them in order once it moves', async () => {
    const topic = 'pipelined-replicated';
    await cluster.createTopic(topic, 1, 3, 2);
    const s = (await cluster.state(topic, 0))!;
    const followers = s.isr.filter((id) => id !== s.leader);
    const w = await open(s.leader);
    const other = await open(s.leader);
    expect(await produce(w, topic, 0, -1, ['first'])).toMatchObject({ error: 0, offset: 0 });
    for (const id of followers) cluster.brokers[id]!.proc.kill('SIGSTOP');
    const answered: number[] = [];
    // Sent back to back, as librdkafka does: the first waits for the frozen followers.
    const answers = ['a', 'b', 'c'].map((v, i) => produce(w, topic, 0, -1, [v]).finally(() => void answered.push(i)));
    let probe: { error: number; offset: number } | undefined;
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      // Another connection's acks 1 lands after every set the leader has appended.
      probe = await produce(other, topic, 0, 1, ['probe']);
      expect((await cluster.state(topic, 0))!.isr, 'the ISR shrank before the checks: the machine is too slow for this test').toHaveLength(3);
      expect(answered, 'none answered before the high watermark moved').toEqual([]);
    } finally {
      for (const id of followers) cluster.brokers[id]!.proc.kill('SIGCONT');
    }
    const [a, b, c] = await Promise.all(answers);
    expect([a!.error, b!.error, c!.error, probe?.error]).toEqual([0, 0, 0, 0]);
    // Offsets are byte offsets (docs/format.md): in order, the probe after all three.
    expect(0 < a!.offset && a!.offset < b!.offset && b!.offset < c!.offset, JSON.stringify([a, b, c])).toBe(true);
    expect(probe?.offset, 'all three appended while the first waited').toBeGreaterThan(c!.offset);
    // The probe (acks 1) may stay above the high watermark for one more round of the followers' fetches.
    await waitFor('every value under the high watermark', async () => (await fetchValues(w, topic, 0, 0)).values.length === 5, 10_000);
    expect((await fetchValues(w, topic, 0, 0)).values).toEqual(['first', 'a', 'b', 'c', 'probe']);
  });
});

describe('committed offsets of a replicated topic', () => {
  it('are moved to a message boundary only by a coordinator that holds a replica of the partition', async () => {
    const topic = 'two-replicas';
    await cluster.createTopic(topic, 3, 2, 1);
    const replicas = await cluster.replicas(topic);
    for (let partition = 0; partition < 3; partition++) {
      const w = await open((await cluster.state(topic, partition))!.leader);
      expect(await produce(w, topic, partition, -1, ['a message of some length'])).toMatchObject({ error: 0, offset: 0 });
      expect(await produce(w, topic, partition, -1, ['the next one'])).toMatchObject({ error: 0 });
      // A fetch from inside the first message starts at the second.
      expect((await fetchValues(w, topic, partition, 3)).values).toEqual(['the next one']);
    }
    const group = 'boundaries';
    const id = await findCoordinator(await open(0), group);
    const c = await open(id);
    let held = 0;
    let notHeld = 0;
    for (let partition = 0; partition < 3; partition++) {
      const commit = async (): Promise<number> => {
        expect(await commitOffset(c, group, topic, partition, 3)).toBe(0);
        return (await fetchCommitted(c, group, topic, partition)).offset;
      };
      if (replicas[partition]!.includes(id)) {
        held++;
        // Rounded to the second message, where a fetch from 3 starts, once the coordinator's replica
        // (a follower's high watermark comes with its next fetch) covers offset 3.
        let stored = await commit();
        await waitFor(`a commit of ${topic}/${partition} at 3 rounded by its replica on broker ${id}`, async () => (stored = await commit()) > 3, 10_000);
        const leader = (await cluster.state(topic, partition))!.leader;
        expect((await fetchValues(await open(leader), topic, partition, 3)).offsets).toEqual([stored]);
      } else {
        notHeld++;
        expect(await commit()).toBe(3);
      }
    }
    expect(held).toBeGreaterThan(0);
    expect(notHeld).toBeGreaterThan(0);
  });
});

describe('committed offsets of a paper topic', () => {
  it('are moved to a message boundary by the broker that holds the partition, never by another from its own log', async () => {
    // Each broker holds its own partition 0 of the topic, Kafka partition = broker id; a long first message on each.
    const topic = 'paper-commits';
    for (const b of cluster.brokers) {
      const p = await klog(['produce', '--broker-list', b.klog, '--topic', topic, '--acks', '2'], { input: `${'x'.repeat(100)}\nnext\n` });
      expect(p.code, p.stderr).toBe(0);
    }
    await waitFor('Metadata to number the topic over the 3 brokers', async () => lines((await kcat(0, ['-L', '-t', topic])).stdout).some((l) => l.includes('partition 2, leader 2')), 10_000);
    const group = 'paper-boundaries';
    const id = await findCoordinator(await open(0), group);
    const c = await open(id);
    for (let partition = 0; partition < 3; partition++) {
      expect(await commitOffset(c, group, topic, partition, 5)).toBe(0);
      const stored = (await fetchCommitted(c, group, topic, partition)).offset;
      const next = (await fetchValues(await open(partition), topic, partition, 5)).offsets[0];
      // The coordinator's own partition: the message after offset 5. Another broker's: as committed,
      // though the coordinator's own partition 0 has a message boundary elsewhere.
      expect(stored, `Kafka partition ${partition} (coordinator ${id})`).toBe(partition === id ? next : 5);
    }
  });
});

async function findCoordinator(w: KafkaWire, group: string): Promise<number> {
  const r = await w.call(ApiKey.FindCoordinator, 0, (w) => w.string(group));
  expect(r.int16()).toBe(0);
  return r.int32();
}
