/**
 * Forced ZooKeeper session expiry (docs/design.md §4): a broker and a consumer both register again on a
 * new session, and the consumer stops handing out the partitions it owned before another
 * member takes them. Brokers run in this process (their session is at hand), members as
 * processes that print their session id and password.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startBroker, type Broker } from '@klog/broker';
import { ZkProducer } from '@klog/client';
import { assertZooKeeperRunning, expireSession, removeChroot, testConnectString } from '@klog/zk-registry/testing';
import { Member, type Received, ZkClient, counts, killAll, owners, settled, sleep, waitFor } from './harness.js';

const PARTITIONS = ['0-0', '0-1', '1-0', '1-1', '2-0', '2-1'];
const TOPIC = 'expiry';

describe('session expiry', () => {
  let connect: string;
  let zk: ZkClient;
  const brokers: Broker[] = [];
  const dirs: string[] = [];
  let producer: ZkProducer;

  beforeAll(async () => {
    await assertZooKeeperRunning();
    connect = testConnectString('klog-cluster');
    zk = await ZkClient.connect(connect);
    for (const brokerId of [0, 1, 2]) {
      const logDir = mkdtempSync(join(tmpdir(), 'klog-expiry-'));
      dirs.push(logDir);
      brokers.push(await startBroker({ logDir, port: 0, brokerId, zookeeper: connect, numPartitions: 2, flushMessages: 1, zkSessionTimeoutMs: 3000 }, pino({ level: 'silent' })));
    }
    producer = new ZkProducer({ zookeeper: connect, acks: 2 });
    await producer.partitions(TOPIC);
    await waitFor('topic on 3 brokers', async () => (await zk.getChildren(`/brokers/topics/${TOPIC}`)).length === 3);
  });

  afterAll(async () => {
    await producer?.close();
    await killAll();
    for (const b of brokers) await b.close();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
    await zk?.close();
    await removeChroot(connect);
  });

  it('a broker whose session expires registers itself and its topics again', async () => {
    const b = brokers[0]!;
    const before = b.cluster!.zk.sessionId;
    expect((await zk.exists('/brokers/ids/0'))?.ephemeralOwner).toBe(before);
    await expireSession(connect, b.cluster!.zk.sessionCredentials());
    await waitFor('broker 0 back on a new session', async () => {
      const now = b.cluster!.zk.sessionId;
      if (now === before) return false;
      return (await zk.exists('/brokers/ids/0'))?.ephemeralOwner === now && (await zk.exists(`/brokers/topics/${TOPIC}/0`))?.ephemeralOwner === now;
    }, 15_000);
    expect((await zk.getData(`/brokers/topics/${TOPIC}/0`))?.data.toString()).toBe('2');
  });

  it('a consumer whose session expires stops before its partitions move, registers again and gets its share back', async () => {
    const received: Received[] = [];
    const mk = (id: string): Member => new Member({ zookeeper: connect, group: 'E', topic: TOPIC, consumerId: id, sessionTimeoutMs: 3000, autoCommitIntervalMs: 200 }, received);
    const e1 = await mk('e1').started();
    const e2 = await mk('e2').started();
    await waitFor('2 members settled', () => settled(zk, 'E', TOPIC, PARTITIONS, ['e1', 'e2']), 15_000);
    const mine = ['0-0', '0-1', '1-0'];
    expect([...(await owners(zk, 'E', TOPIC))].filter(([, t]) => t === 'e1-0').map(([bp]) => bp)).toEqual(mine);

    const sent: string[] = [];
    let stop = false;
    const producing: Promise<void> = (async () => {
      for (let i = 0; !stop; i++) {
        const values = Array.from({ length: 50 }, (_, j) => `v${i}-${j}`);
        await producer.send(TOPIC, values.map((value) => ({ value })));
        sent.push(...values);
        await sleep(30);
      }
    })();
    try {
    await waitFor('e1 consuming', () => e1.received.length > 200, 20_000);

    const oldSession = (await zk.exists('/consumers/E/ids/e1'))?.ephemeralOwner;
    await expireSession(connect, { sessionId: Buffer.from(e1.start!.sessionId, 'hex'), sessionPassword: Buffer.from(e1.start!.password, 'hex') });
    const expiredAt = Date.now();
    // e2 takes everything once e1's nodes are gone, then e1 comes back and takes its share again.
    await waitFor('e1 registered again with its share', async () => {
      const node = await zk.exists('/consumers/E/ids/e1');
      return node !== undefined && node.ephemeralOwner !== oldSession && (await settled(zk, 'E', TOPIC, PARTITIONS, ['e1', 'e2'])) &&
        [...(await owners(zk, 'E', TOPIC))].filter(([, t]) => t === 'e1-0').length === 3;
    }, 20_000);
    await sleep(500);
    stop = true;
    await producing.catch((err: unknown) => {
      throw err;
    });
    await waitFor('every message delivered', () => {
      const c = counts(received);
      return sent.every((v) => c.has(v));
    }, 30_000);

    // e1's re-claim on its new session, and the last time it stopped fetching before that (a
    // stop on the lost connection may be followed by a resume while the session still lived).
    const e1Back = e1.rebalances().find((r) => r.t >= expiredAt - 50);
    expect(e1Back, 'e1 rebalanced on its new session').toBeDefined();
    const stopped = e1.logs.filter((l) => /fetching stopped/.test(l.msg) && l.t < e1Back!.t).at(-1);
    expect(stopped, 'e1 logged that it stopped fetching').toBeDefined();
    // e2 may have taken e1's partitions (if it saw e1 gone before e1 came back): only after e1 stopped.
    const takeover = e2.rebalances().find((r) => r.t >= stopped!.t - 1000 && r.owned.some((bp) => mine.includes(bp)));
    if (takeover) expect(stopped!.t).toBeLessThan(takeover.t);
    for (const bp of mine) {
      const e2First = received.find((r) => r.member === 'e2' && `${r.b}-${r.p}` === bp && r.t >= (takeover?.t ?? Infinity) - 1000);
      // e1 handed out nothing of bp between its stop and its own re-claim.
      const e1During = e1.received.filter((r) => `${r.b}-${r.p}` === bp && r.t > stopped!.t && r.t < e1Back!.t);
      expect(e1During, `messages of ${bp} e1 handed out after it stopped`).toEqual([]);
      if (e2First) expect(e2First.t).toBeGreaterThan(stopped!.t);
    }
    const c = counts(received);
    const dups = [...c.values()].filter((x) => x > 1).length;
    console.log(`consumer session expiry: e1 stopped ${stopped!.t - expiredAt} ms after the forced expiry, ${takeover ? `e2 took its partitions ${takeover.t - stopped!.t} ms after that` : 'e1 was back before e2 rebalanced'}; ${sent.length} messages, ${dups} delivered more than once`);
    expect(sent.filter((v) => !c.has(v))).toEqual([]);
    expect(e1.errors).toEqual([]);
    expect(e2.errors).toEqual([]);
    } finally {
      stop = true;
      await producing.catch(() => {});
    }
  });
});
