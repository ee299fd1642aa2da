/**
 * Group commit through the broker (docs/design.md §10): with default settings a consumer's long
 * poll is answered the moment a flush moves the visible end, an acks-2 produce the same way,
 * and every message a consumer sees was fdatasynced before it was visible, for acks 0, 1 and 2.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { pino } from 'pino';
import { AckLevel, Decoder, ErrorCode, decodeProduceAckResponse, encodeFetchRequest, encodeMessageSet, encodeProduceAckRequest, encodeProduceRequest, iterateMessageSet } from '@klog/protocol';
import { flusherKind, visibleUnsyncedBytes } from '@klog/storage';
import { startBroker, type Broker } from '../src/index.js';
import { WireClient, removeDir, tempDir } from './helpers.js';

const silent = pino({ level: 'silent' });
const brokers: Broker[] = [];
const clients: WireClient[] = [];
const dirs: string[] = [];
afterEach(async () => {
  for (const c of clients.splice(0)) c.close();
  for (const b of brokers.splice(0)) await b.close();
  for (const d of dirs.splice(0)) removeDir(d);
});

const messagesPerRun = 40;

/** Produces `messagesPerRun` messages one at a time, ~5 ms apart, at `acks`; a long-polling consumer reads them. */
async function run(acks: 0 | 1 | 2): Promise<{ latenciesMs: number[]; violations: string[] }> {
  const logDir = tempDir();
  dirs.push(logDir);
  const broker = await startBroker({ logDir, port: 0 }, silent); // default settings: flush.policy=group
  brokers.push(broker);
  expect(broker.config.flushPolicy).toBe('group');
  const topic = `acks${acks}`;
  const log = await broker.logs.getOrCreateLog(topic, 0);
  const violations: string[] = [];
  /** Highest visible end seen checked: every byte below it was fdatasynced when it became visible. */
  let checkedEnd = 0;
  log.onFlush((end) => {
    const unsynced = visibleUnsyncedBytes(log);
    if (unsynced > 0) violations.push(`visible end ${end}: ${unsynced} bytes not fdatasynced`);
    else checkedEnd = end;
  });
  const producer = await WireClient.connect(broker.port);
  const consumer = await WireClient.connect(broker.port);
  clients.push(producer, consumer);
  const sentAt = new Map<number, number>();
  const latenciesMs: number[] = [];
  const consuming = (async () => {
    let offset = 0;
    while (latenciesMs.length < messagesPerRun) {
      const r = await consumer.request(encodeFetchRequest({ topic, partition: 0, offset, maxBytes: 1 << 20, maxWaitMs: 10_000 }));
      const now = performance.now();
      expect(r.code).toBe(ErrorCode.None);
      for (const m of iterateMessageSet(r.body, offset)) {
        if (m.nextOffset > checkedEnd) violations.push(`consumer saw [${m.offset}, ${m.nextOffset}) past the checked end ${checkedEnd}`);
        latenciesMs.push(now - sentAt.get(m.message.payload.readUInt32BE(0))!);
        offset = m.nextOffset;
      }
    }
  })();
  for (let i = 0; i < messagesPerRun; i++) {
    const payload = Buffer.alloc(200);
    payload.writeUInt32BE(i, 0);
    const set = encodeMessageSet([payload]);
    sentAt.set(i, performance.now());
    if (acks === 0) {
      producer.send(encodeProduceRequest({ topic, partition: 0, messages: set }));
    } else {
      const level = acks === 1 ? AckLevel.Appended : AckLevel.Flushed;
      const r = await producer.request(encodeProduceAckRequest({ acks: level, partitions: [{ topic, partition: 0, messages: set }] }));
      const [part] = decodeProduceAckResponse(new Decoder(r.body));
      expect(part!.errorCode).toBe(ErrorCode.None);
      if (acks === 2 && log.visibleEnd < part!.nextOffset) violations.push(`acks 2 answered before ${part!.nextOffset} was visible`);
    }
    await new Promise((r) => setTimeout(r, 5));
  }
  await consuming;
  return { latenciesMs, violations };
}

describe.skipIf(flusherKind !== 'native')('group commit through the broker', () => {
  for (const acks of [0, 1, 2] as const) {
    it(`acks ${acks}: every message a consumer sees was fdatasynced before it was visible, and is seen long before flush.ms`, async () => {
      const { latenciesMs, violations } = await run(acks);
      expect(violations).toEqual([]);
      expect(latenciesMs).toHaveLength(messagesPerRun);
      latenciesMs.sort((a, b) => a - b);
      // flush.ms is 1000 by default: the paper's policy would make the median wait ~500 ms.
      expect(latenciesMs[Math.floor(messagesPerRun / 2)]).toBeLessThan(250);
    });
  }
});
