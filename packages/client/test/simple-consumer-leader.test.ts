/**
 * A simple consumer on a replicated topic (docs/replication.md §13.1, §13.2): its broker answers
 * NotLeaderForPartition, so it asks TOPIC_METADATA and reads from the leader, keeping its offset;
 * when the leader moves it follows. Broker 1 is scripted (it leads nothing, then leads for one
 * moment and loses its connection); brokers 2 and 3 are real, both holding the same messages.
 */
import type { Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeTopicMetadataResponse, ErrorCode, RequestType, type TopicMetadataResponse } from '@klog/protocol';
import { Producer, SimpleConsumer } from '../src/index.js';
import { scriptedServer, startTestBroker, type TestBroker } from './helpers.js';

let cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

function metadata(leader: number, brokers: Array<{ brokerId: number; host: string; port: number }>): TopicMetadataResponse {
  return {
    errorCode: ErrorCode.None,
    brokers,
    topics: [{ topic: 'events', errorCode: ErrorCode.None, partitions: [{ partition: 0, errorCode: ErrorCode.None, leader, leaderEpoch: leader, replicas: [2, 3, 1], isr: [2, 3, 1] }] }],
  };
}

async function filled(values: string[]): Promise<TestBroker> {
  const b = await startTestBroker();
  cleanups.push(() => b.stop());
  const p = new Producer({ brokerList: b.address, acks: 2 });
  await p.send('events', values.map((value) => ({ value, partition: 0 })));
  await p.close();
  return b;
}

describe('SimpleConsumer on a replicated topic', () => {
  it('reads from the leader its broker names, and follows the leader when it moves', async () => {
    const values = Array.from({ length: 10 }, (_x, i) => `m${i}`);
    // Two replicas with the same bytes (the logs of a replicated partition are byte-identical).
    const [two, three] = [await filled(values), await filled(values)];
    let leader = 2;
    const s = await scriptedServer((socket: Socket, type, _body, reply) => {
      if (type === RequestType.TopicMetadata) {
        socket.write(
          encodeTopicMetadataResponse(
            metadata(leader, [
              { brokerId: 1, host: '127.0.0.1', port: s.port },
              { brokerId: 2, host: two.host, port: two.port },
              { brokerId: 3, host: three.host, port: three.port },
            ]),
          ),
        );
      } else reply(ErrorCode.NotLeaderForPartition);
    });
    cleanups.push(() => new Promise<void>((resolve) => { for (const so of s.sockets) so.destroy(); s.server.close(() => resolve()); }));

    const c = new SimpleConsumer({ host: '127.0.0.1', port: s.port });
    cleanups.push(() => c.close());
    expect(await c.latestOffset('events', 0)).toBe(10 * 12);
    const first = await c.fetch({ topic: 'events', partition: 0, offset: 0, maxBytes: 5 * 12 });
    expect(first.messages.map((m) => m.payload.toString())).toEqual(values.slice(0, 5));
    // Broker 2 goes; the metadata now names 3, which holds the same bytes at the same offsets.
    leader = 3;
    await two.stop();
    const rest = await c.fetch({ topic: 'events', partition: 0, offset: first.nextOffset, maxBytes: 1024 });
    expect(rest.messages.map((m) => m.payload.toString())).toEqual(values.slice(5));
    expect(c.leaderRetries).toBeGreaterThanOrEqual(1);
  });

  it('a paper topic costs no metadata request', async () => {
    const b = await filled(['a']);
    const c = new SimpleConsumer({ host: b.host, port: b.port });
    cleanups.push(() => c.close());
    const r = await c.fetch({ topic: 'events', partition: 0, offset: 0, maxBytes: 1024 });
    expect(r.messages.map((m) => m.payload.toString())).toEqual(['a']);
    expect(c.leaderRetries).toBe(0);
  });
});
