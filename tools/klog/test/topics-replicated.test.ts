/**
 * `klog topics --create/--describe/--delete/--elect-preferred-leaders` as a user types them
 * (docs/replication.md §15.1): the real binary against the real ZooKeeper, the controller's
 * ZooKeeper side played by the client tests' stand-in, brokers registered in ZooKeeper.
 */
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { BrokerRegistry, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, ControllerStandIn, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { runKlog } from './cli-run.js';

let connect: string;
let zk: ZkClient;
let controller: ControllerStandIn;

beforeAll(async () => {
  await assertZooKeeperRunning();
});

beforeEach(async () => {
  connect = testConnectString('klog-topics');
  zk = await ZkClient.connect(connect);
  const brokers = new BrokerRegistry(zk);
  for (const id of [0, 1, 2]) await brokers.registerBroker(id, '127.0.0.1', 1);
  controller = new ControllerStandIn(zk).start();
});

afterEach(async () => {
  await controller.stop();
  await zk.close();
  await removeChroot(connect);
});

const topics = (...args: string[]) => runKlog(['topics', '--zookeeper', connect, ...args]);

describe('klog topics on replicated topics', () => {
  it('creates, describes, elects and deletes', async () => {
    const created = await topics('--create', '--topic', 'events', '--partitions', '4', '--replication-factor', '3', '--min-insync-replicas', '2');
    expect(created.stderr).toBe('');
    expect(created.code).toBe(0);
    const lines = created.stdout.split('\n');
    expect(lines[0]).toBe('created topic events: 4 partitions, replication factor 3, min.insync.replicas 2');
    expect(lines[1]).toBe('PARTITION  LEADER  REPLICAS  ISR');
    expect(lines.slice(2, 6).every((l) => /^[0-3] {10}[0-2] {7}[0-2],[0-2],[0-2] {5}[0-2]$/.test(l))).toBe(true);

    expect((await topics()).stdout).toBe('events\n');
    const described = await topics('--describe', 'events');
    expect(described.code).toBe(0);
    expect(described.stdout).toMatch(/^topic events: 4 partitions, replication factor 3, min.insync.replicas 2, id [0-9a-f]{16}\n/);
    expect(described.stdout.split('\n')[1]).toBe('PARTITION  LEADER  EPOCH  REPLICAS  ISR  HIGH-WATERMARK  STATUS');
    // The brokers registered have no listener: no high watermark; the ISR is the leader alone.
    expect(described.stdout.split('\n').slice(2, 6).every((l) => / -  +under-replicated$/.test(l))).toBe(true);

    // Offline with an empty ISR: its preferred replica can never be elected.
    await controller.setLeader('events', 2, -1, []);
    const unavailable = await topics('--describe', '--unavailable');
    expect(unavailable.stdout).toMatch(/^TOPIC +PARTITION +LEADER .*\nevents +2 +none +1 +\S+ +- +- +offline\n$/);
    const json = JSON.parse((await topics('--describe', 'events', '--json')).stdout) as { partitions: Array<{ leader: number | null; status: string }> };
    expect(json.partitions[2]).toMatchObject({ leader: null, status: 'offline' });

    const elected = await topics('--elect-preferred-leaders');
    expect(elected.code).toBe(0);
    expect(elected.stdout).toBe('preferred leaders: 0 partitions moved, 3 already led by their preferred leader, 1 not possible (preferred replica not in the ISR or not live)\n');

    const deleted = await topics('--delete', '--topic', 'events');
    expect(deleted.stdout).toBe('deleted topic events (4 partitions, 12 replicas)\n');
    expect((await topics()).stdout).toBe('');
  });

  it('refuses in one line with exit code 1', async () => {
    const tooMany = await topics('--create', '--topic', 'events', '--partitions', '1', '--replication-factor', '4');
    expect(tooMany).toMatchObject({ code: 1, stdout: '', stderr: 'klog topics: replication factor 4 is larger than the 3 live brokers (0, 1, 2)\n' });
    const minIsr = await topics('--create', '--topic', 'events', '--partitions', '1', '--replication-factor', '3', '--min-insync-replicas', '4');
    expect(minIsr).toMatchObject({ code: 1, stderr: 'klog topics: --min-insync-replicas 4 is larger than --replication-factor 3\n' });
    await new BrokerRegistry(zk).registerTopic('clicks', 0, 1);
    expect((await topics('--create', '--topic', 'clicks', '--partitions', '1', '--replication-factor', '1')).stderr).toBe('klog topics: topic clicks already exists (a paper topic)\n');
    expect((await topics('--create', '--topic', 'events', '--partitions', '2', '--replication-factor', '1')).code).toBe(0);
    expect((await topics('--create', '--topic', 'events', '--partitions', '2', '--replication-factor', '1')).stderr).toBe('klog topics: topic events already exists (replicated, 2 partitions)\n');
    const paper = await topics('--delete', '--topic', 'clicks');
    expect(paper).toMatchObject({ code: 1, stderr: 'klog topics: topic clicks is a paper topic: its logs belong to the brokers that hold them; stop them and delete LOG_DIR/clicks-*\n' });
    const usage = await topics('--create', '--topic', 'x');
    expect(usage.code).toBe(2);
    expect(usage.stderr).toBe('klog topics: error: --create needs --partitions and --replication-factor\n');
  });

  it('says when no controller elects the leaders in time', async () => {
    controller.active = false;
    const r = await topics('--create', '--topic', 'events', '--partitions', '1', '--replication-factor', '1', '--timeout-ms', '300');
    expect(r).toMatchObject({
      code: 1,
      stderr: 'klog topics: error: topic events is defined, but the controller elected no leader for partition 0 within 300 ms (is a controller running?)\n',
    });
  });
});
