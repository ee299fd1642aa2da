/**
 * ZooKeeper away (docs/architecture.md, "ZooKeeper"): a broker's registrations converge on
 * what it holds, however long ZooKeeper was gone, and after ZooKeeper lost its data the broker
 * opens a new session and registers again. The test runs its own ZooKeeper (scripts/zookeeper.sh
 * on a free port with its own data dir) so that it can stop, restart and wipe it; the broker
 * is a child process.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Producer } from '@klog/client';
import { BrokerProcess, ZkClient, killAll, sleep, waitFor } from './harness.js';

const zookeeperScript = join(import.meta.dirname, '../../../scripts/zookeeper.sh');

/** A ZooKeeper of this test only. */
class PrivateZooKeeper {
  readonly dir = mkdtempSync(join(tmpdir(), 'klog-zk-outage-'));
  port = 0;

  get connect(): string {
    return `127.0.0.1:${this.port}`;
  }

  private async run(command: 'start' | 'stop'): Promise<void> {
    await promisify(execFile)('bash', [zookeeperScript, command], {
      env: { ...process.env, KLOG_ZK_PORT: String(this.port), KLOG_ZK_DIR: this.dir },
    });
  }

  async start(): Promise<void> {
    if (this.port === 0) this.port = await freePort();
    await this.run('start');
  }

  async stop(): Promise<void> {
    await this.run('stop');
  }

  /** Stops it, throws its data away and starts it empty. */
  async restartEmpty(): Promise<void> {
    await this.stop();
    rmSync(join(this.dir, 'data'), { recursive: true, force: true });
    await this.start();
  }

  remove(): void {
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise((resolve) => server.close(resolve));
  return port;
}

/** Whether `path` exists, asked of a short session of its own (ZooKeeper may have been replaced meanwhile). */
async function existsNow(connect: string, path: string): Promise<boolean> {
  let zk: ZkClient | undefined;
  try {
    zk = await ZkClient.connect(connect, { connectTimeoutMs: 3000 });
    return (await zk.exists(path)) !== undefined;
  } catch {
    return false;
  } finally {
    await zk?.close();
  }
}

describe('ZooKeeper outage', () => {
  const zookeeper = new PrivateZooKeeper();
  const logDir = mkdtempSync(join(tmpdir(), 'klog-zk-outage-log-'));
  let broker: BrokerProcess;
  let chrooted: string;

  beforeAll(async () => {
    await zookeeper.start();
    chrooted = `${zookeeper.connect}/klog`;
    broker = await new BrokerProcess(0, chrooted, logDir, ['--zk-session-timeout-ms', '4000', '--num-partitions', '2', '--flush-messages', '1']).start();
  });

  afterAll(async () => {
    await killAll();
    await zookeeper.stop().catch(() => {});
    zookeeper.remove();
    rmSync(logDir, { recursive: true, force: true });
  });

  it('registers a topic created while ZooKeeper was away for longer than 30 s, and everything again after ZooKeeper lost its data', async () => {
    await waitFor('broker 0 registered', () => existsNow(chrooted, '/brokers/ids/0'), 20_000);
    const producer = new Producer({ brokerList: `127.0.0.1:${broker.port}`, acks: 1 });
    try {
      await producer.send('before', [{ value: 'x' }]);
      await waitFor('topic "before" registered', () => existsNow(chrooted, '/brokers/topics/before/0'), 20_000);

      await zookeeper.stop();
      await producer.send('born-offline', [{ value: 'y' }]); // the broker creates the topic now
      await sleep(35_000); // longer than the ZooKeeper client's operation timeout
      await zookeeper.start();
      await waitFor('topic "born-offline" registered once ZooKeeper is back', () => existsNow(chrooted, '/brokers/topics/born-offline/0'), 30_000);

      await zookeeper.restartEmpty();
      // One observer session without chroot: it writes nothing but its own session, so the
      // empty server stays behind what the broker had seen (and keeps refusing its session).
      const observer = await ZkClient.connect(zookeeper.connect, { connectTimeoutMs: 10_000 });
      try {
        expect(await observer.exists('/klog/brokers/ids/0')).toBeUndefined();
        const registered = async (path: string): Promise<boolean> => (await observer.exists(`/klog${path}`)) !== undefined;
        await waitFor(
          'broker 0 and its topics registered again in the empty ZooKeeper',
          async () => (await registered('/brokers/ids/0')) && (await registered('/brokers/topics/before/0')) && (await registered('/brokers/topics/born-offline/0')),
          40_000,
        );
      } finally {
        await observer.close();
      }
      const log = broker.lines.join('\n');
      expect(log).toContain('giving the session up and opening a new one');
    } finally {
      await producer.close();
    }
  }, 200_000);
});
