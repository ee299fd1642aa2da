/**
 * The fast paths: pipelined requests (order kept, one write per event-loop turn, bytes in flight
 * bounded) and the consumer's prefetch (bounded) and views (no copies).
 */
import { once } from 'node:events';
import { createServer, type Server, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { Decoder, encodeFrame, iterateMessageSet, RequestType, multiProduceRequestBytes, readPartitionMessages, writeMultiProduceRequest } from '@klog/protocol';
import { Connection, KlogConnectionError, Producer, SimpleConsumer } from '../src/index.js';
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

/** A MULTIPRODUCE frame of one message whose payload is the 4-byte number `n`, in a slice of `c.frameSlab` from `c.reserveFrame`. */
function numberedFrame(c: Connection, n: number): Buffer {
  const payload = Buffer.alloc(4);
  payload.writeUInt32BE(n);
  const blocks = [{ topic: 't', partition: 0, payloads: [payload] }];
  const setBytes: number[] = [];
  const bytes = multiProduceRequestBytes(blocks, setBytes);
  const at = c.reserveFrame(bytes);
  writeMultiProduceRequest(c.frameSlab, at, blocks, setBytes);
  return c.frameSlab.subarray(at, at + bytes);
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
    const all = Array.from(
      { length: 200 },
      (_, i) => new Promise<void>((resolve, reject) => c.send(numberedFrame(c, i), (err) => (err ? reject(err) : (written.push(i), resolve())))),
    );
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
      else c.send(numberedFrame(c, i));
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

/** A server whose sockets do not read until `resume()` (also those accepted later), keeping every byte received. */
async function pausedServer(): Promise<{
  server: Server;
  port: number;
  sockets: Socket[];
  received: () => Buffer;
  receivedBytes: () => number;
  resume: () => void;
}> {
  const sockets: Socket[] = [];
  const chunks: Buffer[] = [];
  let receivedBytes = 0;
  let reading = false;
  const server = createServer({ pauseOnConnect: true }, (socket) => {
    sockets.push(socket);
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      receivedBytes += chunk.length;
    });
    if (reading) socket.resume();
    socket.on('error', () => {});
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  servers.push(server);
  return {
    server,
    port: typeof address === 'object' && address ? address.port : 0,
    sockets,
    received: () => Buffer.concat(chunks),
    receivedBytes: () => receivedBytes,
    resume: () => {
      reading = true;
      for (const s of sockets) s.resume();
    },
  };
}

/** The MULTIPRODUCE frames in `bytes`, each checked to carry one message set of one message: its topic, partition and message. */
function singleMessageFrames(bytes: Buffer): { topic: string; partition: number; payload: Buffer; attributes: number }[] {
  const out: { topic: string; partition: number; payload: Buffer; attributes: number }[] = [];
  let pos = 0;
  while (pos < bytes.length) {
    const size = bytes.readInt32BE(pos);
    const frame = bytes.subarray(pos + 4, pos + 4 + size);
    if (frame.length !== size) throw new Error(`a frame cut short at byte ${pos}`);
    pos += 4 + size;
    // (plain checks: an expect() per frame would dominate the run time)
    const d = new Decoder(frame);
    if (d.readInt16() !== RequestType.MultiProduce) expect.fail(`frame at byte ${pos - 4 - size} is not MULTIPRODUCE`);
    if (d.readInt16() !== 1) expect.fail(`frame at byte ${pos - 4 - size} has more than one block`);
    const block = readPartitionMessages(d);
    if (d.remaining !== 0) expect.fail(`frame at byte ${pos - 4 - size} has bytes after its block`);
    const messages = [...iterateMessageSet(block.messages)];
    // One message, and no bytes in the set after it.
    if (messages.length !== 1 || messages[0]!.nextOffset !== block.messages.length) expect.fail(`frame at byte ${pos - 4 - size} is not one message`);
    const { message } = messages[0]!;
    out.push({ topic: block.topic, partition: block.partition, payload: Buffer.from(message.payload), attributes: message.attributes });
  }
  return out;
}

/** Payload `i` of `length` bytes: a pattern that depends on i (and its index in the first 4 bytes when there is room). */
function patterned(i: number, length: number): Buffer {
  const b = Buffer.alloc(length);
  for (let k = 0; k < length; k++) b[k] = (i * 31 + k * 7) & 0xff;
  if (length >= 4) b.writeUInt32BE(i, 0);
  return b;
}

/** The pool's own counters (private: the bound is what these tests check). */
function counters(
  pool: ProducerPool,
  target: PartitionTarget<{ topic: string; partition: number }>,
): { inFlightBytes: number; requestsInFlight: number; brokerRequestsInFlight: number } {
  const p = pool as unknown as { inFlightBytes: number; requestsInFlight: number };
  const broker = target.broker as unknown as { requestsInFlight: number };
  return { inFlightBytes: p.inFlightBytes, requestsInFlight: p.requestsInFlight, brokerRequestsInFlight: broker.requestsInFlight };
}

/** Polls `f` every few ms until it is true, failing after `ms`. */
async function until(f: () => boolean, ms: number, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!f()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

describe('one message per request (batchSize 1, acks 0, no compression)', () => {
  const maxInFlightBytes = 64 * 1024;
  const sizes = [0, 1, 3, 4, 5, 17, 100, 255, 256, 1000, 1024, 2047, 4096, 3 * 1024 + 7];
  const big = 300 * 1024; // over the 256 KiB a slab frame may have: a buffer of its own

  function targetOf(pool: ProducerPool, port: number, topic = 't', partition = 0): PartitionTarget<{ topic: string; partition: number }> {
    return { broker: pool.broker('127.0.0.1', port), brokerPartition: partition, meta: { topic, partition } };
  }

  it('holds maxInFlightBytes while the broker does not read, then delivers every message in order, byte-exact, one per frame, and settles to 0', async () => {
    const srv = await pausedServer();
    const pool = new ProducerPool({ batchSize: 1, acks: 0, lingerMs: 0, maxInFlightBytes });
    const target = targetOf(pool, srv.port);
    const payloads: Buffer[] = [];
    let bytes = 0;
    for (let i = 0; bytes < 12 * 1024 * 1024; i++) {
      const length = i % 1500 === 700 ? big + (i % 3) : sizes[i % sizes.length]!;
      payloads.push(patterned(i, length));
      bytes += length;
    }
    const largest = Math.max(...payloads.map((p) => p.length)) + 10;
    let done = false;
    const sending = pool.send(Array<typeof target>(payloads.length).fill(target), payloads, Array<object>(payloads.length).fill({})).then(() => (done = true));
    let most = 0;
    const sample = (): void => {
      most = Math.max(most, counters(pool, target).inFlightBytes);
    };
    // Until the kernel buffers are full and send() waits for room, then a while longer.
    let stalledSince = 0;
    await until(
      () => {
        sample();
        const { inFlightBytes } = counters(pool, target);
        if (inFlightBytes < maxInFlightBytes) stalledSince = 0;
        else if (stalledSince === 0) stalledSince = Date.now();
        return stalledSince !== 0 && Date.now() - stalledSince > 100;
      },
      5000,
      'send() to wait for room',
    );
    expect(done).toBe(false);
    expect(most).toBeGreaterThanOrEqual(maxInFlightBytes);
    expect(most).toBeLessThanOrEqual(maxInFlightBytes + largest); // at most one message past the bound
    const timer = setInterval(sample, 1);
    srv.resume();
    await sending;
    await pool.flush();
    clearInterval(timer);
    expect(most).toBeLessThanOrEqual(maxInFlightBytes + largest);
    expect(counters(pool, target)).toEqual({ inFlightBytes: 0, requestsInFlight: 0, brokerRequestsInFlight: 0 });
    const expectedBytes = payloads.reduce((n, p) => n + 4 + 2 + 2 + 2 + 1 + 4 + 4 + 10 + p.length, 0);
    await until(() => srv.receivedBytes() >= expectedBytes, 5000, 'every byte at the server');
    const got = singleMessageFrames(srv.received());
    expect(got).toHaveLength(payloads.length);
    for (let i = 0; i < payloads.length; i++) {
      const g = got[i]!;
      if (g.topic !== 't' || g.partition !== 0 || g.attributes !== 0 || !g.payload.equals(payloads[i]!)) expect.fail(`message ${i} (${payloads[i]!.length} bytes) differs`);
    }
    await pool.close();
  });

  it('a connection the broker drops mid-stream fails flush() with KlogConnectionError, settles every counter to 0, and close() does not hang', async () => {
    const srv = await pausedServer();
    const warnings: { fields: Record<string, unknown>; msg?: string }[] = [];
    const logger = {
      warn: (fields: object, msg?: string) => void warnings.push({ fields: fields as Record<string, unknown>, msg }),
      debug: () => {},
      info: () => {},
      error: () => {},
    };
    const pool = new ProducerPool({ batchSize: 1, acks: 0, lingerMs: 0, maxInFlightBytes, logger });
    const target = targetOf(pool, srv.port);
    const payloads = Array.from({ length: 20_000 }, (_, i) => patterned(i, i % 997 === 500 ? big : sizes[i % sizes.length]!));
    const sending = pool.send(Array<typeof target>(payloads.length).fill(target), payloads, Array<object>(payloads.length).fill({})).catch((e: unknown) => e);
    await until(() => counters(pool, target).inFlightBytes >= maxInFlightBytes && srv.sockets.length > 0, 5000, 'the bound to be reached');
    // The broker goes away: this connection is dropped and no new one is accepted.
    srv.server.close();
    for (const s of srv.sockets) s.destroy();
    const sendResult = await sending;
    const flushed = await pool.flush().catch((e: unknown) => e);
    expect(sendResult instanceof KlogConnectionError || flushed instanceof KlogConnectionError).toBe(true);
    expect(counters(pool, target)).toEqual({ inFlightBytes: 0, requestsInFlight: 0, brokerRequestsInFlight: 0 });
    // The many requests the lost connection failed are logged as the first one and a count, not one line each.
    expect(warnings.filter((w) => w.msg === 'produce request failed')).toHaveLength(1);
    const more = warnings.filter((w) => w.msg === 'more produce requests failed after the first');
    expect(more).toHaveLength(1);
    expect(more[0]!.fields.requests).toBeGreaterThan(10);
    let closed = false;
    const closing = pool.close().catch(() => undefined).then(() => (closed = true));
    await until(() => closed, 2000, 'close()');
    await closing;
  });

  it('an unreachable broker fails flush() with KlogConnectionError, without hanging, every time', async () => {
    // A port nothing listens on: listened on, then closed.
    const probe = createServer().listen(0, '127.0.0.1');
    await once(probe, 'listening');
    const address = probe.address();
    const port = typeof address === 'object' && address ? address.port : 0;
    await new Promise<void>((r) => probe.close(() => r()));
    const pool = new ProducerPool({ batchSize: 1, acks: 0, lingerMs: 0, maxInFlightBytes, connectTimeoutMs: 2000 });
    const target = targetOf(pool, port);
    for (let round = 0; round < 2; round++) {
      const payloads = Array.from({ length: 50 }, (_, i) => patterned(i + round * 50, sizes[i % sizes.length]!));
      const sent = await pool
        .send(Array<typeof target>(payloads.length).fill(target), payloads, Array<object>(payloads.length).fill({}))
        .catch((e: unknown) => e);
      const flushed = await pool.flush().catch((e: unknown) => e);
      expect(sent instanceof KlogConnectionError || flushed instanceof KlogConnectionError).toBe(true);
      expect(counters(pool, target)).toEqual({ inFlightBytes: 0, requestsInFlight: 0, brokerRequestsInFlight: 0 });
    }
    await pool.close();
  });

  it('records to two partitions of one broker, interleaved, some sent while waiting for room: each partition in order, and all in call order', async () => {
    const srv = await pausedServer();
    const pool = new ProducerPool({ batchSize: 1, acks: 0, lingerMs: 0, maxInFlightBytes });
    const targets = [targetOf(pool, srv.port, 'mix', 0), targetOf(pool, srv.port, 'mix', 1)];
    // Runs of 1 to 4 records to the same partition, so consecutive frames name both the same and different partitions.
    const order: number[] = [];
    for (let i = 0; order.length < 30_000; i++) for (let k = 0; k <= i % 4; k++) order.push(i % 2);
    const payloads = order.map((_, i) => patterned(i, 64 + (i % 512)));
    const calls: Promise<unknown>[] = [];
    // Two send() calls at once, each waiting for room at its own pace: their records may interleave, each call's in its order.
    const half = order.length / 2;
   
    calls.push(pool.send(order.slice(0, half).map((p) => targets[p]!), payloads.slice(0, half), Array<object>(half).fill({})));
    await until(() => counters(pool, targets[0]!).inFlightBytes >= maxInFlightBytes && srv.sockets.length > 0, 5000, 'the bound to be reached');
    calls.push(pool.send(order.slice(half).map((p) => targets[p]!), payloads.slice(half), Array<object>(half).fill({})));
    srv.resume();
    await Promise.all(calls);
    await pool.flush();
    expect(counters(pool, targets[0]!)).toEqual({ inFlightBytes: 0, requestsInFlight: 0, brokerRequestsInFlight: 0 });
    const expectedBytes = payloads.reduce((n, p) => n + 4 + 2 + 2 + 2 + 3 + 4 + 4 + 10 + p.length, 0);
    await until(() => srv.receivedBytes() >= expectedBytes, 5000, 'every byte at the server');
    const got = singleMessageFrames(srv.received());
    expect(got).toHaveLength(payloads.length);
    // Each call's records keep their order, over both partitions and within each (call two may start before call one ends).
    const indexes = got.map((g) => g.payload.readUInt32BE(0));
    for (const [from, to] of [[0, half], [half, order.length]] as const) {
      expect(indexes.filter((i) => i >= from && i < to)).toEqual(Array.from({ length: to - from }, (_, k) => from + k));
      for (const partition of [0, 1]) {
        const sent = payloads.filter((_, i) => i >= from && i < to && order[i] === partition);
        const arrived = got.filter((g, k) => g.partition === partition && indexes[k]! >= from && indexes[k]! < to);
        expect(arrived.length).toBe(sent.length);
        for (let i = 0; i < sent.length; i++) if (!arrived[i]!.payload.equals(sent[i]!)) expect.fail(`partition ${partition}: message ${i} out of order or changed`);
      }
    }
    // Every frame names the partition its record was sent to.
    for (let k = 0; k < got.length; k++) if (got[k]!.partition !== order[indexes[k]!]) expect.fail(`frame ${k} names the wrong partition`);
    await pool.close();
  });
});
