import { describe, expect, it } from 'vitest';
import {
  ControllerFencedError,
  ControllerRegistry,
  controllerEpochPath,
  controllerPath,
  InvalidZkValueError,
  parseControllerInfo,
  ZkMultiError,
  type ControllerInfo,
  type ControllerLease,
  type ZkClient,
} from '../src/index.js';
import { expireSession } from '../src/testing.js';
import { connectClient, CuttableProxy, freshChroot, waitFor } from './helpers.js';

async function brokers(connectString: string, n: number): Promise<{ zk: ZkClient; registry: ControllerRegistry }[]> {
  const out = [];
  for (let i = 0; i < n; i++) {
    const zk = await connectClient(connectString);
    out.push({ zk, registry: new ControllerRegistry(zk) });
  }
  return out;
}

describe('controller election (docs/replication.md §5.1)', () => {
  it('elects exactly one of several concurrent brokers, and the epoch grows by one per election', async () => {
    const connectString = freshChroot();
    const all = await brokers(connectString, 5);
    const reader = new ControllerRegistry(await connectClient(connectString));
    let alive = all.map((b, id) => ({ ...b, id }));
    let lastEpoch = 0;
    for (let round = 0; round < 4; round++) {
      const leases = await Promise.all(alive.map((b) => b.registry.elect(b.id)));
      const winners = leases.filter((l): l is ControllerLease => l !== undefined);
      expect(winners).toHaveLength(1);
      const lease = winners[0]!;
      expect(lease.epoch).toBe(lastEpoch + 1);
      lastEpoch = lease.epoch;
      const winner = alive.find((b) => b.id === lease.brokerId)!;
      expect(lease.sessionId).toBe(winner.zk.sessionId);
      expect(await reader.readController()).toMatchObject({ brokerId: lease.brokerId, epoch: lease.epoch });
      const epochNode = await reader.readControllerEpoch();
      expect(epochNode).toEqual({ epoch: lease.epoch, version: lease.epochVersion });
      // Losers do nothing while /controller exists.
      expect(await alive.find((b) => b !== winner)!.registry.elect(99)).toBeUndefined();
      // The winner crashes: its session closes, the others elect again.
      await winner.zk.close();
      alive = alive.filter((b) => b !== winner);
    }
    expect((await reader.readControllerEpoch())?.epoch).toBe(4);
  });

  it('tries again when it lost the epoch race to a controller that is already gone (no watch event is left to wake it)', async () => {
    const connectString = freshChroot();
    const [a, b] = await brokers(connectString, 2);
    // Between a's read of /controller-epoch and a's multi, b wins epoch 1 and resigns.
    const multi = a!.zk.multi.bind(a!.zk);
    let interleaved = false;
    a!.zk.multi = async (ops, options) => {
      if (!interleaved) {
        interleaved = true;
        const leaseB = (await b!.registry.elect(2))!;
        expect(await b!.registry.resign(leaseB)).toBe(true);
      }
      return multi(ops, options);
    };
    const lease = await a!.registry.elect(1);
    expect(interleaved).toBe(true);
    expect(lease).toMatchObject({ brokerId: 1, epoch: 2 });
    expect(await b!.registry.readController()).toMatchObject({ brokerId: 1, epoch: 2 });
  });

  it('fences a replaced controller: its multis fail on the epoch check and apply nothing', async () => {
    const connectString = freshChroot();
    const [a, b] = await brokers(connectString, 2);
    const leaseA = (await a!.registry.elect(1))!;
    await a!.registry.commitFenced(leaseA, [{ op: 'create', path: '/written-by-a', data: '1' }]);
    // A's session expires (a pause longer than the session timeout): B wins epoch 2.
    await expireSession(connectString, a!.zk.sessionCredentials());
    await waitFor(async () => (await b!.registry.elect(2)) !== undefined || (await b!.registry.readController())?.brokerId === 2, 10_000, 'b elected');
    const current = (await b!.registry.readController())!;
    expect(current).toMatchObject({ brokerId: 2, epoch: 2 });
    // A, resumed, still holds its old lease: every write is refused.
    const stale = await a!.registry.commitFenced(leaseA, [{ op: 'create', path: '/stale' }]).catch((e: unknown) => e);
    expect(stale).toBeInstanceOf(ControllerFencedError);
    expect((stale as ControllerFencedError).reason).toBe('session');
    // Even from a client in the lease's session position (the check alone fences it).
    const checkOnly = await a!.zk.multi([{ op: 'check', path: controllerEpochPath(), version: leaseA.epochVersion }, { op: 'create', path: '/stale' }]).catch((e: unknown) => e);
    expect(checkOnly).toBeInstanceOf(ZkMultiError);
    expect([(checkOnly as ZkMultiError).index, (checkOnly as ZkMultiError).reason]).toEqual([0, 'BadVersion']);
    expect(await b!.zk.exists('/stale')).toBeUndefined();
    // The lease of the same session, after another broker bumped the epoch: fenced by epoch.
    const leaseOfA2 = { ...leaseA, sessionId: a!.zk.sessionId };
    const byEpoch = await a!.registry.commitFenced(leaseOfA2, [{ op: 'create', path: '/stale' }]).catch((e: unknown) => e);
    expect(byEpoch).toBeInstanceOf(ControllerFencedError);
    expect((byEpoch as ControllerFencedError).reason).toBe('epoch');
    expect(await b!.zk.exists('/stale')).toBeUndefined();
  });

  it('numbers failures of a fenced multi by the caller\'s ops, and applies nothing', async () => {
    const connectString = freshChroot();
    const [a] = await brokers(connectString, 1);
    const lease = (await a!.registry.elect(0))!;
    await a!.zk.create('/s', 'v');
    const err = await a!.registry
      .commitFenced(lease, [
        { op: 'create', path: '/new' },
        { op: 'setData', path: '/s', data: 'w', version: 5 },
      ])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ZkMultiError);
    expect([(err as ZkMultiError).index, (err as ZkMultiError).reason, (err as ZkMultiError).path]).toEqual([1, 'BadVersion', '/s']);
    expect(await a!.zk.exists('/new')).toBeUndefined();
    const results = await a!.registry.commitFenced(lease, [{ op: 'setData', path: '/s', data: 'w', version: 0 }]);
    expect(results).toHaveLength(1);
    expect(results[0]!.op === 'setData' && results[0]!.stat.version).toBe(1);
  });

  it('recognises its own election when the answer was lost and the multi was sent again', async () => {
    const connectString = freshChroot();
    await (await connectClient(connectString)).close(); // creates the chroot
    const proxy = new CuttableProxy();
    await proxy.start();
    const chroot = connectString.slice(connectString.indexOf('/'));
    const zk = await connectClient(`127.0.0.1:${proxy.port}${chroot}`, { sessionTimeoutMs: 4500 });
    const registry = new ControllerRegistry(zk);
    const sessionId = zk.sessionId;
    // The election's multi (type 14) is applied, its answer lost; the connection is dropped
    // after two thirds of the session timeout and the multi sent again: NodeExists.
    proxy.freezeAfterRequest(14);
    const lease = await registry.elect(7);
    expect(zk.sessionId).toBe(sessionId);
    expect(lease).toMatchObject({ brokerId: 7, epoch: 1, sessionId });
    expect(await registry.readControllerEpoch()).toEqual({ epoch: 1, version: lease!.epochVersion });
  });

  it('resigns by removing /controller only while its session holds it', async () => {
    const connectString = freshChroot();
    const [a, b] = await brokers(connectString, 2);
    const lease = (await a!.registry.elect(1))!;
    expect(await b!.registry.resign({ ...lease, sessionId: b!.zk.sessionId })).toBe(false); // b does not hold it
    expect(await b!.registry.readController()).toMatchObject({ brokerId: 1 });
    expect(await a!.registry.resign(lease)).toBe(true);
    expect(await b!.registry.readController()).toBeUndefined();
    const leaseB = (await b!.registry.elect(2))!;
    expect(leaseB.epoch).toBe(2);
    expect(await a!.registry.resign(lease)).toBe(false); // b's node now
    expect(await b!.registry.readController()).toMatchObject({ brokerId: 2, epoch: 2 });
  });

  it('watches /controller: fires on election, on the controller\'s end, and on a value that does not parse', async () => {
    const connectString = freshChroot();
    const [a, b] = await brokers(connectString, 2);
    const seen: Array<[ControllerInfo | undefined, boolean]> = [];
    const watch = b!.registry.watchController((info, present) => void seen.push([info, present]));
    await watch.ready;
    expect(seen).toEqual([[undefined, false]]);
    await a!.registry.elect(1, 1_764_600_000_000);
    await waitFor(() => seen.length === 2, 5000, 'election seen');
    expect(seen[1]).toEqual([{ brokerId: 1, epoch: 1, timestampMs: 1_764_600_000_000 }, true]);
    await a!.zk.close();
    await waitFor(() => seen.length === 3, 5000, 'end seen');
    expect(seen[2]).toEqual([undefined, false]);
    await b!.zk.create(controllerPath(), 'garbage', { mode: 'ephemeral' });
    await waitFor(() => seen.length === 4, 5000, 'garbage seen');
    expect(seen[3]).toEqual([undefined, true]);
    expect(await b!.registry.elect(2)).toBeUndefined();
    watch.close();
  });

  it('never guesses an epoch: an unreadable /controller-epoch stops the election with a typed error', async () => {
    const zk = await connectClient(freshChroot());
    await zk.create(controllerEpochPath(), 'five');
    await expect(new ControllerRegistry(zk).elect(1)).rejects.toBeInstanceOf(InvalidZkValueError);
    expect(await zk.exists(controllerPath())).toBeUndefined();
    expect(() => parseControllerInfo('{"version":1,"brokerId":1,"epoch":0,"timestampMs":1}')).toThrow(/"epoch" must be an integer in 1\.\./);
    expect(parseControllerInfo('{"version":1,"brokerId":1,"epoch":3,"timestampMs":1,"extra":true}')).toEqual({ brokerId: 1, epoch: 3, timestampMs: 1 });
  });
});
