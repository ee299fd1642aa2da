/** Connection against a scripted server: responses matched in order, timeouts, reconnects (SPEC §3). */
import type { Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { encodeFrame, encodeMetadataRequest } from '@klog/protocol';
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
    await expect(c.send(encodeMetadataRequest(['t']))).rejects.toBeInstanceOf(KlogConnectionError);
    await c.close();
  });

  it('closes on a response frame larger than allowed', async () => {
    const { server, port } = await scriptedServer((_s, _t, _b, reply) => reply(0, Buffer.alloc(2000)));
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port, maxResponseBytes: 1000 });
    await expect(c.request(encodeMetadataRequest(['t']))).rejects.toThrow(/bad response frame/);
    await c.close();
  });
});
