/** The controller's request sender (docs/replication.md §5.3): in order per broker, retried, superseded by newer state. */
import { describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { RequestSender, type PartitionErrorsAnswer, type RequestTarget } from '../src/controller/request-sender.js';
import type { LeaderAndIsrBody, LeaderAndIsrPartition } from '../src/controller/requests.js';

const part = (partition: number, leaderEpoch: number): LeaderAndIsrPartition => ({
  topic: 'events',
  topicId: '5f0c3a9e12b7d604',
  partition,
  leader: 1,
  leaderEpoch,
  stateVersion: 1,
  minInsyncReplicas: 1,
  isNew: false,
  replicas: [1],
  isr: [1],
});
const body = (...partitions: LeaderAndIsrPartition[]): LeaderAndIsrBody => ({ controllerId: 1, controllerEpoch: 1, partitions, brokers: [] });
const ok = (b: LeaderAndIsrBody): PartitionErrorsAnswer => ({
  errorCode: 0,
  partitions: b.partitions.map((p) => ({ topic: p.topic, partition: p.partition, errorCode: 0 })),
});

class Target implements RequestTarget {
  sent: string[] = [];
  failures = 0;
  gate: Promise<void> = Promise.resolve();
  async leaderAndIsr(b: LeaderAndIsrBody): Promise<PartitionErrorsAnswer> {
    await this.gate;
    if (this.failures-- > 0) throw Object.assign(new Error('lost connection'), { retriable: true });
    this.sent.push(b.partitions.map((p) => `${p.partition}@${p.leaderEpoch}`).join(','));
    return ok(b);
  }
  async stopReplica(): Promise<PartitionErrorsAnswer> {
    return { errorCode: 0, partitions: [] };
  }
  close(): void {}
}

describe('RequestSender', () => {
  it('sends in order, retries a retriable failure, and a newer request for a partition replaces the queued one', async () => {
    const target = new Target();
    let open!: () => void;
    target.gate = new Promise((r) => (open = r));
    target.failures = 2;
    const sender = new RequestSender(() => target, pino({ level: 'silent' }));
    const first = sender.leaderAndIsr(1, body(part(0, 1)));
    const second = sender.leaderAndIsr(1, body(part(1, 1), part(2, 1)));
    const third = sender.leaderAndIsr(1, body(part(2, 2)));
    open();
    expect(await first).toMatchObject({ errorCode: 0 });
    expect(await second).toMatchObject({ partitions: [{ partition: 1 }] });
    expect(await third).toMatchObject({ partitions: [{ partition: 2 }] });
    expect(target.sent).toEqual(['0@1', '1@1', '2@2']);
    sender.close();
  });
  it('a broker removed drops its queued requests (they resolve undefined)', async () => {
    const target = new Target();
    target.gate = new Promise(() => {});
    const sender = new RequestSender(() => target, pino({ level: 'silent' }));
    const pending = sender.leaderAndIsr(1, body(part(0, 1)));
    sender.removeBroker(1);
    expect(await pending).toBeUndefined();
  });
});
