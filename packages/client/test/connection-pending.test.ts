/** Connection's pending requests: one request-timeout timer per connection, timeouts deep in the queue and behind a long poll (docs/design.md §3). */
import type { Server } from 'node:net';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { encodeFrame } from '@klog/protocol';
import { waitFor } from '@klog/retry';
import { Connection, KlogConnectionError } from '../src/index.js';
import { scriptedServer } from './helpers.js';

let servers: Server[] = [];
afterEach(() => {
  for (const s of servers) s.close();
  servers = [];
});


const numbered = (i: number): Buffer => encodeFrame(9, (e) => e.writeInt32(i));

describe('Connection pending requests', () => {
  it('5,000 pipelined requests written and waiting arm one request-timeout timer, and a lost connection fails all of them', async () => {
    const n = 5000;
    let received = 0;
    const { server, port } = await scriptedServer(() => {
      received++; // never answered
    });
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port, requestTimeoutMs: 120_000 });
    const setTimeoutSpy = vi.spyOn(globalThis, 'setTimeout');
    const results = Array.from({ length: n }, (_, i) => c.request(numbered(i)).catch((e: unknown) => e));
    // The server reads a frame only once it was handed to the operating system, so by then its request's clock runs.
    await waitFor('every request at the server', () => received === n, 60_000, 10);
    expect(c.inFlight).toBe(n);
    // The connect timeout and the one request-timeout timer (the waitFor polls aside).
    const armed = setTimeoutSpy.mock.calls.filter(([, ms]) => ms === 120_000 || ms === 10_000).length;
    setTimeoutSpy.mockRestore();
    expect(armed).toBe(2);
    await c.close();
    const errors = await Promise.all(results);
    for (const e of errors) {
      expect(e).toBeInstanceOf(KlogConnectionError);
      expect((e as Error).message).toMatch(/connection closed by the client/);
    }
  }, 90_000);

  it('the 5,000th pending request still times out with its error once the 4,999 before it are answered in order', async () => {
    const n = 5000;
    let received = 0;
    const { server, port } = await scriptedServer((_s, _t, body, reply) => {
      if (++received < n) reply(0, body);
    });
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port, requestTimeoutMs: 5000 });
    const results = Array.from({ length: n }, (_, i) => c.request(numbered(i)).catch((e: unknown) => e));
    const settled = await Promise.all(results);
    const answered = settled.slice(0, n - 1).map((r) => {
      expect(r).not.toBeInstanceOf(Error);
      return (r as { body: { readInt32(): number } }).body.readInt32();
    });
    expect(answered).toEqual(Array.from({ length: n - 1 }, (_, i) => i));
    expect(settled[n - 1]).toBeInstanceOf(KlogConnectionError);
    expect((settled[n - 1] as Error).message).toMatch(/no response within 5000 ms; connection closed/);
    expect(c.inFlight).toBe(0);
    await c.close();
  }, 90_000);

  it('a request behind a long poll times out at its own deadline, not the long poll’s, and fails both', async () => {
    const { server, port } = await scriptedServer(() => {
      // never answered
    });
    servers.push(server);
    const c = new Connection({ host: '127.0.0.1', port, requestTimeoutMs: 300 });
    const started = Date.now();
    const longPoll = c.request(numbered(0), 600_000).catch((e: unknown) => e);
    const short = c.request(numbered(1)).catch((e: unknown) => e);
    const [a, b] = await Promise.all([longPoll, short]);
    // Well before the long poll's 600,300 ms deadline, even on a loaded machine.
    expect(Date.now() - started).toBeLessThan(60_000);
    for (const e of [a, b]) {
      expect(e).toBeInstanceOf(KlogConnectionError);
      expect((e as Error).message).toMatch(/no response within 300 ms; connection closed/);
    }
    await c.close();
  }, 90_000);
});
