/**
 * The fast paths: pipelined requests (order kept, one write per event-loop turn, bytes in flight
 * bounded) and the consumer's prefetch (bounded) and views (no copies).
 */
import { type Server, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Decoder, encodeFrame, iterateMessageSet, multiProduceRequestBytes, readPartitionMessages, writeMultiProduceRequest } from '@klog/protocol';
import { Connection, Producer, SimpleConsumer } from '../src/index.js';
import { ProducerPool, type PartitionTarget } from '../src/producer-pool.js';
import { scriptedServer, startTestBroker, type TestBroker } from './helpers.js';

/** A server that records each request frame (type, body), answers METADATA with one partition, and can stop reading. */
async function recordingServer(): Promise<{ server: Server; port: number; frames: { type: number; body: Buffer }[]; sockets: Socket[] }> {
  const frames: { type: number; body: Buffer }[] = [];
  const s = await scriptedServer((_socket, type, body, reply) => {
    frames.push({ type, body: Buffer.from(body) });
    if (type === 9) reply(0, body);
  });
  return { ...s, frames };
}

/** A MULTIPRODUCE frame of one message whose payload is the 4-byte number `n`, in a buffer from `c.allocFrame`. */
function numberedFrame(c: Connection, n: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(n);
  const blocks = [{ topic: 't', partition: 0, payloads: [payload] }];
  const setBytes: number[] = [];
  const frame = c.allocFrame(multiProduceRequestBytes(blocks, setBytes));
  writeMultiProduceRequest(frame, 0, blocks, setBytes);
  return frame;
}

/** The numbers carried by recorded MULTIPRODUCE frames, in the order received. */
function numbers(frames: readonly { type: number; body: Buffer }[]): number[] {
  const out: number[] = [];
  for (const f of frames.filter((x) => x.type === 3)) {
    const d = new Decoder(f.body);
    const count = d.readInt16();
    for (let i = 0; i < count; i++) for (const m of iterateMessageSet(readPartitionMessages(d).messages)) out.push(m.message.payload.readUInt32BE(0));
  }
  return out;
}

let servers: Server[] = [];
afterEach(() => {
  vi.restoreAllMocks();
  for (const s of servers) s.close();
  servers = [];
});

describe('pipelined requests', () => {
  it('frames queued in one turn leave in one write, in order, and each caller hears when its frame was written', async () => {
    const { server, port, frames } = await recordingServer();
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port });
    await c.request(encodeFrame(9, (e) => e.writeInt32(0))); // connected
    const writes = vi.spyOn(Socket.prototype, 'write');
    const written: number[] = [];
    const all = Array.from({ length: 200 }, (_, i) => new Promise<void>((resolve, reject) => c.sendFrame(numberedFrame(c, i), (err) => (err ? reject(err) : (written.push(i), resolve())))));
    expect(c.queuedBytes).toBeGreaterThan(0);
    await Promise.all(all);
    expect(writes).toHaveBeenCalledTimes(1);
    expect(written).toEqual(Array.from({ length: 200 }, (_, i) => i));
    await vi.waitFor(() => expect(numbers(frames)).toHaveLength(200));
    expect(numbers(frames)).toEqual(Array.from({ length: 200 }, (_, i) => i));
    await c.close();
  });

  it('requests with and without a response keep their call order, and responses find their requests', async () => {
    const { server, port, frames } = await recordingServer();
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port });
    const answers: Promise<number>[] = [];
    for (let i = 0; i < 50; i++) {
      if (i % 3 === 0) answers.push(c.request(encodeFrame(9, (e) => e.writeInt32(i))).then((r) => r.body.readInt32()));
      else void c.send(numberedFrame(c, i));
    }
    expect(await Promise.all(answers)).toEqual(Array.from({ length: 50 }, (_, i) => i).filter((i) => i % 3 === 0));
    await vi.waitFor(() => expect(frames).toHaveLength(50));
    const order = frames.map((f) => (f.type === 9 ? f.body.readInt32BE(0) : numbers([f])[0]));
    expect(order).toEqual(Array.from({ length: 50 }, (_, i) => i));
    await c.close();
  });

  it('the producer pool bounds the bytes batched or in flight while the broker does not read, then delivers all in order', async () => {
    const { server, port, frames, sockets } = await recordingServer();
    servers.push(server);
    const maxInFlightBytes = 64 * 1024;
    const pool = new ProducerPool({ batchSize: 10, lingerMs: 1, maxInFlightBytes });
    const target: PartitionTarget<{ topic: string; partition: number }> = { broker: pool.broker('127.0.0.1', port), brokerPartition: 0, meta: { topic: 't', partition: 0 } };
    await target.broker.connection.request(encodeFrame(9, (e) => e.writeInt32(0))); // connected
    for (const s of sockets) s.pause(); // the broker stops reading: the kernel buffers fill, then writes wait
    const total = 60_000; // ~12.6 MB of messages, more than loopback buffers hold
    const payloads = Array.from({ length: total }, (_, i) => {
      const b = Buffer.alloc(200);
      b.writeUInt32BE(i);
      return b;
    });
    let done = false;
    const sending = pool.send(Array<typeof target>(total).fill(target), payloads, Array<object>(total).fill({})).then(() => (done = true));
    let most = 0;
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setTimeout(r, 20));
      most = Math.max(most, (pool as unknown as { inFlightBytes: number }).inFlightBytes);
    }
    expect(done).toBe(false); // send() waits for room
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(maxInFlightBytes + 210); // at most one message past the bound
    for (const s of sockets) s.resume();
    await sending;
    await pool.flush();
    await vi.waitFor(() => expect(numbers(frames)).toHaveLength(total), { timeout: 10_000 });
    expect(numbers(frames)).toEqual(Array.from({ length: total }, (_, i) => i));
    await pool.close();
  });
});

describe('consumer fast path', () => {
  let broker: TestBroker;
  beforeAll(async () => {
    broker = await startTestBroker();
    const p = new Producer({ brokerList: broker.address, acks: 2, batchSize: 50 });
    await p.send(
      'prefetch',
      Array.from({ length: 400 }, (_, i) => ({ value: `message ${String(i).padStart(4, '0')}`, partition: 0 })),
    );
    await p.close();
  });
  afterAll(async () => {
    await broker.stop();
  });

  for (const prefetch of [0, 1, 3]) {
    it(`prefetch ${prefetch}: at most ${prefetch} fetches ahead of the batch being worked on, and every message in order`, async () => {
      const c = new SimpleConsumer({ host: broker.host, port: broker.port });
      const fetch = vi.spyOn(c, 'fetch');
      const got: string[] = [];
      let batches = 0;
      for await (const batch of c.messageBatches({ topic: 'prefetch', partition: 0, offset: 0, fetchBytes: 200, maxWaitMs: 50, prefetch })) {
        batches++;
        // A slow caller: the loop ahead has all the time it wants, and must stop at the bound.
        await new Promise((r) => setTimeout(r, batches === 1 ? 200 : 1));
        if (batches === 1) expect(fetch.mock.calls.length).toBe(1 + prefetch); // the log is far ahead: the loop went as far as allowed
        expect(fetch.mock.calls.length).toBeLessThanOrEqual(batches + prefetch);
        got.push(...batch.map((m) => m.payload.toString()));
        if (got.length === 400) break;
      }
      expect(got).toEqual(Array.from({ length: 400 }, (_, i) => `message ${String(i).padStart(4, '0')}`));
      await c.close();
    });
  }

  it('hands out payloads as views on the fetched buffer, not copies', async () => {
    const c = new SimpleConsumer({ host: broker.host, port: broker.port });
    const r = await c.fetch({ topic: 'prefetch', partition: 0, offset: 0, maxBytes: 4096 });
    expect(r.messages.length).toBeGreaterThan(10);
    const [first] = r.messages;
    for (const [i, m] of r.messages.entries()) {
      expect(m.payload.buffer).toBe(first!.payload.buffer); // one buffer under all of them
      expect(m.payload.byteOffset - first!.payload.byteOffset).toBe(m.offset - first!.offset); // at their place in the fetched set
      expect(m.payload.toString()).toBe(`message ${String(i).padStart(4, '0')}`);
    }
    await c.close();
  });
});
