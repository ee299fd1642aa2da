import { describe, expect, it } from 'vitest';
import { brokerIdPath, BrokerRegistry, ZkBadVersionError, ZkMultiError, ZkNodeExistsError, ZkNoNodeError, ZkSessionExpiredError } from '../src/index.js';
import { expireSession } from '../src/testing.js';
import { connectClient, freshChroot } from './helpers.js';

/** The refusal of a multi, for assertions. */
async function refusal(promise: Promise<unknown>): Promise<ZkMultiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ZkMultiError);
  return error as ZkMultiError;
}

describe('ZkClient.multi against a real ZooKeeper', () => {
  it('commits create, setData, remove and check together, with results', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    await zk.create('/a', 'a0');
    await zk.create('/gone', 'x');
    const results = await zk.multi([
      { op: 'check', path: '/a', version: 0 },
      { op: 'create', path: '/b', data: 'b0' },
      { op: 'create', path: '/b/c' },
      { op: 'create', path: '/e', data: 'mine', mode: 'ephemeral' },
      { op: 'setData', path: '/a', data: 'a1', version: 0 },
      { op: 'remove', path: '/gone', version: 0 },
    ]);
    expect(results.map((r) => r.op)).toEqual(['check', 'create', 'create', 'create', 'setData', 'remove']);
    const set = results[4]!;
    expect(set.op === 'setData' && set.stat.version).toBe(1);
    expect((await zk.getData('/a'))?.data.toString()).toBe('a1');
    expect((await zk.getData('/b'))?.data.toString()).toBe('b0');
    expect(await zk.exists('/b/c')).toBeDefined();
    expect(await zk.exists('/gone')).toBeUndefined();
    const eph = await zk.exists('/e');
    expect(eph?.ephemeralOwner).toBe(zk.sessionId);
    await zk.close();
    const other = await connectClient(connectString);
    expect(await other.exists('/e')).toBeUndefined(); // the ephemeral went with its session
    expect(await zk.multi([])).toEqual([]);
  });

  it('applies nothing when one op fails, and names that op and why', async () => {
    const zk = await connectClient(freshChroot());
    await zk.create('/n', 'v');
    await zk.setData('/n', 'v1'); // version 1

    const badVersion = await refusal(
      zk.multi([
        { op: 'create', path: '/x' },
        { op: 'setData', path: '/n', data: 'v2', version: 0 },
      ]),
    );
    expect(badVersion.index).toBe(1);
    expect(badVersion.reason).toBe('BadVersion');
    expect(badVersion.path).toBe('/n');
    expect(badVersion.op).toEqual({ op: 'setData', path: '/n', data: 'v2', version: 0 });
    expect(badVersion.error).toBeInstanceOf(ZkBadVersionError);
    expect(await zk.exists('/x')).toBeUndefined(); // the create before it was not applied

    const exists = await refusal(zk.multi([{ op: 'check', path: '/n', version: 1 }, { op: 'create', path: '/n' }]));
    expect([exists.index, exists.reason]).toEqual([1, 'NodeExists']);
    expect(exists.error).toBeInstanceOf(ZkNodeExistsError);

    const noNode = await refusal(zk.multi([{ op: 'remove', path: '/missing', version: -1 }]));
    expect([noNode.index, noNode.reason]).toEqual([0, 'NoNode']);
    expect(noNode.error).toBeInstanceOf(ZkNoNodeError);

    const noParent = await refusal(zk.multi([{ op: 'create', path: '/p/q' }])); // a multi makes no parents
    expect(noParent.reason).toBe('NoNode');

    await zk.create('/full/child', '');
    const notEmpty = await refusal(zk.multi([{ op: 'remove', path: '/full', version: -1 }]));
    expect(notEmpty.reason).toBe('NotEmpty');

    const ephParent = await refusal(
      zk.multi([
        { op: 'create', path: '/eph', mode: 'ephemeral' },
        { op: 'create', path: '/eph/child' },
      ]),
    );
    expect([ephParent.index, ephParent.reason]).toEqual([1, 'NoChildrenForEphemerals']);
    expect(await zk.exists('/eph')).toBeUndefined();
    expect((await zk.getData('/n'))?.data.toString()).toBe('v1');
  });

  it('checks and writes at version 0 (a node just created) as asked, not as "any version"', async () => {
    const zk = await connectClient(freshChroot());
    await zk.create('/n', 'v');
    await zk.setData('/n', 'v1');
    expect((await refusal(zk.multi([{ op: 'check', path: '/n', version: 0 }]))).reason).toBe('BadVersion');
    expect((await refusal(zk.multi([{ op: 'remove', path: '/n', version: 0 }]))).reason).toBe('BadVersion');
    expect((await refusal(zk.multi([{ op: 'setData', path: '/n', data: 'x', version: 0 }]))).reason).toBe('BadVersion');
    await zk.multi([{ op: 'setData', path: '/n', data: 'v2', version: 1 }]);
    expect((await zk.getData('/n'))?.data.toString()).toBe('v2');
  });

  it('never carries a multi bound to a session (or creating an ephemeral) over to the next session', async () => {
    const connectString = freshChroot();
    const zk = await connectClient(connectString);
    const old = zk.sessionId;
    await expireSession(connectString, zk.sessionCredentials());
    await expect(zk.multi([{ op: 'create', path: '/bound' }], { sessionId: old })).rejects.toBeInstanceOf(ZkSessionExpiredError);
    expect(await zk.exists('/bound')).toBeUndefined();
    expect(zk.sessionId).not.toBe(old);
    await zk.multi([{ op: 'create', path: '/free' }]); // unbound: runs in the new session
    expect(await zk.exists('/free')).toBeDefined();
  });

  it('reads the creation zxid: a broker registered again gets a larger broker epoch', async () => {
    const connectString = freshChroot();
    const broker = await connectClient(connectString);
    const reader = new BrokerRegistry(await connectClient(connectString));
    await new BrokerRegistry(broker).registerBroker(3, 'h', 9092);
    const first = await reader.getBrokerEpoch(3);
    expect(first).toBeGreaterThan(0);
    expect((await broker.exists(brokerIdPath(3)))?.czxid).toBe(first);
    expect((await reader.listRegisteredBrokers()).map((b) => [b.id, b.brokerEpoch])).toEqual([[3, first]]);
    await expireSession(connectString, broker.sessionCredentials());
    let again: number | undefined;
    for (let i = 0; i < 200 && (again === undefined || again === first); i++) {
      await new Promise((r) => setTimeout(r, 25));
      again = await reader.getBrokerEpoch(3);
    }
    expect(again).toBeGreaterThan(first!);
  });
});
