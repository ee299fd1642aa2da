/**
 * The guard around node-zookeeper-client's frame parser (zk-client.ts, guardFrameParser): the
 * library keeps a cut frame's tail across reconnects and throws from its socket handler when a
 * frame does not parse. Both must end in a reconnect, never in an uncaught exception.
 */
import { describe, expect, it } from 'vitest';
import type { ZkClient } from '../src/index.js';
import { captureLogger, connectClient, freshChroot, waitFor } from './helpers.js';

interface Internals {
  session: { raw: { connectionManager: { pendingBuffer: Buffer | null; socket?: { destroy(): void }; onSocketData(b: Buffer): void } } };
}
const manager = (zk: ZkClient) => (zk as unknown as Internals).session.raw.connectionManager;

describe('ZooKeeper frame parser guard', () => {
  it('drops the tail of a frame cut by a lost connection instead of gluing it to the next connection', async () => {
    const zk = await connectClient(freshChroot());
    await zk.create('/before', 'v');
    const cm = manager(zk);
    cm.pendingBuffer = Buffer.from([0, 0, 0, 40, 0xde, 0xad, 0xbe, 0xef]); // the start of a 40-byte frame
    cm.socket?.destroy();
    await waitFor(() => zk.isConnected && cm.pendingBuffer === null, 10_000);
    await zk.create('/after', 'w');
    expect((await zk.getData('/after'))?.data.toString()).toBe('w');
  });

  it('turns a frame that does not parse into a reconnect', async () => {
    const logger = captureLogger();
    const zk = await connectClient(freshChroot(), { logger });
    const cm = manager(zk);
    // A watch notification (xid -1) whose event is cut after 2 bytes: the library's parser
    // reads past the frame and throws.
    const frame = Buffer.alloc(4 + 16 + 2);
    frame.writeInt32BE(18, 0);
    frame.writeInt32BE(-1, 4);
    frame.writeBigInt64BE(1n, 8);
    frame.writeInt32BE(0, 16);
    expect(() => cm.onSocketData(frame)).not.toThrow();
    expect(logger.messages('warn')).toContain('ZooKeeper sent a response that does not parse; reconnecting');
    await waitFor(() => zk.isConnected, 10_000);
    await zk.create('/still-works', 'x');
    expect((await zk.getData('/still-works'))?.data.toString()).toBe('x');
  });
});
