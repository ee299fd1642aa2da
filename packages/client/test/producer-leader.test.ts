/**
 * A producer over a broker list on a replicated topic (docs/replication.md §13.1, §13.2): it asks
 * TOPIC_METADATA where partitions are led, and when the broker it sent to answers
 * NotLeaderForPartition it asks again and sends every failed record, in order, to the new leader.
 * The first leader is a scripted broker that only says it does not lead; the second is a real one.
 */
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  decodeProduceAckRequest,
  encodeProduceAckResponse,
  encodeTopicMetadataResponse,
  ErrorCode,
  RequestType,
  type TopicMetadataResponse,
  Decoder,
} from '@klog/protocol';
import { LeaderRetriesExhaustedError, Producer } from '../src/index.js';
import { scriptedServer, startTestBroker, type TestBroker } from './helpers.js';
import { storedValues } from './leader-helpers.js';

let cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

/** A broker (id 1) that answers TOPIC_METADATA with `leaders()` and every PRODUCE_ACK with NotLeaderForPartition. */
async function notLeaderBroker(
  metadata: (selfPort: number) => TopicMetadataResponse,
): Promise<{ port: number; produces: () => number; metadataRequests: () => number }> {
  let produces = 0;
  let metadataRequests = 0;
  const s = await scriptedServer((socket: Socket, type, body, reply) => {
    if (type === RequestType.TopicMetadata) {
      metadataRequests++;
      socket.write(encodeTopicMetadataResponse(metadata(s.port)));
    } else if (type === RequestType.ProduceAck) {
      produces++;
      const req = decodeProduceAckRequest(new Decoder(body));
      const errorCode = ErrorCode.NotLeaderForPartition;
      const notLeader = req.partitions.map(({ topic, partition }) => ({ topic, partition, errorCode, offset: -1, nextOffset: -1 }));
      socket.write(encodeProduceAckResponse(notLeader));
    } else reply(ErrorCode.UnknownRequestType);
  });
  cleanups.push(() => new Promise<void>((resolve) => { for (const so of s.sockets) so.destroy(); s.server.close(() => resolve()); }));
  return { port: s.port, produces: () => produces, metadataRequests: () => metadataRequests };
}

function leaderAt(leader: number, selfPort: number, real: TestBroker): TopicMetadataResponse {
  return {
    errorCode: ErrorCode.None,
    brokers: [
      { brokerId: 1, host: '127.0.0.1', port: selfPort },
      { brokerId: 2, host: real.host, port: real.port },
    ],
    topics: [{ topic: 'events', errorCode: ErrorCode.None, partitions: [{ partition: 0, errorCode: ErrorCode.None, leader, leaderEpoch: leader, replicas: [1, 2], isr: [1, 2] }] }],
  };
}

describe('Producer on a replicated topic', () => {
  it('follows the leader after NotLeaderForPartition and keeps the order of the records', async () => {
    const real = await startTestBroker();
    cleanups.push(() => real.stop());
    let asked = 0;
    const first = await notLeaderBroker((self) => leaderAt(asked++ === 0 ? 1 : 2, self, real));
    const producer = new Producer({ brokerList: `127.0.0.1:${first.port}`, acks: 'all', lingerMs: 0 });
    cleanups.push(() => producer.close());
    const values = Array.from({ length: 20 }, (_x, i) => `m${i}`);
    const [a, b] = await Promise.all([
      producer.send('events', values.slice(0, 10).map((value) => ({ value }))),
      producer.send('events', values.slice(10).map((value) => ({ value }))),
    ]);
    expect([...a, ...b].every((m) => m.partition === 0 && typeof m.offset === 'number')).toBe(true);
    expect(first.produces()).toBeGreaterThanOrEqual(1);
    expect(producer.leaderRetries).toBeGreaterThanOrEqual(1);
    expect(await storedValues(real, 'events', 0)).toEqual(values);
  });

  it('gives up after maxRetries with the partition, the last leader and the code', async () => {
    const real = await startTestBroker();
    cleanups.push(() => real.stop());
    const only = await notLeaderBroker((self) => leaderAt(1, self, real));
    const producer = new Producer({ brokerList: `127.0.0.1:${only.port}`, acks: 'all', lingerMs: 0, maxRetries: 2 });
    cleanups.push(() => producer.close().catch(() => {}));
    const err = await producer.send('events', [{ value: 'x' }]).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LeaderRetriesExhaustedError);
    expect((err as Error).message).toMatch(/topic events partition 0: gave up after 2 retries .*last leader 1, last error NotLeaderForPartition/);
    expect(only.produces()).toBe(3);
  });

  it("sends acks 'all' to a paper topic as acks 2 (stored and flushed)", async () => {
    const real = await startTestBroker();
    cleanups.push(() => real.stop());
    const producer = new Producer({ brokerList: real.address, acks: 'all', lingerMs: 0 });
    cleanups.push(() => producer.close());
    const [m] = await producer.send('paper', [{ value: 'hello' }]);
    expect(m).toMatchObject({ topic: 'paper', partition: 0, offset: 0 });
    expect(await storedValues(real, 'paper', 0)).toEqual(['hello']);
  });
});
