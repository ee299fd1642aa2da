/** Hostile bytes: every decoder of the package gives a KafkaProtocolError, never another error. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  ApiKey,
  KafkaProtocolError,
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
  encodeKafkaMessageSet,
  encodeRequest,
} from '../src/index.js';

const decoders: [string, (r: KafkaReader) => unknown][] = [
  ['Produce', (r) => decodeProduceRequest(r)],
  ['Fetch v4', (r) => decodeFetchRequest(r, 4)],
  ['Fetch v0', (r) => decodeFetchRequest(r, 0)],
  ['ListOffsets v0', (r) => decodeListOffsetsRequest(r, 0)],
  ['ListOffsets v1', (r) => decodeListOffsetsRequest(r, 1)],
  ['Metadata v4', (r) => decodeMetadataRequest(r, 4)],
  ['OffsetCommit', (r) => decodeOffsetCommitRequest(r)],
  ['OffsetFetch', (r) => decodeOffsetFetchRequest(r)],
  ['FindCoordinator', (r) => decodeFindCoordinatorRequest(r)],
  ['JoinGroup', (r) => decodeJoinGroupRequest(r)],
  ['Heartbeat', (r) => decodeHeartbeatRequest(r)],
  ['LeaveGroup', (r) => decodeLeaveGroupRequest(r)],
  ['SyncGroup', (r) => decodeSyncGroupRequest(r)],
  ['CreateTopics', (r) => decodeCreateTopicsRequest(r)],
];

function onlyTyped(f: () => unknown): void {
  try {
    f();
  } catch (err) {
    if (!(err instanceof KafkaProtocolError)) throw err;
  }
}

describe('hostile request bytes', () => {
  for (const [name, decode] of decoders) {
    it(`${name}: random bytes give a KafkaProtocolError or a request`, () => {
      fc.assert(fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => onlyTyped(() => decode(new KafkaReader(Buffer.from(bytes))))), { numRuns: 500 });
    });
  }

  it('an array count of 2^31-1 is refused before anything is allocated', () => {
    const frame = encodeRequest({ apiKey: ApiKey.Metadata, apiVersion: 1, correlationId: 1, clientId: 'x' }, (w) => w.int32(0x7fffffff));
    const { body } = decodeRequestHeader(frame.subarray(4));
    expect(() => decodeMetadataRequest(body, 1)).toThrow(KafkaProtocolError);
  });

  it('mutated message sets give a KafkaProtocolError or messages', async () => {
    const set = encodeKafkaMessageSet([{ key: Buffer.from('k'), value: Buffer.from('value'), timestamp: 1 }], 1);
    await fc.assert(
      fc.asyncProperty(fc.nat(set.length - 1), fc.integer({ min: 0, max: 255 }), async (at, byte) => {
        const m = Buffer.from(set);
        m[at] = byte;
        try {
          await decodeKafkaMessageSet(m, { maxInnerBytes: 1 << 16 });
        } catch (err) {
          if (!(err instanceof KafkaProtocolError)) throw err;
        }
      }),
      { numRuns: 500 },
    );
  });
});
