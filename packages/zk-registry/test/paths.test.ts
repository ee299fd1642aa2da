import { describe, expect, it } from 'vitest';
import {
  allPartitions,
  brokerIdPath,
  brokerIdsPath,
  brokerTopicBrokerPath,
  brokerTopicPath,
  brokerTopicsPath,
  consumerIdPath,
  consumerIdsPath,
  consumerThreadIds,
  decodeBrokerInfo,
  decodeSubscription,
  encodeBrokerInfo,
  encodeSubscription,
  InvalidNameError,
  offsetPath,
  offsetsPath,
  ownerPath,
  ownersPath,
  parentPath,
  parseConnectString,
  parseOffset,
  parsePartitionName,
  partitionName,
  ZkError,
  controllerEpochPath,
  controllerPath,
  deleteTopicPath,
  deleteTopicsPath,
  parsePartitionNumber,
  partitionStatePath,
  preferredLeaderElectionPath,
  replicatedAuditRangePath,
  replicatedOffsetPath,
  replicatedOwnerPath,
  topicNames,
  topicPartitionPath,
  topicPartitionsPath,
} from '../src/index.js';

describe('replication paths (docs/replication.md §3)', () => {
  it('lays out the replicated topics, the controller and the admin requests', () => {
    expect(topicPartitionsPath('events')).toBe('/brokers/topics/events/partitions');
    expect(topicPartitionPath('events', 3)).toBe('/brokers/topics/events/partitions/3');
    expect(partitionStatePath('events', 3)).toBe('/brokers/topics/events/partitions/3/state');
    expect(controllerPath()).toBe('/controller');
    expect(controllerEpochPath()).toBe('/controller-epoch');
    expect(deleteTopicsPath()).toBe('/admin/delete-topics');
    expect(deleteTopicPath('events')).toBe('/admin/delete-topics/events');
    expect(preferredLeaderElectionPath()).toBe('/admin/preferred-leader-election');
    expect(replicatedOwnerPath('g', 'events', 0)).toBe('/consumers/g/owners/events/0');
    expect(replicatedOffsetPath('g', 'events', 0)).toBe('/consumers/g/offsets/events/0');
    expect(replicatedAuditRangePath('g', 'events', 0)).toBe('/consumers/g/audit/ranges/events/0');
    expect(() => partitionStatePath('events', -1)).toThrow(InvalidNameError);
    expect(() => deleteTopicPath('a/b')).toThrow(InvalidNameError);
  });

  it('reads partition numbers and topic names from child names', () => {
    expect(['0', '7', '2147483647', '2147483648', '07', '-1', 'x', '1-0', ''].map(parsePartitionNumber)).toEqual([0, 7, 2147483647, undefined, undefined, undefined, undefined, undefined, undefined]);
    const skipped: string[] = [];
    expect(topicNames(['events', 'a b', '..', 'x.y-z_1'], (c) => void skipped.push(c))).toEqual(['events', 'x.y-z_1']);
    expect(skipped).toEqual(['a b', '..']);
  });
});

describe('paths (docs/design.md §4)', () => {
  it('lays out the broker registry', () => {
    expect(brokerIdsPath()).toBe('/brokers/ids');
    expect(brokerIdPath(7)).toBe('/brokers/ids/7');
    expect(brokerTopicsPath()).toBe('/brokers/topics');
    expect(brokerTopicPath('clicks')).toBe('/brokers/topics/clicks');
    expect(brokerTopicBrokerPath('clicks', 3)).toBe('/brokers/topics/clicks/3');
  });

  it('lays out the consumer registries', () => {
    expect(consumerIdsPath('g1')).toBe('/consumers/g1/ids');
    expect(consumerIdPath('g1', 'g1_host-1-ab')).toBe('/consumers/g1/ids/g1_host-1-ab');
    expect(ownersPath('g1', 'clicks')).toBe('/consumers/g1/owners/clicks');
    expect(ownerPath('g1', 'clicks', 2, 5)).toBe('/consumers/g1/owners/clicks/2-5');
    expect(offsetsPath('g1', 'clicks')).toBe('/consumers/g1/offsets/clicks');
    expect(offsetPath('g1', 'clicks', 2, 5)).toBe('/consumers/g1/offsets/clicks/2-5');
  });

  it('rejects names that would break a path', () => {
    for (const bad of ['', '.', '..', 'a/b', 'a b', 'ü', 'x'.repeat(256)]) {
      expect(() => brokerTopicPath(bad), bad).toThrow(InvalidNameError);
    }
    expect(() => consumerIdsPath('a/b')).toThrow(InvalidNameError);
    expect(() => consumerIdPath('g', '..')).toThrow(InvalidNameError);
    expect(() => consumerIdPath('g', 'tab\there')).toThrow(InvalidNameError);
    expect(() => brokerIdPath(-1)).toThrow(InvalidNameError);
    expect(() => brokerIdPath(1.5)).toThrow(InvalidNameError);
    expect(() => ownerPath('g', 't', 1, -2)).toThrow(/partition/);
    expect(consumerIdsPath('group with spaces.and:colons')).toBe('/consumers/group with spaces.and:colons/ids');
  });

  it('names partitions <brokerId>-<partition> and parses them back', () => {
    expect(partitionName({ brokerId: 12, partition: 0 })).toBe('12-0');
    expect(parsePartitionName('12-0')).toEqual({ brokerId: 12, partition: 0 });
    for (const bad of ['12', '-1-2', '1-', 'a-1', '1-2-3', '1-99999999999']) expect(parsePartitionName(bad), bad).toBeUndefined();
  });

  it('expands partition counts into the sorted (broker, partition) list', () => {
    expect(allPartitions([{ brokerId: 2, partitions: 1 }, { brokerId: 0, partitions: 2 }])).toEqual([
      { brokerId: 0, partition: 0 },
      { brokerId: 0, partition: 1 },
      { brokerId: 2, partition: 0 },
    ]);
  });
});

describe('value encodings', () => {
  it('broker value is <creatorId>:<host>:<port>, IPv6 hosts included', () => {
    const value = encodeBrokerInfo({ creatorId: 'h1-1700000000000', host: 'broker-1.local', port: 9092 });
    expect(value).toBe('h1-1700000000000:broker-1.local:9092');
    expect(decodeBrokerInfo(1, value)).toEqual({ id: 1, creatorId: 'h1-1700000000000', host: 'broker-1.local', port: 9092 });
    expect(decodeBrokerInfo(1, 'c:::1:9092')).toMatchObject({ host: '::1', port: 9092 });
    for (const bad of ['', 'host:9092', 'c:h:0', 'c:h:70000', 'c:h:x', 'c::9092']) expect(decodeBrokerInfo(1, bad), bad).toBeUndefined();
  });

  it('subscription is JSON {topic: streams}', () => {
    expect(encodeSubscription({ b: 2, a: 1 })).toBe('{"a":1,"b":2}');
    expect(decodeSubscription('{"a":1,"b":2}')).toEqual({ a: 1, b: 2 });
    expect(() => encodeSubscription({ a: 0 })).toThrow(ZkError);
    expect(() => encodeSubscription({ 'a/b': 1 })).toThrow(InvalidNameError);
    for (const bad of ['', 'x', '[]', 'null', '{"a":0}', '{"a":"1"}', '{"a":1.5}']) expect(decodeSubscription(bad), bad).toBeUndefined();
    expect(consumerThreadIds('c1', 3)).toEqual(['c1-0', 'c1-1', 'c1-2']);
  });

  it('offsets are non-negative decimal integers', () => {
    expect(parseOffset('0')).toBe(0);
    expect(parseOffset('536870912')).toBe(536870912);
    expect(parseOffset(' 42\n')).toBe(42);
    for (const bad of ['', '-1', 'abc', '1.5', '1e3', '0x10', '99999999999999999']) expect(parseOffset(bad), bad).toBeUndefined();
  });

  it('parses connect strings with and without chroot', () => {
    expect(parseConnectString('127.0.0.1:2181')).toEqual({ servers: '127.0.0.1:2181', chroot: undefined });
    expect(parseConnectString('a:1,b:2/klog/prod/')).toEqual({ servers: 'a:1,b:2', chroot: '/klog/prod' });
    expect(parseConnectString('a:1/')).toEqual({ servers: 'a:1', chroot: undefined });
    expect(() => parseConnectString('')).toThrow(ZkError);
    expect(() => parseConnectString('a:1,,b:2')).toThrow(ZkError);
    expect(() => parseConnectString('a:1/x//y')).toThrow(ZkError);
    expect(parseConnectString('zk1,[::1]:2181/k')).toEqual({ servers: 'zk1,[::1]:2181', chroot: '/k' });
    for (const bad of ['127.0.0.1:99999', '127.0.0.1:0', '127.0.0.1:notaport/x', 'a b:1', 'a:1:2']) expect(() => parseConnectString(bad), bad).toThrow(ZkError);
    expect(parentPath('/a/b')).toBe('/a');
    expect(parentPath('/a')).toBe('/');
  });
});
