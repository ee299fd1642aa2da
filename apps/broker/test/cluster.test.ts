/**
 * Cluster mode against a real ZooKeeper (docs/design.md §4): registrations, topics created later, a
 * duplicate broker id, session expiry, and leaving on close.
 */
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { BrokerIdInUseError, BrokerRegistry, ZkClient } from '@klog/zk-registry';
import { assertZooKeeperRunning, expireSession, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { AckLevel, Decoder, decodeMetadataResponse, decodeProduceAckResponse, encodeMetadataRequest, encodeProduceAckRequest } from '@klog/protocol';
import { startBroker, type Broker } from '../src/index.js';
import { WireClient, removeDir, tempDir, until } from './helpers.js';

const silent = pino({ level: 'silent' });
const cleanups: (() => Promise<void> | void)[] = [];

beforeAll(async () => {
  await assertZooKeeperRunning();
});
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

async function broker(connect: string, brokerId: number, extra: { logDir?: string } = {}): Promise<Broker> {
  const logDir = extra.logDir ?? tempDir();
  const b = await startBroker({ logDir, port: 0, brokerId, zookeeper: connect, zkSessionTimeoutMs: 2000, numPartitions: 2 }, silent);
  cleanups.push(async () => {
    await b.close();
    if (extra.logDir === undefined) removeDir(logDir);
  });
  return b;
}

async function registry(connect: string): Promise<BrokerRegistry> {
  const zk = await ZkClient.connect(connect);
  cleanups.push(() => zk.close());
  return new BrokerRegistry(zk);
}


describe('broker in cluster mode', () => {
  it('registers itself and its topics, including topics created later, and leaves on close', async () => {
    const connect = testConnectString();
    cleanups.push(() => removeChroot(connect));
    const dir = tempDir();
    cleanups.push(() => removeDir(dir));
    // A topic on disk before the start is registered at start.
    const first = await startBroker({ logDir: dir, port: 0, numPartitions: 3 }, silent);
    await first.logs.createTopic('on-disk');
    await first.close();

    const b = await broker(connect, 7, { logDir: dir });
    const reg = await registry(connect);
    expect(await reg.listBrokers()).toMatchObject([{ id: 7, host: '127.0.0.1', port: b.port }]);
    expect(await reg.topicPartitions('on-disk')).toEqual([{ brokerId: 7, partitions: 3 }]);

    const c = await WireClient.connect(b.port);
    cleanups.push(() => c.close());
    const r = await c.request(encodeMetadataRequest(['later']));
    expect(decodeMetadataResponse(new Decoder(r.body))).toEqual([{ topic: 'later', errorCode: 0, partitions: 2 }]);
    expect(b.logs.partitionCount('later')).toBeUndefined(); // METADATA does not create it: a produce does
    const created = await c.request(encodeProduceAckRequest({ acks: AckLevel.Appended, partitions: [{ topic: 'later', partition: 0, messages: Buffer.alloc(0) }] }));
    expect(decodeProduceAckResponse(new Decoder(created.body))).toMatchObject([{ topic: 'later', errorCode: 0 }]);
    expect(await until('topic registration', async () => ((await reg.topicPartitions('later')).length ? reg.topicPartitions('later') : undefined))).toEqual([
      { brokerId: 7, partitions: 2 },
    ]);

    await b.close();
    expect(await reg.listBrokers()).toEqual([]);
    expect(await reg.topicPartitions('later')).toEqual([]);
  });

  it('refuses to start with the id of a live broker', async () => {
    const connect = testConnectString();
    cleanups.push(() => removeChroot(connect));
    const live = await broker(connect, 1);
    const dir = tempDir();
    cleanups.push(() => removeDir(dir));
    await expect(startBroker({ logDir: dir, port: 0, brokerId: 1, zookeeper: connect, zkSessionTimeoutMs: 2000 }, silent)).rejects.toBeInstanceOf(
      BrokerIdInUseError,
    );
    // The live one is still registered and still itself.
    expect(await (await registry(connect)).listBrokers()).toMatchObject([{ id: 1, port: live.port }]);
  }, 20_000);

  it('registers again after its ZooKeeper session expires', async () => {
    const connect = testConnectString();
    cleanups.push(() => removeChroot(connect));
    const b = await broker(connect, 3);
    await b.logs.createTopic('kept');
    const reg = await registry(connect);
    await until('topic registration', async () => ((await reg.topicPartitions('kept')).length ? true : undefined));
    const oldSession = b.cluster!.zk.sessionId;
    await expireSession(connect, b.cluster!.zk.sessionCredentials());
    await until('a new session', async () => (b.cluster!.zk.sessionId !== oldSession ? true : undefined));
    await until('re-registration', async () => ((await reg.listBrokers()).length === 1 ? true : undefined));
    expect(await reg.listBrokers()).toMatchObject([{ id: 3, port: b.port }]);
    expect(await reg.topicPartitions('kept')).toEqual([{ brokerId: 3, partitions: 2 }]);
  }, 30_000);
});
