/**
 * Test helpers for replicated partitions: brokers in this process over the real ZooKeeper (a
 * random chroot), a replicated topic's definition and partition state written as the controller
 * writes them, and LEADER_AND_ISR / STOP_REPLICA sent over real sockets, so these tests do not
 * depend on the controller: the test holds `/controller` itself, so no broker is elected.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pino } from 'pino';
import {
  AckLevel,
  Decoder,
  decodeLeaderAndIsrResponse,
  decodeProduceAckResponse,
  decodeStopReplicaResponse,
  encodeLeaderAndIsrRequest,
  encodeMessageSet,
  encodeProduceAckRequest,
  encodeStopReplicaRequest,
  type AckLevelValue,
  type PartitionState,
  type ProduceAckResult,
} from '@klog/protocol';
import {
  controllerEpochPath,
  controllerPath,
  createPartitionStateOps,
  encodeControllerInfo,
  ReplicatedTopicRegistry,
  setPartitionStateOp,
  ZkClient,
  type PartitionStateNode,
} from '@klog/zk-registry';
import { highWatermarkFile } from '@klog/storage';
import { removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { startBroker, type Broker, type BrokerConfig } from '../src/index.js';
import { removeDir, tempDir, WireClient } from './helpers.js';

export const topicId = '5f0c3a9e12b7d604';

/** Brokers of one test, their ZooKeeper chroot and the test's own ZooKeeper client (the controller's writes). */
export class TestCluster {
  readonly brokers = new Map<number, Broker>();
  readonly dirs = new Map<number, string>();
  readonly clients: WireClient[] = [];
  zk!: ZkClient;
  readonly connect = testConnectString('klog-repl-broker');
  controllerEpoch = 1;

  async start(ids: number[], settings: Partial<BrokerConfig> = {}): Promise<void> {
    this.zk = await ZkClient.connect(this.connect);
    // The test is the controller (broker id 0, epoch 1): it holds /controller, so no broker wins the election.
    await this.zk.create(controllerEpochPath(), String(this.controllerEpoch));
    await this.zk.create(controllerPath(), encodeControllerInfo({ brokerId: 0, epoch: this.controllerEpoch, timestampMs: Date.now() }), { mode: 'ephemeral' });
    for (const id of ids) {
      this.dirs.set(id, tempDir(`klog-repl-${id}-`));
      await this.#startBroker(id, settings);
    }
  }

  async #startBroker(id: number, settings: Partial<BrokerConfig>): Promise<void> {
    const broker = await startBroker(
      {
        logDir: this.dirs.get(id)!,
        port: 0,
        brokerId: id,
        zookeeper: this.connect,
        replicaFetchWaitMaxMs: 100,
        replicaFetchBackoffMs: 50,
        controlledShutdownEnable: false, // the test is the controller
        ...settings,
      },
      pino({ level: process.env.KLOG_TEST_LOG ?? 'silent' }),
    );
    this.brokers.set(id, broker);
  }

  /** Closes broker `id` and starts it again on its log dir (a new port). */
  async restart(id: number, settings: Partial<BrokerConfig> = {}): Promise<void> {
    await this.broker(id).close(); // closing twice is a no-op
    await this.#startBroker(id, settings);
  }

  broker(id: number): Broker {
    return this.brokers.get(id)!;
  }

  async client(id: number): Promise<WireClient> {
    const c = await WireClient.connect(this.broker(id).port);
    this.clients.push(c);
    return c;
  }

  /** Writes the topic definition and partition states in ZooKeeper as the controller does. @returns each state's version */
  async createTopic(topic: string, partitions: number[][], minInsyncReplicas: number): Promise<void> {
    const registry = new ReplicatedTopicRegistry(this.zk);
    await registry.createTopic(topic, { id: topicId, partitions, minInsyncReplicas, createdMs: Date.now() });
    const entries = partitions.map((replicas, partition) => ({
      partition,
      state: { leader: replicas[0]!, leaderEpoch: 0, isr: [replicas[0]!], controllerEpoch: this.controllerEpoch, isNew: true },
    }));
    await this.zk.multi(createPartitionStateOps(topic, entries, { createPartitionsNode: true }));
  }

  /** The partition state node in ZooKeeper. */
  async state(topic: string, partition: number): Promise<PartitionStateNode> {
    return (await new ReplicatedTopicRegistry(this.zk).readPartitionState(topic, partition))!;
  }

  /** A controller's write of a new leader: epoch + 1, at the version read. @returns the new state and version */
  async elect(topic: string, partition: number, leader: number, isr: number[]): Promise<PartitionStateNode> {
    const node = await this.state(topic, partition);
    const state = { ...node.state, leader, isr, leaderEpoch: node.state.leaderEpoch + 1, controllerEpoch: this.controllerEpoch };
    const [result] = await this.zk.multi([setPartitionStateOp(topic, partition, state, node.stateVersion)]);
    return { state, stateVersion: (result as { stat?: { version: number } }).stat?.version ?? node.stateVersion + 1 };
  }

  /** Sends LEADER_AND_ISR for one partition to each of `to`, with the state now in ZooKeeper. @returns each broker's partition error code */
  async leaderAndIsr(
    topic: string,
    partition: number,
    replicas: number[],
    to: number[],
    minInsyncReplicas: number,
    override: Partial<PartitionState> = {},
  ): Promise<number[]> {
    const node = await this.state(topic, partition);
    const s = node.state;
    const p: PartitionState = {
      topic,
      topicId,
      partition,
      leader: s.leader,
      leaderEpoch: s.leaderEpoch,
      stateVersion: node.stateVersion,
      minInsyncReplicas,
      isNew: s.isNew,
      replicas,
      isr: s.isr,
      ...override,
    };
    const leader = s.leader >= 0 ? this.broker(s.leader) : undefined;
    const brokers = leader === undefined ? [] : [{ brokerId: s.leader, host: '127.0.0.1', port: leader.port }];
    const codes: number[] = [];
    for (const id of to) {
      const c = await this.client(id);
      const r = await c.request(encodeLeaderAndIsrRequest({ controllerId: 0, controllerEpoch: this.controllerEpoch, partitions: [p], brokers }));
      const decoded = decodeLeaderAndIsrResponse(r.code, new Decoder(r.body));
      codes.push(decoded.errorCode !== 0 ? decoded.errorCode : decoded.partitions[0]!.errorCode);
    }
    return codes;
  }

  /** Sends STOP_REPLICA (delete 0) for one partition to `to`. @returns the partition error code */
  async stopReplica(topic: string, partition: number, to: number, leaderEpoch: number): Promise<number> {
    const c = await this.client(to);
    const partitions = [{ topic, partition, leaderEpoch }];
    const r = await c.request(encodeStopReplicaRequest({ controllerId: 0, controllerEpoch: this.controllerEpoch, delete: false, partitions }));
    const decoded = decodeStopReplicaResponse(r.code, new Decoder(r.body));
    return decoded.errorCode !== 0 ? decoded.errorCode : decoded.partitions[0]!.errorCode;
  }

  /** The directory of a replica on broker `id`. */
  replicaDir(id: number, topic: string, partition: number): string {
    return join(this.dirs.get(id)!, `${topic}-${partition}`);
  }

  async stop(): Promise<void> {
    for (const c of this.clients) c.close();
    for (const b of this.brokers.values()) await b.close();
    for (const d of this.dirs.values()) removeDir(d);
    await this.zk?.close();
    await removeChroot(this.connect);
  }
}

/** Sends one PRODUCE_ACK of `payloads` to `c`. */
export async function produce(
  c: WireClient,
  topic: string,
  partition: number,
  payloads: Buffer[],
  acks: AckLevelValue = AckLevel.Appended,
): Promise<ProduceAckResult> {
  const r = await c.request(encodeProduceAckRequest({ acks, partitions: [{ topic, partition, messages: encodeMessageSet(payloads) }] }));
  return decodeProduceAckResponse(new Decoder(r.body))[0]!;
}

/** `n` payloads of `size` bytes, each starting with its number. */
export function payloads(n: number, size: number, tag = 'm'): Buffer[] {
  return Array.from({ length: n }, (_, i) => Buffer.from(`${tag}${i}:`.padEnd(size, 'x')));
}

/**
 * Every file of a directory (names sorted) with its bytes, for comparing replicas; the
 * high-watermark checkpoint is left out: it is each broker's own, written on its own timer
 * (docs/replication.md §8.1).
 */
export function filesOf(dir: string): Map<string, Buffer> {
  const out = new Map<string, Buffer>();
  for (const name of readdirSync(dir).sort()) if (!name.endsWith('.tmp') && name !== highWatermarkFile) out.set(name, readFileSync(join(dir, name)));
  return out;
}

/** Polls `check` every 20 ms until it is true, or fails after `ms`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const until = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
