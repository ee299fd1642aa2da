/**
 * docs/replication.md §17.9, a rolling restart with controlled shutdown: 3 brokers, a topic of 4
 * partitions × RF 3 with min.insync.replicas 2, and a ZkProducer with `acks all` and the client's
 * own retry bounds (as an application has them) on every partition. Each broker in turn gets
 * SIGTERM: its controlled shutdown (§15.2) moves its leaderships in one controller round trip and
 * takes it out of every ISR before it stops; it restarts on its log dir and the test waits for
 * every ISR to be full before the next one. The producer sees no failed send, and each of its
 * retries was a broker's answer (NotLeaderForPartition), never a connection a leader closed
 * under it; `klog topics --elect-preferred-leaders` then puts every partition back on its first
 * replica; every acknowledged message is read back and the replicas are byte-identical.
 */
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ErrorCode, errorCodeName } from '@klog/protocol';
import { klogMain } from './harness.js';
import { AckedLoad, ReplicatedCluster, checkAcked } from './replication-cluster.js';

const SESSION_MS = 3000;
const TOPIC = 'events';
const PARTITIONS = 4;
const BROKERS = 3;

describe('replication: rolling restart with controlled shutdown (docs/replication.md §17.9)', () => {
  const cluster = new ReplicatedCluster({
    brokers: BROKERS,
    sessionTimeoutMs: SESSION_MS,
    properties: { 'replica.fetch.wait.max.ms': 200, 'replica.fetch.backoff.ms': 200, 'segment.bytes': 64 * 1024 },
    flags: ['--metrics-port', '0'],
  });

  beforeAll(async () => {
    await cluster.start();
    await cluster.admin.createTopic(TOPIC, { partitions: PARTITIONS, replicationFactor: 3, minInsyncReplicas: 2 });
    await cluster.waitForIsr(TOPIC, PARTITIONS, 3);
  });

  afterAll(async () => {
    await cluster.close();
  });

  it('restarts every broker in turn: no failed send, only NotLeaderForPartition retries, zero loss, leaders back on their first replica', async () => {
    const load = new AckedLoad(cluster.connect, TOPIC, PARTITIONS, 5, {}).start();
    await load.waitForCount(200);

    for (const b of cluster.brokers) {
      const movedBefore = movedInOneRoundTrip(cluster, b.id);
      const ledBefore = (await cluster.leaders(TOPIC, PARTITIONS)).filter((l) => l === b.id).length;
      const t0 = Date.now();
      expect(await b.terminate(60_000)).toBe(0);
      const shutdownMs = Date.now() - t0;
      // Its leaderships moved and it left every ISR before it exited, in one round trip.
      expect(movedInOneRoundTrip(cluster, b.id)).toBe(movedBefore + 1);
      for (let p = 0; p < PARTITIONS; p++) {
        const s = await cluster.state(TOPIC, p);
        expect(s?.leader).not.toBe(b.id);
        expect(s?.isr).not.toContain(b.id);
      }
      const acked = load.count;
      await load.waitForCount(acked + 100);

      const t1 = Date.now();
      await b.start();
      await cluster.waitForIsr(TOPIC, PARTITIONS, 3, 60_000);
      await cluster.waitForLeaderAgreement(TOPIC, PARTITIONS);
      console.log(
        `broker ${b.id} (leading ${ledBefore} of ${PARTITIONS}): SIGTERM to exit ${shutdownMs} ms, restart to full ISRs ${Date.now() - t1} ms; ` +
          `${load.count} acknowledged, ${load.retries} retries so far`,
      );
      await load.waitForCount(load.count + 100);
    }

    // The restarts left leadership on the brokers restarted first; a preferred-leader election moves it back.
    const { stdout } = await promisify(execFile)(process.execPath, [klogMain, 'topics', '--zookeeper', cluster.connect, '--elect-preferred-leaders', '--topic', TOPIC]);
    console.log(stdout.trim());
    const definition = await cluster.registry.readDefinition(TOPIC);
    expect(await cluster.leaders(TOPIC, PARTITIONS)).toEqual(definition!.partitions.map((replicas) => replicas[0]));
    await cluster.waitForLeaderAgreement(TOPIC, PARTITIONS);
    await load.waitForCount(load.count + 100);
    await load.stop();

    const codes = Object.fromEntries([...load.retriesByCode].map(([code, n]) => [code < 0 ? 'connection failed' : errorCodeName(code), n]));
    console.log(`${load.count} messages acknowledged, ${load.failures.length} failed sends, ${load.retries} retries by the producer: ${JSON.stringify(codes)}`);
    expect(load.failures).toEqual([]);
    expect(load.retries).toBeGreaterThan(0);
    expect([...load.retriesByCode.keys()].filter((code) => code !== ErrorCode.NotLeaderForPartition)).toEqual([]);

    await cluster.waitForIdenticalReplicas(TOPIC, PARTITIONS, 30_000);
    const read = await cluster.readAll(TOPIC, PARTITIONS, 0);
    expect(checkAcked(load.acked, read)).toEqual([]);
  });
});

/** How many controlled shutdowns of broker `id` (every run of it) ended at the first CONTROLLED_SHUTDOWN with nothing left to lead (§15.2). */
function movedInOneRoundTrip(cluster: ReplicatedCluster, id: number): number {
  return cluster.brokers[id]!.logged((l) => l['msg'] === 'controlled shutdown: this broker leads no partition any more' && l['attempt'] === 0).length;
}
