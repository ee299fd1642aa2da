/**
 * A frozen group member (docs/design.md §4, docs/architecture.md "ZooKeeper"): a member paused
 * past its session timeout (SIGSTOP: a long GC pause or a frozen VM does the same) loses its
 * partitions to another member; when it resumes (SIGCONT) it must not commit its stale offsets
 * over the new owner's commits, nor hand out again what the new owner committed. Its offset
 * commits are fenced by ownership. Members are child processes; the broker runs in this process.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker, type Broker } from '@klog/broker';
import { ZkProducer } from '@klog/client';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { Member, type Received, ZkClient, killAll, owners, settled, sleep, waitFor } from './harness.js';

const TOPIC = 'zombie';
const PARTITIONS = ['0-0', '0-1'];
const SESSION_MS = 2000;

describe('a frozen group member', () => {
  let connect: string;
  let zk: ZkClient;
  let broker: Broker;
  const logDir = mkdtempSync(join(tmpdir(), 'klog-zombie-'));
  let producer: ZkProducer;

  beforeAll(async () => {
    await assertZooKeeperRunning();
    connect = testConnectString('klog-zombie');
    zk = await ZkClient.connect(connect);
    broker = await startBroker({ logDir, port: 0, brokerId: 0, zookeeper: connect, numPartitions: 2, flushMessages: 1 }, pino({ level: 'silent' }));
    producer = new ZkProducer({ zookeeper: connect, acks: 1 });
    await producer.partitions(TOPIC);
  });

  afterAll(async () => {
    await producer?.close();
    await killAll();
    await broker?.close();
    rmSync(logDir, { recursive: true, force: true });
    await zk?.close();
    await removeChroot(connect);
  });

  it('never moves the committed offsets back and never hands out again what the new owner committed', async () => {
    const received: Received[] = [];
    // a commits seldom, so that it holds uncommitted positions when it is frozen
    const a = await new Member({ zookeeper: connect, group: 'Z', topic: TOPIC, consumerId: 'a', sessionTimeoutMs: SESSION_MS, autoCommitIntervalMs: 1500 }, received).started();
    const b = await new Member({ zookeeper: connect, group: 'Z', topic: TOPIC, consumerId: 'b', sessionTimeoutMs: SESSION_MS, autoCommitIntervalMs: 200 }, received).started();
    await waitFor('a and b settled', () => settled(zk, 'Z', TOPIC, PARTITIONS, ['a', 'b']), 20_000);
    const aOwns = [...(await owners(zk, 'Z', TOPIC))].filter(([, t]) => t === 'a-0').map(([bp]) => bp);
    expect(aOwns.length).toBe(1);

    let stop = false;
    const producing = (async () => {
      for (let i = 0; !stop; i++) {
        await producer.send(TOPIC, Array.from({ length: 20 }, (_, j) => ({ value: `v${i}-${j}` })));
        await sleep(20);
      }
    })();
    // Every committed offset as ZooKeeper holds it, polled.
    const history = new Map<string, number[]>(PARTITIONS.map((p) => [p, []]));
    let polling = true;
    const poller = (async () => {
      while (polling) {
        for (const p of PARTITIONS) {
          const node = await zk.getData(`/consumers/Z/offsets/${TOPIC}/${p}`);
          const seen = history.get(p)!;
          if (node && Number(node.data.toString()) !== seen.at(-1)) seen.push(Number(node.data.toString()));
        }
        await sleep(10);
      }
    })();
    try {
      await waitFor('a consuming', () => a.received.length > 300, 20_000);
      a.proc.kill('SIGSTOP');
      const frozenAt = Date.now();
      const aLast = a.lastCommits();
      // b takes a's partition once a's session is gone, and commits past a's last commit there.
      await waitFor('b owns everything and committed past a on its partition', async () => {
        const own = await owners(zk, 'Z', TOPIC);
        const bCommits = b.lastCommits();
        return PARTITIONS.every((p) => own.get(p) === 'b-0') && aOwns.every((p) => (bCommits.get(p) ?? -1) > (aLast.get(p) ?? -1) + 2000);
      }, 30_000);
      await sleep(Math.max(0, frozenAt + 3 * SESSION_MS - Date.now()));
      a.proc.kill('SIGCONT');
      const resumedAt = Date.now();
      await waitFor('a back in the group with its share', async () => (await settled(zk, 'Z', TOPIC, PARTITIONS, ['a', 'b'])) && [...(await owners(zk, 'Z', TOPIC)).values()].includes('a-0'), 30_000);
      await sleep(1500);

      for (const [p, seen] of history) {
        const backwards = seen.filter((o, i) => i > 0 && o < seen[i - 1]!);
        expect(backwards, `committed offsets of ${p} that went backwards (history ${seen.join(',')})`).toEqual([]);
      }
      // What b committed of a partition, as of a moment.
      const bCommits = b.logs
        .filter((l) => l.msg === 'offsets committed')
        .flatMap((l) => (l['offsets'] as Array<{ brokerId: number; partition: number; offset: number }>).map((o) => ({ t: l.t, p: `${o.brokerId}-${o.partition}`, offset: o.offset })));
      const bCommittedAt = (p: string, t: number): number => Math.max(-1, ...bCommits.filter((c) => c.p === p && c.t <= t).map((c) => c.offset));
      const again = a.received.filter((m) => m.t >= resumedAt && m.o < bCommittedAt(`${m.b}-${m.p}`, m.t));
      if (again.length > 0) {
        // What a did around its resume, to tell a stale hand-out from a stale start.
        console.log(`resumed at ${resumedAt}; a's log since the freeze:`);
        console.log(a.logs.filter((l) => l.t >= frozenAt - 100).map((l) => `${l.t} ${l.level} ${l.msg}`).join('\n'));
      }
      expect(again.map((m) => `${m.b}-${m.p}@${m.o}`), 'messages b committed that a handed out again').toEqual([]);
      const fencedLog = a.logs.filter((l) => l.msg === 'offset not committed: this consumer no longer owns the partition');
      console.log(`frozen member: ${resumedAt - frozenAt} ms frozen; ${fencedLog.length} stale commits refused; offsets ${JSON.stringify(Object.fromEntries(history))}`);
      expect(a.errors).toEqual([]);
      expect(b.errors).toEqual([]);
    } finally {
      stop = true;
      polling = false;
      await producing.catch(() => {});
      await poller.catch(() => {});
      a.proc.kill('SIGCONT');
    }
  });
});
