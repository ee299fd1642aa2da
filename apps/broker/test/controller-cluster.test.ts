/**
 * The controller against the real ZooKeeper, with brokers as child processes (docs/replication.md
 * §5, §15.2): exactly one controller among 3 brokers; `kill -9` of the controller gives another
 * within 2 × the session timeout at a higher epoch; a new replicated topic gets a leader per
 * partition and every broker is told its role; a broker killed gives its partitions new leaders
 * from the ISR; SIGTERM with controlled shutdown moves leadership away before the broker exits.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  assignReplicas,
  ControllerRegistry,
  newTopicId,
  ReplicatedTopicRegistry,
  ZkClient,
  type PartitionStateNode,
} from '@klog/zk-registry';
import { assertZooKeeperRunning, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { removeDir, spawnBroker, tempDir, until, type BrokerProcess } from './helpers.js';

const sessionTimeoutMs = 2000;
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  await assertZooKeeperRunning();
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

interface Node extends BrokerProcess {
  id: number;
  metricsPort: number;
}

async function start(connect: string, id: number, extra: string[] = []): Promise<Node> {
  const dir = tempDir();
  const b = await spawnBroker([
    '--zookeeper', connect, '--broker-id', String(id), '--log-dir', dir, '--zk-session-timeout-ms', String(sessionTimeoutMs),
    '--metrics-port', '0', '--log-format', 'json', '--controlled-shutdown-retry-backoff-ms', '200', ...extra,
  ]);
  const listening = b.logs.find((l) => l.msg === 'broker listening')!;
  cleanups.push(async () => {
    if (b.proc.exitCode === null && b.proc.signalCode === null) b.proc.kill('SIGKILL');
    await b.exited;
    removeDir(dir);
  });
  return { ...b, id, metricsPort: listening.metricsPort as number };
}

async function metric(n: Node, name: string, labels = ''): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${n.metricsPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}${labels} `) || (labels === '' && l.startsWith(`${name} `)));
  return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
}


async function cluster(extra: string[] = []): Promise<{ connect: string; zk: ZkClient; nodes: Node[] }> {
  const connect = testConnectString();
  cleanups.push(() => removeChroot(connect));
  const zk = await ZkClient.connect(connect);
  cleanups.push(() => zk.close());
  const nodes = await Promise.all([0, 1, 2].map((id) => start(connect, id, extra)));
  return { connect, zk, nodes };
}

/** Creates a replicated topic as the admin does (docs/replication.md §15.1). */
async function createTopic(zk: ZkClient, topic: string, partitions: number, rf: number): Promise<number[][]> {
  const assignment = assignReplicas([0, 1, 2], partitions, rf, { startIndex: 0, replicaShift: 0 });
  await new ReplicatedTopicRegistry(zk).createTopic(topic, { id: newTopicId(), partitions: assignment, createdMs: Date.now() });
  return assignment;
}

async function states(zk: ZkClient, topic: string): Promise<Map<number, PartitionStateNode>> {
  return new ReplicatedTopicRegistry(zk).readPartitionStates(topic);
}

/** Waits until every partition's ISR is its whole replica list: the followers fetched and their leaders added them (§9.4). */
async function fullIsrs(zk: ZkClient, topic: string, assignment: number[][]): Promise<void> {
  await until(`full ISRs of ${topic}`, async () => {
    const s = await states(zk, topic);
    return assignment.every((replicas, p) => s.get(p)?.state.isr.length === replicas.length);
  });
}

describe('the controller', () => {
  it('is exactly one of 3 brokers; after kill -9 another takes over within 2 × the session timeout at a higher epoch', async () => {
    const { zk, nodes } = await cluster();
    const controllers = new ControllerRegistry(zk);
    const first = await until('a controller', () => controllers.readController());
    await until('the controller active', async () => (await metric(nodes[first.brokerId]!, 'klog_active_controller')) === 1);
    const active = await Promise.all(nodes.map((n) => metric(n, 'klog_active_controller')));
    expect(active.reduce((a, b) => a + b, 0)).toBe(1);
    expect(active[first.brokerId]).toBe(1);

    const killedAt = Date.now();
    nodes[first.brokerId]!.proc.kill('SIGKILL');
    const next = await until('a new controller', async () => {
      const c = await controllers.readController();
      return c !== undefined && c.brokerId !== first.brokerId ? c : undefined;
    });
    const tookMs = Date.now() - killedAt;
    expect(tookMs).toBeLessThan(2 * sessionTimeoutMs);
    expect(next.epoch).toBeGreaterThan(first.epoch);
    await until('the new controller active', async () => (await metric(nodes[next.brokerId]!, 'klog_active_controller')) === 1);
    // The others learn the new epoch from their watch of /controller, each in its own time.
    for (const n of nodes) {
      if (n.id !== first.brokerId) await until(`broker ${n.id} to see epoch ${next.epoch}`, async () => (await metric(n, 'klog_controller_epoch')) === next.epoch);
    }
  });

  it('gives every partition of a new topic a leader, tells every broker, and re-elects from the ISR when a leader is killed', async () => {
    const { zk, nodes } = await cluster();
    const assignment = await createTopic(zk, 'events', 3, 3);
    const created = await until('every partition led', async () => {
      const s = await states(zk, 'events');
      return s.size === 3 && [...s.values()].every((n) => n.state.leader !== -1) ? s : undefined;
    });
    for (let p = 0; p < 3; p++) expect(created.get(p)!.state).toMatchObject({ leader: assignment[p]![0], leaderEpoch: 0, isr: [assignment[p]![0]] });
    // Every broker replicates every partition (RF 3): each was sent its role.
    for (const n of nodes) await until(`broker ${n.id} told`, async () => (await metric(n, 'klog_requests_total', '{type="LeaderAndIsr"}')) >= 1);
    const controllerId = (await new ControllerRegistry(zk).readController())!.brokerId;
    expect(await metric(nodes[controllerId]!, 'klog_leader_elections_total', '{reason="new-topic"}')).toBe(3);

    await fullIsrs(zk, 'events', assignment);
    // Kill a broker that is not the controller: the partitions it led move to the next ISR member.
    const victim = nodes.find((n) => n.id !== controllerId)!;
    const led = [0, 1, 2].filter((p) => assignment[p]![0] === victim.id);
    victim.proc.kill('SIGKILL');
    const after = await until('new leaders', async () => {
      const s = await states(zk, 'events');
      return [...s.values()].every((n) => n.state.leader !== victim.id && !n.state.isr.includes(victim.id)) ? s : undefined;
    });
    for (const p of led) {
      const expected = assignment[p]!.find((b) => b !== victim.id);
      expect(after.get(p)!.state).toMatchObject({ leader: expected, leaderEpoch: 1, isr: assignment[p]!.filter((b) => b !== victim.id) });
    }
    expect(await metric(nodes[controllerId]!, 'klog_leader_elections_total', '{reason="failure"}')).toBe(led.length);
    expect(await metric(nodes[controllerId]!, 'klog_offline_partitions')).toBe(0);
  });

  it('moves leadership away on SIGTERM (controlled shutdown) before the broker exits', async () => {
    const { zk, nodes } = await cluster();
    const assignment = await createTopic(zk, 'events', 3, 3);
    await until('every partition led', async () => {
      const s = await states(zk, 'events');
      return s.size === 3 && [...s.values()].every((n) => n.state.leader !== -1);
    });
    await fullIsrs(zk, 'events', assignment);
    const controllerId = (await new ControllerRegistry(zk).readController())!.brokerId;
    const leaving = nodes.find((n) => n.id !== controllerId)!;
    const led = [0, 1, 2].filter((p) => assignment[p]![0] === leaving.id);
    expect(led.length).toBeGreaterThan(0);
    // Watch the broker's registration: the leaderships must have moved while it is still registered.
    let movedWhileRegistered = false;
    const watching = (async () => {
      while (leaving.proc.exitCode === null) {
        const registered = (await zk.exists(`/brokers/ids/${leaving.id}`)) !== undefined;
        const s = await states(zk, 'events');
        if (registered && [...s.values()].every((n) => n.state.leader !== leaving.id && !n.state.isr.includes(leaving.id))) movedWhileRegistered = true;
        await new Promise((r) => setTimeout(r, 10));
      }
    })();
    leaving.proc.kill('SIGTERM');
    expect(await leaving.exited).toBe(0);
    await watching;
    expect(movedWhileRegistered).toBe(true);
    expect(leaving.logs.some((l) => l.msg === 'controlled shutdown: this broker leads no partition any more')).toBe(true);
    const s = await states(zk, 'events');
    for (const p of led) expect(s.get(p)!.state.leader).toBe(assignment[p]!.find((b) => b !== leaving.id));
    expect(await metric(nodes[controllerId]!, 'klog_leader_elections_total', '{reason="controlled-shutdown"}')).toBe(led.length);
  });
});

describe('the controller shutting down', () => {
  it('moves its own leaderships through its event queue, then removes /controller so that the next is elected at once', async () => {
    const { zk, nodes } = await cluster();
    const assignment = await createTopic(zk, 'events', 3, 3);
    await fullIsrs(zk, 'events', assignment);
    const controllers = new ControllerRegistry(zk);
    const first = (await controllers.readController())!;
    const leaving = nodes[first.brokerId]!;
    const led = [0, 1, 2].filter((p) => assignment[p]![0] === leaving.id);
    const stoppedAt = Date.now();
    leaving.proc.kill('SIGTERM');
    expect(await leaving.exited).toBe(0);
    const next = await until('the next controller', async () => {
      const c = await controllers.readController();
      return c !== undefined && c.brokerId !== first.brokerId ? c : undefined;
    });
    // Well before the session timeout: the node was removed, not left to expire.
    expect(Date.now() - stoppedAt).toBeLessThan(sessionTimeoutMs + 1000);
    expect(next.epoch).toBe(first.epoch + 1);
    const s = await states(zk, 'events');
    for (const p of led) expect(s.get(p)!.state.leader).toBe(assignment[p]!.find((b) => b !== leaving.id));
    expect(leaving.logs.some((l) => l.msg === 'controlled shutdown: this broker leads no partition any more')).toBe(true);
  });
});

describe('a stale controller', () => {
  it('frozen past its session (SIGSTOP) between two batches of writes, is refused its next write and resigns', async () => {
    const connect = testConnectString();
    cleanups.push(() => removeChroot(connect));
    const zk = await ZkClient.connect(connect);
    cleanups.push(() => zk.close());
    const controllers = new ControllerRegistry(zk);
    const stale = await start(connect, 0, ['--controller-batch-delay-ms', '3000']);
    const first = await until('broker 0 controller', async () => ((await controllers.readController())?.brokerId === 0 ? controllers.readController() : undefined));
    await Promise.all([1, 2].map((id) => start(connect, id)));
    await createTopic(zk, 'big', 150, 1);
    // The first batch of 100 partition states is written; the controller waits before the next.
    await until('the first batch', async () => (await new ReplicatedTopicRegistry(zk).listPartitions('big')).length === 100);
    stale.proc.kill('SIGSTOP');
    cleanups.push(() => void stale.proc.kill('SIGCONT'));
    const next = await until('another controller', async () => {
      const c = await controllers.readController();
      return c !== undefined && c.brokerId !== 0 ? c : undefined;
    });
    expect(next.epoch).toBe(first.epoch + 1);
    const all = await until('every partition created', async () => {
      const s = await states(zk, 'big');
      return s.size === 150 ? s : undefined;
    });
    stale.proc.kill('SIGCONT');
    await until('the stale write refused', async () => stale.logs.some((l) => l.msg === 'a fenced write was refused: this controller was replaced'));
    // The second batch was created by the new controller; the stale one's attempt changed nothing.
    const now = await states(zk, 'big');
    for (let p = 100; p < 150; p++) {
      expect(all.get(p)!.state).toMatchObject({ controllerEpoch: next.epoch, leaderEpoch: 0 });
      expect(now.get(p)!.state.controllerEpoch).toBe(next.epoch);
    }
    expect(await metric(stale, 'klog_active_controller')).toBe(0);
    expect(await metric(stale, 'klog_controller_epoch')).toBe(next.epoch);
  });
});
