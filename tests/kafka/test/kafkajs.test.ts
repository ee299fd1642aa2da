/**
 * kafkajs 2.2 (npm, unmodified) against the Kafka listener: admin.createTopics and
 * fetchTopicMetadata; a producer sending 100,000 messages with acks -1 and 1, with and without
 * gzip, every one of which `klog consume` then reads back once; and a kafkajs consumer reading
 * what `klog produce` wrote.
 */
import { CompressionTypes, Kafka, logLevel, type Admin } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Broker, klog, lines } from './harness.js';

let broker: Broker;
let kafka: Kafka;
beforeAll(async () => {
  process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
  broker = await Broker.start();
  kafka = new Kafka({ brokers: [broker.kafka], clientId: 'kafkajs-test', logLevel: logLevel.NOTHING });
});
afterAll(async () => {
  await broker?.remove();
});

describe('kafkajs admin', () => {
  let admin: Admin;
  beforeAll(async () => {
    admin = kafka.admin();
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.disconnect();
  });

  it('createTopics creates a topic with its partition count; fetchTopicMetadata lists them with their leader', async () => {
    expect(await admin.createTopics({ topics: [{ topic: 'admin-made', numPartitions: 4 }] })).toBe(true);
    expect(await admin.createTopics({ topics: [{ topic: 'admin-made', numPartitions: 4 }] })).toBe(false);
    const { topics } = await admin.fetchTopicMetadata({ topics: ['admin-made'] });
    expect(topics).toHaveLength(1);
    expect(topics[0]!.partitions.map((p) => [p.partitionId, p.leader, p.replicas, p.isr]).sort()).toEqual([
      [0, 0, [0], [0]],
      [1, 0, [0], [0]],
      [2, 0, [0], [0]],
      [3, 0, [0], [0]],
    ]);
    expect(await admin.listTopics()).toContain('admin-made');
    await expect(admin.createTopics({ topics: [{ topic: 'replicated', numPartitions: 1, replicationFactor: 3 }] })).rejects.toMatchObject({
      errors: [expect.objectContaining({ type: 'INVALID_REPLICATION_FACTOR' })],
    });
  });
});

describe('kafkajs producer', () => {
  const total = 100_000;
  const batch = 1000;
  for (const acks of [-1, 1]) {
    for (const compression of [CompressionTypes.None, CompressionTypes.GZIP]) {
      const name = `kafkajs-acks${acks === -1 ? 'all' : acks}-${compression === CompressionTypes.GZIP ? 'gzip' : 'plain'}`;
      it(`${name}: 100,000 messages arrive, each once`, async () => {
        const producer = kafka.producer();
        await producer.connect();
        for (let i = 0; i < total; i += batch) {
          const messages = Array.from({ length: batch }, (_, j) => ({ value: `${name} ${String(i + j).padStart(6, '0')}` }));
          const [result] = await producer.send({ topic: name, acks, compression, messages });
          expect(result!.errorCode).toBe(0);
        }
        await producer.disconnect();
        const c = await klog(['consume', '--broker', broker.klog, '--topic', name, '--offset', 'earliest', '--idle-timeout-ms', '2000'], { timeoutMs: 120_000 });
        expect(c.code, c.stderr).toBe(0);
        const got = lines(c.stdout);
        expect(got).toHaveLength(total);
        expect(got).toEqual(Array.from({ length: total }, (_, i) => `${name} ${String(i).padStart(6, '0')}`));
      }, 180_000);
    }
  }
});

describe('kafkajs consumer', () => {
  it('reads what klog produce wrote, keys included, with byte offsets that grow', async () => {
    const input = Array.from({ length: 500 }, (_, i) => `k${i % 7}:value ${i}`).join('\n') + '\n';
    const p = await klog(['produce', '--broker-list', broker.klog, '--topic', 'from-klog', '--key-separator', ':', '--stamp-metadata'], { input });
    expect(p.code, p.stderr).toBe(0);
    const consumer = kafka.consumer({ groupId: 'reads-klog', maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topic: 'from-klog', fromBeginning: true });
    const got: [string, string, number][] = [];
    await consumer.run({ eachMessage: async ({ message }) => void got.push([message.key!.toString(), message.value!.toString(), Number(message.offset)]) });
    const deadline = Date.now() + 30_000;
    while (got.length < 500 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    await consumer.disconnect();
    expect(got.map(([k, v]) => `${k}:${v}`)).toEqual(lines(input));
    for (let i = 1; i < got.length; i++) expect(got[i]![2]).toBeGreaterThan(got[i - 1]![2]);
    expect(got[0]![2]).toBe(0);
  });
});
