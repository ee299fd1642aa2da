/** Connection against a scripted server: responses matched in order, timeouts, reconnects (docs/design.md §3). */
import type { Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { Decoder, encodeFrame, encodeMetadataRequest, iterateMessageSet, messageSizeInBytes, readPartitionMessages, singleSetMultiProduceRequestBytes, writeMultiProduceMessageRequest } from '@klog/protocol';
import { maxSlabFrameBytes } from '../src/connection.js';
import { Connection, KlogConnectionError } from '../src/index.js';
import { scriptedServer } from './helpers.js';

let servers: Server[] = [];
afterEach(() => {
  for (const s of servers) s.close();
  servers = [];
});

describe('Connection', () => {
  it('matches responses to requests in order, across frames split and joined by TCP', async () => {
    const { server, port } = await scriptedServer((socket, type, body) => {
      // Answer with the request's body, written one byte at a time.
      const frame = encodeFrame(0, (e) => e.writeBytes(body));
      for (const byte of frame) socket.write(Buffer.from([byte]));
    });
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port });
    const frames = Array.from({ length: 20 }, (_, i) => encodeFrame(9, (e) => e.writeInt32(i)));
    const responses = await Promise.all(frames.map((f) => c.request(f)));
    expect(responses.map((r) => r.body.readInt32())).toEqual(Array.from({ length: 20 }, (_, i) => i));
    await c.close();
  });

  it('a request with no answer times out, closes the connection, and the next use reconnects', async () => {
    let seen = 0;
    const { server, port, sockets } = await scriptedServer((_s, _t, _b, reply) => {
      if (++seen > 1) reply(0);
    });
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port, requestTimeoutMs: 200 });
    const err = await c.request(encodeMetadataRequest(['t'])).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(KlogConnectionError);
    expect((err as Error).message).toMatch(/no response within 200 ms/);
    const r = await c.request(encodeMetadataRequest(['t']));
    expect(r.errorCode).toBe(0);
    expect(sockets.length).toBe(2);
    await c.close();
  });

  it('fails waiting requests when the broker closes the connection, and reconnects', async () => {
    let first = true;
    const { server, port } = await scriptedServer((socket, _t, _b, reply) => {
      if (first) {
        first = false;
        socket.destroy();
      } else reply(3);
    });
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port });
    await expect(c.request(encodeMetadataRequest(['t']))).rejects.toThrow(/closed by the broker|connection failed/);
    expect((await c.request(encodeMetadataRequest(['t']))).errorCode).toBe(3);
    await c.close();
    await expect(c.request(encodeMetadataRequest(['t']))).rejects.toThrow(/closed/);
  });

  it('reports a refused connection as KlogConnectionError', async () => {
    const c = new Connection({ host: '127.0.0.1', port: 1 });
    await expect(c.request(encodeMetadataRequest(['t']))).rejects.toBeInstanceOf(KlogConnectionError);
    await expect(new Promise<void>((resolve, reject) => c.send(encodeMetadataRequest(['t']), (err) => (err ? reject(err) : resolve())))).rejects.toBeInstanceOf(KlogConnectionError);
    await c.close();
  });

  it('closes on a response frame larger than allowed', async () => {
    const { server, port } = await scriptedServer((_s, _t, _b, reply) => reply(0, Buffer.alloc(2000)));
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port, maxResponseBytes: 1000 });
    await expect(c.request(encodeMetadataRequest(['t']))).rejects.toThrow(/bad response frame/);
    await c.close();
  });

  it('frames reserved in the slab, over several slabs, leave in order with frames of their own, and a callback shared by many is called once per frame, in queue order', async () => {
    const frames: Buffer[] = [];
    const { server, port } = await scriptedServer((_s, type, body) => {
      if (type === 3) frames.push(Buffer.from(body));
    });
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port });
    expect(c.frameSlab.length).toBe(0); // no slab before the first reservation
    // A frame over what a slab shares gets a slab of its own.
    const big = c.reserveFrame(maxSlabFrameBytes + 1);
    expect(big).toBe(0);
    expect(c.frameSlab.length).toBe(maxSlabFrameBytes + 1);
    const calls: string[] = [];
    const expected: string[] = [];
    let sharedCalls = 0;
    const shared = (err?: Error): void => {
      if (err) throw err;
      calls.push('shared');
      sharedCalls++;
    };
    const all: number[] = [];
    // Payload sizes that fill slabs unevenly: some frames start a new slab, most share one.
    const sizes = [0, 10, 200_000, 3, 240_000, 70_000, 250_000, 1, 100_000, 255_000, 5];
    for (let i = 0; i < 60; i++) {
      const payload = Buffer.alloc(sizes[i % sizes.length]! + 4, i);
      payload.writeUInt32BE(i, 0);
      all.push(i);
      if (i % 7 === 3) {
        // A frame of its own with a callback of its own, between the shared ones.
        const size = messageSizeInBytes(payload.length);
        const frame = Buffer.allocUnsafe(singleSetMultiProduceRequestBytes('t', size));
        writeMultiProduceMessageRequest(frame, 0, 't', 0, payload, undefined, size);
        c.send(frame, (err) => {
          if (err) throw err;
          calls.push(`own ${i}`);
        });
        expected.push(`own ${i}`);
      } else {
        const size = messageSizeInBytes(payload.length);
        const bytes = singleSetMultiProduceRequestBytes('t', size);
        const at = c.reserveFrame(bytes);
        writeMultiProduceMessageRequest(c.frameSlab, at, 't', 0, payload, undefined, size);
        c.send(at, bytes, shared);
        expected.push('shared');
      }
    }
    const deadline = Date.now() + 5000;
    while ((calls.length < expected.length || frames.length < all.length) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    expect(calls).toEqual(expected);
    expect(sharedCalls).toBe(expected.filter((x) => x === 'shared').length);
    const got = frames.map((f) => {
      const d = new Decoder(f); // (the type is off already)
      expect(d.readInt16()).toBe(1); // one block
      const [m] = [...iterateMessageSet(readPartitionMessages(d).messages)];
      return m!.message.payload;
    });
    expect(got.map((p) => p.readUInt32BE(0))).toEqual(all);
    for (const [i, p] of got.entries()) expect(p.equals(Buffer.alloc(sizes[i % sizes.length]! + 4, i).fill(Buffer.from([0, 0, 0, i]), 0, 4))).toBe(true);
    await c.close();
  });

  it('a reserved frame sent on a closed connection calls back with KlogConnectionError', async () => {
    const c = new Connection({ host: '127.0.0.1', port: 1 });
    await c.close();
    const at = c.reserveFrame(100);
    const err = await new Promise<Error | undefined>((resolve) => c.send(at, 100, resolve));
    expect(err).toBeInstanceOf(KlogConnectionError);
  });
});
