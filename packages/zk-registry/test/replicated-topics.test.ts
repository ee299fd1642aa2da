import { describe, expect, it } from 'vitest';
import {
  BrokerRegistry,
  brokerTopicPath,
  ControllerRegistry,
  createPartitionStateOps,
  newTopicId,
  partitionStatePath,
  ReplicatedTopicRegistry,
  setPartitionStateOp,
  TopicExistsError,
  TopicIsReplicatedError,
  ZkMultiError,
  type ControllerLease,
  type PartitionState,
  type PartitionStateNode,
  type TopicDefinition,
  type ZkClient,
} from '../src/index.js';
import { captureLogger, connectClient, CuttableProxy, freshChroot, nextEvent, waitFor } from './helpers.js';

function definition(partitions: number[][], extra: Partial<TopicDefinition> = {}): TopicDefinition {
  return { id: newTopicId(), partitions, createdMs: 1_764_600_000_000, ...extra };
}

/** Creates the topic and, as the controller does, its partitions with the first replica leading. */
async function createWithStates(zk: ZkClient, topic: string, def: TopicDefinition): Promise<ControllerLease | undefined> {
  const topics = new ReplicatedTopicRegistry(zk);
  await topics.createTopic(topic, def);
  const controller = new ControllerRegistry(zk);
  const lease = await controller.elect(def.partitions[0]![0]!);
  const entries = def.partitions.map((replicas, partition) => ({
    partition,
    state: { leader: replicas[0]!, leaderEpoch: 0, isr: [replicas[0]!], controllerEpoch: lease?.epoch ?? 1, isNew: true },
  }));
  const ops = createPartitionStateOps(topic, entries, { createPartitionsNode: true });
  if (lease) await controller.commitFenced(lease, ops);
  else await zk.multi(ops);
  return lease;
}

describe('replicated topics in ZooKeeper (docs/replication.md §3)', () => {
  it('creates a definition once and reads it back; a second create says what holds the name', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    const topics = new ReplicatedTopicRegistry(zk);
    const def = definition([[1, 2], [2, 0], [0, 1]], { minInsyncReplicas: 2, uncleanLeaderElection: true });
    await topics.createTopic('events', def);
    expect(await topics.readDefinition('events')).toEqual(def);
    expect(await topics.isReplicatedTopic('events')).toBe(true);
    expect(JSON.parse((await zk.getData(brokerTopicPath('events')))!.data.toString())).toMatchObject({ version: 1, id: def.id, partitions: { 0: [1, 2] } });

    const again = await topics.createTopic('events', definition([[0]])).catch((e: unknown) => e);
    expect(again).toBeInstanceOf(TopicExistsError);
    expect((again as TopicExistsError).kind).toBe('replicated');
    expect((again as Error).message).toBe('topic events already exists (replicated, 3 partitions)');
    expect(await topics.readDefinition('events')).toEqual(def); // untouched

    await new BrokerRegistry(zk).registerTopic('clicks', 0, 2); // a paper topic, auto-created
    const paper = await topics.createTopic('clicks', definition([[0]])).catch((e: unknown) => e);
    expect(paper).toBeInstanceOf(TopicExistsError);
    expect((paper as TopicExistsError).kind).toBe('paper');
    expect((paper as Error).message).toBe('topic clicks already exists (a paper topic)');
    expect(await topics.isReplicatedTopic('clicks')).toBe(false);
    expect(await topics.readDefinition('clicks')).toBeUndefined();
    expect(await topics.isReplicatedTopic('nothing')).toBe(false);
    expect(await topics.listTopics()).toEqual(['events']);
    expect([...(await topics.readDefinitions()).keys()]).toEqual(['events']);
  });

  it('a create sent again after its answer was lost finds its own definition and succeeds', async () => {
    const connectString = freshChroot();
    await (await connectClient(connectString)).close();
    const proxy = new CuttableProxy();
    await proxy.start();
    const chroot = connectString.slice(connectString.indexOf('/'));
    const zk = await connectClient(`127.0.0.1:${proxy.port}${chroot}`, { sessionTimeoutMs: 4500 });
    const topics = new ReplicatedTopicRegistry(zk);
    await zk.mkdirp('/brokers/topics'); // the next create is the definition's
    const def = definition([[0]]);
    proxy.freezeAfterRequest(1); // create
    await topics.createTopic('events', def);
    expect((await topics.readDefinition('events'))?.id).toBe(def.id);
  });

  it('the controller creates partition states in a fenced multi; they read with their versions', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    const def = definition([[1, 2], [2, 1]]);
    await createWithStates(zk, 'events', def);
    const topics = new ReplicatedTopicRegistry(zk);
    expect(await topics.listPartitions('events')).toEqual([0, 1]);
    const states = await topics.readPartitionStates('events');
    expect(states.get(1)).toEqual({ state: { leader: 2, leaderEpoch: 0, isr: [2], controllerEpoch: 1, isNew: true }, stateVersion: 0 });
    // An unreadable state is logged, and the partition left out (offline); never guessed.
    const logger = captureLogger();
    await zk.setData(partitionStatePath('events', 0), '{"version":1,"leader":"x"}');
    const withLog = new ReplicatedTopicRegistry(zk, { logger });
    expect([...(await withLog.readPartitionStates('events')).keys()]).toEqual([1]);
    expect(logger.messages('error')).toContain('unreadable partition state; the partition counts as offline');
  });

  it('the leader\'s ISR write: applied at its version, fenced by a controller write, its own lost answer recognised', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    await createWithStates(zk, 'events', definition([[1, 2, 0]]));
    const topics = new ReplicatedTopicRegistry(zk);
    const known = (await topics.readPartitionState('events', 0))!;

    // Expand the ISR and clear `new`: written at the version it knew; nothing else changes.
    const expand = await topics.updateIsrAsLeader('events', 0, known, { isr: [1, 2, 0], isNew: false });
    expect(expand.outcome).toBe('written');
    expect(expand.node).toEqual({ state: { ...known.state, isr: [1, 2, 0], isNew: false }, stateVersion: 1 });
    expect(await topics.readPartitionState('events', 0)).toEqual(expand.node);

    // A retry whose first attempt was applied (same leader and epoch): written, version read.
    const retried = await topics.updateIsrAsLeader('events', 0, known, { isr: [1, 2, 0], isNew: false });
    expect(retried).toEqual({ outcome: 'written', node: expand.node });
    // Same leader and epoch but another value of its own: it writes again on top of it.
    const shrink = await topics.updateIsrAsLeader('events', 0, known, { isr: [1, 2], isNew: false });
    expect(shrink.outcome === 'written' && shrink.node).toEqual({ state: { ...known.state, isr: [1, 2], isNew: false }, stateVersion: 2 });

    // The controller writes (leaderEpoch + 1): the leader's next write is fenced.
    const controller = new ControllerRegistry(zk);
    const lease = (await controller.elect(9)) ?? undefined;
    const current = (await topics.readPartitionState('events', 0))!;
    const byController: PartitionState = { ...current.state, leaderEpoch: 1, isr: [1, 2], controllerEpoch: current.state.controllerEpoch };
    if (lease) await controller.commitFenced(lease, [setPartitionStateOp('events', 0, byController, current.stateVersion)]);
    else await zk.multi([setPartitionStateOp('events', 0, byController, current.stateVersion)]);
    const fenced = await topics.updateIsrAsLeader('events', 0, current, { isr: [1] });
    expect(fenced.outcome).toBe('fenced');
    expect(fenced.node?.state.leaderEpoch).toBe(1);
    expect((await topics.readPartitionState('events', 0))?.state).toEqual(byController);

    // Deleted: fenced. Refused before writing: an ISR without the leader.
    await expect(topics.updateIsrAsLeader('events', 0, fenced.node!, { isr: [2] })).rejects.toThrow(/must hold the leader 1/);
    await zk.remove(partitionStatePath('events', 0));
    expect((await topics.updateIsrAsLeader('events', 0, fenced.node!, { isr: [1] })).outcome).toBe('fenced');
  });

  it('the leader\'s write whose answer was lost is recognised as applied', async () => {
    const connectString = freshChroot();
    const admin = await connectClient(connectString);
    await createWithStates(admin, 'events', definition([[1, 2]]));
    const proxy = new CuttableProxy();
    await proxy.start();
    const chroot = connectString.slice(connectString.indexOf('/'));
    const zk = await connectClient(`127.0.0.1:${proxy.port}${chroot}`, { sessionTimeoutMs: 4500 });
    const topics = new ReplicatedTopicRegistry(zk);
    const known = (await topics.readPartitionState('events', 0))!;
    proxy.freezeAfterRequest(5); // setData: applied, answer lost, sent again -> BadVersion
    const result = await topics.updateIsrAsLeader('events', 0, known, { isr: [1, 2] });
    expect(result).toEqual({ outcome: 'written', node: { state: { ...known.state, isr: [1, 2] }, stateVersion: 1 } });
  });

  it('races of leader and controller writes: each round exactly one wins, and no write is lost unseen', async () => {
    const connectString = freshChroot();
    const leaderZk = await connectClient(connectString);
    const controllerZk = await connectClient(connectString);
    const lease = (await createWithStates(controllerZk, 'events', definition([[1, 2, 0]])))!;
    const topics = new ReplicatedTopicRegistry(leaderZk);
    const controller = new ControllerRegistry(controllerZk);
    const controllerTopics = new ReplicatedTopicRegistry(controllerZk);
    for (let round = 0; round < 20; round++) {
      const seen = (await topics.readPartitionState('events', 0))!;
      const isr = seen.state.isr.length === 3 ? [1, 2] : [1, 2, 0];
      const controllerState: PartitionState = { ...seen.state, leaderEpoch: seen.state.leaderEpoch + 1, controllerEpoch: lease.epoch, isr: [1] };
      const [leaderResult, controllerResult] = await Promise.allSettled([
        topics.updateIsrAsLeader('events', 0, seen, { isr }),
        controller.commitFenced(lease, [setPartitionStateOp('events', 0, controllerState, seen.stateVersion)]),
      ]);
      const now = (await controllerTopics.readPartitionState('events', 0))!;
      expect(now.stateVersion).toBe(seen.stateVersion + 1);
      if (controllerResult.status === 'fulfilled') {
        expect(leaderResult.status === 'fulfilled' && leaderResult.value.outcome).toBe('fenced');
        expect(now.state).toEqual(controllerState);
      } else {
        expect(controllerResult.reason).toBeInstanceOf(ZkMultiError);
        expect((controllerResult.reason as ZkMultiError).reason).toBe('BadVersion');
        expect(leaderResult.status === 'fulfilled' && leaderResult.value.outcome).toBe('written');
        expect(now.state).toEqual({ ...seen.state, isr });
      }
    }
  });

  it('watches definitions, partitions and partition states', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    const watcher = new ReplicatedTopicRegistry(await connectClient(connectString));
    const definitions: string[][] = [];
    const dw = watcher.watchDefinitions((defs) => void definitions.push([...defs.entries()].map(([t, d]) => `${t}:${d.id}`)));
    await dw.ready;
    const states: Array<PartitionStateNode | undefined> = [];
    const sw = watcher.watchPartitionState('events', 0, (node) => void states.push(node));
    await sw.ready;
    const partitions: number[][] = [];
    const pw = watcher.watchPartitions('events', (ps) => void partitions.push(ps));
    await pw.ready;
    expect(definitions).toEqual([[]]);
    expect(states).toEqual([undefined]);

    await new BrokerRegistry(zk).registerTopic('clicks', 0, 1); // a paper topic is no definition
    const def = definition([[1]]);
    await createWithStates(zk, 'events', def);
    await waitFor(() => definitions.some((d) => d.includes(`events:${def.id}`)), 5000, 'definition seen');
    expect(definitions.at(-1)).toEqual([`events:${def.id}`]);
    await waitFor(() => states.at(-1) !== undefined, 5000, 'state seen');
    expect(states.at(-1)).toMatchObject({ state: { leader: 1, isr: [1] }, stateVersion: 0 });
    await waitFor(() => partitions.at(-1)?.length === 1, 5000, 'partitions seen');

    const topics = new ReplicatedTopicRegistry(zk);
    await topics.updateIsrAsLeader('events', 0, states.at(-1)!, { isNew: false });
    await waitFor(() => states.at(-1)?.stateVersion === 1, 5000, 'ISR write seen');
    expect(states.at(-1)?.state.isNew).toBe(false);

    // Deleted and created again under the same name: the watch shows the new id.
    await zk.remove(brokerTopicPath('events'), { recursive: true });
    const def2 = definition([[1]]);
    await topics.createTopic('events', def2);
    await waitFor(() => definitions.at(-1)?.[0] === `events:${def2.id}`, 5000, 'new definition seen');
    dw.close();
    sw.close();
    pw.close();
  });
});

describe('paper readers skip replicated topics (docs/replication.md §3, "Paper readers")', () => {
  it('lists, reads and watches a replicated topic as no paper topic, without misreading `partitions`', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    const logger = captureLogger();
    const paper = new BrokerRegistry(await connectClient(connectString), { logger });
    await new BrokerRegistry(zk).registerTopic('clicks', 0, 2);
    await createWithStates(zk, 'events', definition([[0, 1]]));
    expect(await zk.getChildren(brokerTopicPath('events'))).toEqual(['partitions']);

    expect(await paper.listTopics()).toEqual(['clicks']);
    expect(await paper.topicPartitions('events')).toEqual([]);
    expect(await paper.topicPartitions('clicks')).toEqual([{ brokerId: 0, partitions: 2 }]);
    expect([...(await paper.listTopicPartitions()).keys()]).toEqual(['clicks']);
    const seen: number[][] = [];
    const watch = paper.watchTopicBrokers('events', (ids) => void seen.push(ids));
    await watch.ready;
    expect(seen).toEqual([[]]);
    watch.close();
    expect(logger.entries.filter((e) => e.level === 'warn' || e.level === 'error')).toEqual([]);
  });

  it('a broker cannot register a paper topic under a replicated topic\'s name', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    await new ReplicatedTopicRegistry(zk).createTopic('events', definition([[0]]));
    const broker = new BrokerRegistry(await connectClient(connectString));
    const error = await broker.registerTopic('events', 0, 1).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(TopicIsReplicatedError);
    expect(await zk.getChildren(brokerTopicPath('events'))).toEqual([]);
    // A paper topic registered first keeps its name: the definition's create fails.
    await broker.registerTopic('clicks', 0, 1);
    await expect(new ReplicatedTopicRegistry(zk).createTopic('clicks', definition([[0]]))).rejects.toBeInstanceOf(TopicExistsError);
  });

  it('a paper topic registered while ZooKeeper is away is still written once it is back', async () => {
    const connectString = freshChroot();
    await (await connectClient(connectString)).close(); // creates the chroot
    const proxy = new CuttableProxy();
    await proxy.start();
    const chroot = connectString.slice(connectString.indexOf('/'));
    const zk = await connectClient(`127.0.0.1:${proxy.port}${chroot}`, { sessionTimeoutMs: 20_000, operationTimeoutMs: 1000 });
    const observer = await connectClient(connectString);
    const port = proxy.port;
    const disconnected = nextEvent(zk, 'disconnected');
    await proxy.stop();
    await disconnected;
    await expect(new BrokerRegistry(zk).registerTopic('clicks', 0, 2)).rejects.toThrow(/not connected to ZooKeeper|no reply/);
    await proxy.start(port);
    await waitFor(async () => (await observer.exists(`${brokerTopicPath('clicks')}/0`)) !== undefined, 10_000, 'the registration written');
  });
});
