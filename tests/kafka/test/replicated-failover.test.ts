/**
 * A leader's kill -9 under a kafkajs producer with acks -1 (docs/replication.md §17.1, through
 * the Kafka listener): 3 brokers, a topic of 3 partitions × RF 3 with min.insync.replicas 2. The
 * leader of partition 0 is killed mid-produce; kafkajs retries (NOT_LEADER_FOR_PARTITION, lost
 * connections) until the controller has elected another ISR member and Metadata names it, then
 * goes on there. Every message kafkajs saw acknowledged is read back by kcat from the new
 * leaders, at the offset it was acknowledged at.
 */
import { Kafka, logLevel, type Producer } from 'kafkajs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lines, run, sleep, waitFor } from './harness.js';
import { KafkaReplicatedCluster } from './replicated-cluster.js';

const TOPIC = 'failover';
const PARTITIONS = 3;
const SESSION_MS = 4000;

const cluster = new KafkaReplicatedCluster({
  brokers: 3,
  sessionTimeoutMs: SESSION_MS,
  properties: { 'replica.lag.time.max.ms': 4000, 'replica.fetch.wait.max.ms': 200, 'replica.fetch.backoff.ms': 200 },
});

beforeAll(async () => {
  process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
  await cluster.start();
  await cluster.createTopic(TOPIC, PARTITIONS, 3, 2);
});
afterAll(async () => {
  await cluster.close();
});

/** Sends batches of 10 to every partition in turn, one send at a time, recording what was acknowledged. */
class KafkajsLoad {
  readonly acked: { partition: number; offset: number; value: string }[] = [];
  readonly failures: string[] = [];
  private stopped = false;
  private running: Promise<void> | undefined;

  constructor(private readonly producer: Producer) {}

  start(): this {
    this.running = this.loop();
    return this;
  }

  private async loop(): Promise<void> {
    for (let i = 0; !this.stopped; i++) {
      const partition = i % PARTITIONS;
      const values = Array.from({ length: 10 }, (_, j) => `m ${i} ${j}`);
      try {
        const [r] = await this.producer.send({ topic: TOPIC, acks: -1, messages: values.map((value) => ({ value, partition })) });
        if (r!.errorCode !== 0) throw new Error(`error code ${r!.errorCode}`);
        // kafkajs hands back the base offset; the batch's own offsets are read back below.
        this.acked.push(...values.map((value) => ({ partition, offset: Number(r!.baseOffset ?? r!.offset), value })));
      } catch (err) {
        this.failures.push((err as Error).message);
        await sleep(100);
      }
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.running;
  }
}

describe('a leader killed with kill -9 under a kafkajs producer with acks -1', () => {
  it('kafkajs retries to the new leader, and nothing acknowledged is lost', async () => {
    const kafka = new Kafka({
      brokers: cluster.bootstrap,
      clientId: 'kafkajs-failover',
      logLevel: logLevel.NOTHING,
      retry: { retries: 60, initialRetryTime: 100, maxRetryTime: 1000 },
    });
    const producer = kafka.producer({ retry: { retries: 60, initialRetryTime: 100, maxRetryTime: 1000 } });
    await producer.connect();
    const load = new KafkajsLoad(producer).start();
    await waitFor('300 acknowledged messages', () => load.acked.length >= 300, 60_000);
    const victim = (await cluster.state(TOPIC, 0))!.leader;
    await cluster.kill9(victim);
    const killedAt = load.acked.length;
    const killedAtMs = Date.now();

    await waitFor('a new leader of partition 0', async () => {
      const s = await cluster.state(TOPIC, 0);
      return s !== undefined && s.leader >= 0 && s.leader !== victim;
    }, 4 * SESSION_MS + 30_000);
    // Acknowledgements go on for every partition, partition 0 at its new leader included.
    await waitFor('300 more acknowledged messages, partition 0 among them', () => load.acked.slice(killedAt).filter((a) => a.partition === 0).length >= 100 && load.acked.length >= killedAt + 300, 90_000);
    const recoveredMs = Date.now() - killedAtMs;
    await load.stop();
    await producer.disconnect();
    const newLeader = (await cluster.state(TOPIC, 0))!.leader;
    expect(newLeader).not.toBe(victim);

    // Read everything back through a live broker: every acknowledged value at a batch's offset.
    const live = [0, 1, 2].find((id) => id !== victim)!;
    const c = await run('kcat', ['-b', cluster.kafka(live), '-C', '-e', '-o', 'beginning', '-t', TOPIC, '-f', '%p %o %s\n'], { timeoutMs: 120_000 });
    expect(c.code, c.stderr).toBe(0);
    const read = new Map<string, { partition: number; offset: number }>();
    for (const l of lines(c.stdout)) {
      const [p, o, , batch, j] = l.split(' ');
      const value = `m ${batch} ${j}`;
      read.set(value, { partition: Number(p), offset: Number(o) });
    }
    const missing = load.acked.filter((a) => read.get(a.value)?.partition !== a.partition);
    expect(missing.map((a) => a.value)).toEqual([]);
    // Each acknowledged batch was acknowledged at the offset where it is stored (a retried batch stored
    // twice is read at its first copy or its acknowledged one: both carry the same values).
    const misplaced = load.acked.filter((a) => {
      const [, batch, j] = a.value.split(' ');
      if (j !== '0') return false;
      const copies = lines(c.stdout).filter((l) => l.endsWith(` m ${batch} 0`)).map((l) => Number(l.split(' ')[1]));
      return !copies.includes(a.offset);
    });
    expect(misplaced.map((a) => `${a.value} at ${a.offset}`)).toEqual([]);
    console.log(
      `kill -9 of leader ${victim}: ${load.acked.length} messages acknowledged (${killedAt} before the kill), ${read.size} distinct read back, ` +
        `${load.failures.length} sends failed (not acknowledged), 100 more on partition 0 after ${recoveredMs} ms (session timeout ${SESSION_MS} ms)`,
    );
  });
});
