/**
 * Golden bytes from outside: every fixture was written by kcat (librdkafka 2.0.2) or kafkajs
 * 2.2.4, recorded as fixtures/README.md says. Each test decodes one with this package's codecs
 * and checks it against what the recorded command sent.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import {
  ApiKey,
  KafkaErrorCode,
  KafkaReader,
  decodeCreateTopicsRequest,
  decodeFetchRequest,
  decodeFindCoordinatorRequest,
  decodeHeartbeatRequest,
  decodeJoinGroupRequest,
  decodeKafkaMessageSet,
  decodeLeaveGroupRequest,
  decodeListOffsetsRequest,
  decodeMetadataRequest,
  decodeOffsetCommitRequest,
  decodeOffsetFetchRequest,
  decodeProduceRequest,
  decodeRequestHeader,
  decodeSyncGroupRequest,
  encodeApiVersionsResponse,
  isSupported,
  type RequestHeader,
} from '../src/index.js';

const dir = join(dirname(fileURLToPath(import.meta.url)), '..', 'fixtures');

/** A fixture's request: its header and a reader over the body. */
function load(name: string): { header: RequestHeader; body: KafkaReader } {
  const frame = Buffer.from(readFileSync(join(dir, name), 'utf8').replace(/\s/g, ''), 'hex');
  expect(frame.readInt32BE(0)).toBe(frame.length - 4);
  return decodeRequestHeader(frame.subarray(4));
}

const text = (b: Buffer | null) => (b === null ? null : b.toString());

describe('requests written by librdkafka (kcat)', () => {
  it('ApiVersions v3 is refused with UNSUPPORTED_VERSION in the v0 layout; the v0 retry is served', () => {
    const v3 = load('kcat-api-versions-v3.hex');
    expect(v3.header).toMatchObject({ apiKey: ApiKey.ApiVersions, apiVersion: 3, clientId: 'rdkafka' });
    const answer = encodeApiVersionsResponse(v3.header.correlationId, 3);
    const r = new KafkaReader(answer, 4);
    expect(r.int32()).toBe(v3.header.correlationId);
    expect(r.int16()).toBe(KafkaErrorCode.UnsupportedVersion);
    const apis = r.array((r) => [r.int16(), r.int16(), r.int16()]);
    expect(apis).toContainEqual([ApiKey.ApiVersions, 0, 2]);
    r.done('v0 layout: nothing after the array');
    const v0 = load('kcat-api-versions-v0.hex');
    expect([v0.header.apiVersion, v0.body.remaining]).toEqual([0, 0]);
  });

  it('Metadata v4', () => {
    const { header, body } = load('kcat-metadata-v4.hex');
    expect(header).toMatchObject({ apiKey: ApiKey.Metadata, apiVersion: 4 });
    expect(decodeMetadataRequest(body, 4)).toEqual({ topics: ['golden'], allowAutoTopicCreation: true });
  });

  it('Produce v2 with a magic-1 message set: keys, values, timestamps, CRCs', async () => {
    const { header, body } = load('kcat-produce-v2.hex');
    expect(header).toMatchObject({ apiKey: ApiKey.Produce, apiVersion: 2 });
    const req = decodeProduceRequest(body);
    expect(req.acks).toBe(-1);
    expect(req.topics.map((t) => [t.name, t.partitions.map((p) => p.partition)])).toEqual([['golden', [0]]]);
    const messages = await decodeKafkaMessageSet(req.topics[0]!.partitions[0]!.records, { maxInnerBytes: 1 << 20 });
    expect(messages.map((m) => [m.magic, m.offset, text(m.key), text(m.value)])).toEqual([
      [1, 0, 'k1', 'hello'],
      [1, 1, 'k2', 'world'],
    ]);
    for (const m of messages) expect(m.timestamp).toBeGreaterThan(1_600_000_000_000);
  });

  it('Produce v2 with a gzip wrapper of three magic-1 messages', async () => {
    const req = decodeProduceRequest(load('kcat-gzip-produce-v2.hex').body);
    const records = req.topics[0]!.partitions[0]!.records;
    expect(records[12 + 4 + 1]! & 0x07).toBe(1); // the wrapper's codec: gzip
    const messages = await decodeKafkaMessageSet(records, { maxInnerBytes: 1 << 20 });
    // librdkafka writes the wrapper at offset 0 and the inner messages at relative 0, 1, 2: the
    // last inner message is at the wrapper's offset.
    expect(records.readBigInt64BE(0)).toBe(0n);
    expect(messages.map((m) => [m.offset, text(m.key), text(m.value)])).toEqual([
      [-2, null, 'one'],
      [-1, null, 'two'],
      [0, null, 'three'],
    ]);
  });

  it('Produce v1 with a magic-0 message set: no timestamps', async () => {
    const { header, body } = load('kcat-magic0-produce-v1.hex');
    expect(header.apiVersion).toBe(1);
    const messages = await decodeKafkaMessageSet(decodeProduceRequest(body).topics[0]!.partitions[0]!.records, { maxInnerBytes: 1 << 20 });
    expect(messages.map((m) => [m.magic, text(m.key), text(m.value), m.timestamp])).toEqual([
      [0, 'a', 'zero', undefined],
      [0, 'b', 'one', undefined],
    ]);
  });

  it('Fetch v4 and ListOffsets v1 of kcat -C -o beginning', () => {
    const f = load('kcat-consume-fetch-v4.hex');
    const fetch = decodeFetchRequest(f.body, 4);
    expect(fetch).toMatchObject({ replicaId: -1, minBytes: 1 });
    expect(fetch.maxWaitMs).toBeGreaterThan(0);
    expect(fetch.topics.map((t) => [t.topic, t.partitions.map((p) => [p.partition, p.fetchOffset])])).toEqual([['golden', [[0, 0]]]]);
    const l = load('kcat-consume-list-offsets-v1.hex');
    expect(decodeListOffsetsRequest(l.body, 1).topics).toEqual([{ name: 'golden', partitions: [{ partition: 0, timestamp: -2, maxNumOffsets: 1 }] }]);
  });

  it('the group APIs of kcat -G', () => {
    expect(decodeFindCoordinatorRequest(load('kcat-group-find-coordinator-v0.hex').body)).toEqual({ groupId: 'golden-group' });
    const join = decodeJoinGroupRequest(load('kcat-group-join-group-v0.hex').body);
    expect(join).toMatchObject({ groupId: 'golden-group', sessionTimeoutMs: 6000, memberId: '', protocolType: 'consumer' });
    expect(join.protocols.map((p) => p.name)).toEqual(['range', 'roundrobin']);
    // ConsumerProtocolSubscription v1: version, [topics], user data, [owned partitions]
    const sub = new KafkaReader(join.protocols[0]!.metadata);
    expect([sub.int16(), sub.array((r) => r.string())]).toEqual([1, ['golden']]);
    const sync = decodeSyncGroupRequest(load('kcat-group-sync-group-v0.hex').body);
    expect(sync).toMatchObject({ groupId: 'golden-group', generationId: 1 });
    expect(sync.assignments.map((a) => a.memberId)).toEqual([sync.memberId]);
    const hb = decodeHeartbeatRequest(load('kcat-group-heartbeat-v0.hex').body);
    expect(hb).toEqual({ groupId: 'golden-group', generationId: 1, memberId: sync.memberId });
    const of = decodeOffsetFetchRequest(load('kcat-group-offset-fetch-v1.hex').body);
    expect(of).toEqual({ groupId: 'golden-group', topics: [{ name: 'golden', partitions: [0] }] });
    const oc = decodeOffsetCommitRequest(load('kcat-group-offset-commit-v2.hex').body);
    expect(oc).toMatchObject({ groupId: 'golden-group', generationId: 1, memberId: sync.memberId });
    expect(oc.topics[0]!.name).toBe('golden');
    expect(oc.topics[0]!.partitions[0]!.offset).toBeGreaterThan(0);
    expect(decodeLeaveGroupRequest(load('kcat-group-leave-group-v0.hex').body)).toEqual({ groupId: 'golden-group', memberId: sync.memberId });
  });
});

describe('requests written by kafkajs', () => {
  it('ApiVersions v2, Metadata v4, CreateTopics v0', () => {
    const av = load('kafkajs-api-versions-v2.hex');
    expect([av.header.apiVersion, av.header.clientId, av.body.remaining]).toEqual([2, 'golden', 0]);
    const md = load('kafkajs-metadata-v4.hex');
    expect(decodeMetadataRequest(md.body, 4)).toEqual({ topics: null, allowAutoTopicCreation: false });
    const ct = decodeCreateTopicsRequest(load('kafkajs-create-topics-v0.hex').body);
    expect(ct.topics).toEqual([{ name: 'golden-kafkajs', numPartitions: 2, replicationFactor: -1, assignments: 0, configs: [] }]);
  });

  it('Produce v2 with magic-1 gzip wrappers: keys, values and the timestamps it was given', async () => {
    const req = decodeProduceRequest(load('kafkajs-produce-v2.hex').body);
    const messages = [];
    for (const p of req.topics[0]!.partitions) messages.push(...(await decodeKafkaMessageSet(p.records, { maxInnerBytes: 1 << 20 })));
    expect(messages.map((m) => [text(m.key), text(m.value), m.timestamp]).sort((a, b) => String(a[1]).localeCompare(String(b[1])))).toEqual([
      ['k', 'gzipped one', 1_700_000_000_000],
      [null, 'gzipped two', 1_700_000_000_001],
    ]);
  });
});

it('every fixture is decoded by a test above, and every API in it is one klog serves', () => {
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.hex'))) {
    const { header } = load(name);
    expect(header.apiKey === ApiKey.ApiVersions || isSupported(header.apiKey, header.apiVersion), name).toBe(true);
  }
});
