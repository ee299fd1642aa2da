/**
 * The paper's basic path through a real broker: 100,000 messages of 200 bytes produced in
 * batches of 50 and consumed back, all present, in order, byte-identical, offsets as docs/design.md §1.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Producer, type ProducerRecord, SimpleConsumer } from '../src/index.js';
import { startTestBroker, type TestBroker } from './helpers.js';

const count = 100_000;
const size = 200;

/** Payload i: its index in the first 4 bytes, then a pattern that depends on i. */
function payload(i: number): Buffer {
  const b = Buffer.alloc(size, (i * 31) & 0xff);
  b.writeUInt32BE(i, 0);
  return b;
}

describe('100,000 messages of 200 bytes in batches of 50', () => {
  let broker: TestBroker;
  beforeAll(async () => {
    broker = await startTestBroker();
  });
  afterAll(async () => broker.stop());

  it('come back all present, in order, byte-identical, each nextOffset = offset + 4 + length', async () => {
    const producer = new Producer({ brokerList: broker.address, batchSize: 50 });
    for (let i = 0; i < count; i += 5000) {
      const records: ProducerRecord[] = [];
      for (let j = i; j < i + 5000; j++) records.push({ value: payload(j) });
      await producer.send('paper', records);
    }
    await producer.close();

    const consumer = new SimpleConsumer({ host: broker.host, port: broker.port });
    let i = 0;
    let expectedOffset = 0;
    for await (const m of consumer.messages({ topic: 'paper', partition: 0, offset: 0, fetchBytes: 300 * 1024, maxWaitMs: 500 })) {
      // (plain checks: an expect() per message would dominate the run time)
      if (m.offset !== expectedOffset) expect.fail(`message ${i} at offset ${m.offset}, expected ${expectedOffset}`);
      // length = magic + attributes + crc + payload = 6 + 200
      if (m.nextOffset !== m.offset + 4 + 6 + size) expect.fail(`message ${i}: nextOffset ${m.nextOffset} is not offset + 4 + length`);
      if (!m.payload.equals(payload(i))) expect.fail(`message ${i} at offset ${m.offset} differs`);
      expectedOffset = m.nextOffset;
      if (++i === count) break;
    }
    expect(i).toBe(count);
    expect(await consumer.latestOffset('paper', 0)).toBe(count * (10 + size));
    // Nothing beyond the last message.
    const tail = await consumer.fetch({ topic: 'paper', partition: 0, offset: expectedOffset, maxBytes: 1024 });
    expect(tail.messages).toEqual([]);
    expect(tail.nextOffset).toBe(expectedOffset);
    await consumer.close();
  }, 60_000);
});
