/**
 * The mirror maker (the paper's deployment, SPEC §6): one {@link SourceMirror} per source
 * cluster, all producing through the same ZooKeeper producers (one for plain messages, one for
 * messages with metadata, see {@link TargetSender}) into the target cluster, which picks a
 * keyed message's partition with the same key function as the source's producers (so per-key
 * order survives mirroring) and an unkeyed message's at random.
 */
import { ZkProducer } from '@klog/client';
import type { Logger } from 'pino';
import type { MirrorConfig } from './config.js';
import { SourceMirror } from './source-mirror.js';
import type { TargetSender } from './target-sender.js';

export class MirrorMaker {
  /** Writes plain messages, as they were in the source. */
  private readonly producer: ZkProducer;
  /** Writes messages with their metadata (key, creation time, host), as they were in the source. */
  private readonly stampedProducer: ZkProducer;
  private readonly sources: SourceMirror[];
  private closed = false;

  constructor(
    readonly config: MirrorConfig,
    private readonly logger: Logger,
  ) {
    const options = {
      zookeeper: config.target,
      acks: config.acks,
      batchSize: config.batchSize,
      lingerMs: config.lingerMs,
      zkSessionTimeoutMs: config.zkSessionTimeoutMs,
      requestTimeoutMs: 10_000,
      connectTimeoutMs: 5000,
      logger: logger.child({ role: 'target' }),
    };
    this.producer = new ZkProducer(options);
    this.stampedProducer = new ZkProducer({ ...options, stampMetadata: true });
    const producers = { plain: this.producer, stamped: this.stampedProducer };
    this.sources = config.sources.map((s) => new SourceMirror(s, config, producers, logger.child({ source: s })));
  }

  /**
   * Starts every source. Refuses a source whose brokers are brokers of the target too (the same
   * cluster reached through another connect string): a cluster is never mirrored into itself.
   * @throws Error naming the source and the shared brokers
   */
  async start(): Promise<void> {
    const target = new Set((await this.producer.brokers()).map((b) => `${b.host}:${b.port}`));
    for (const s of this.sources) {
      await s.start();
      const shared = (await s.brokerAddresses()).filter((a) => target.has(a));
      if (shared.length > 0) {
        await this.close();
        throw new Error(`source ${s.source} shares brokers ${shared.join(', ')} with the target: a cluster is never mirrored into itself`);
      }
    }
    this.logger.info({ sources: this.config.sources, target: this.config.target, group: this.config.group, whitelist: this.config.whitelist, blacklist: this.config.blacklist }, 'mirror maker started');
  }

  /** Stops every source (each finishes and commits what the target acknowledged), then the producer. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.all(this.sources.map((s) => s.close()));
    for (const p of [this.producer, this.stampedProducer]) await p.close().catch((err: unknown) => this.logger.warn({ err }, 'producer close failed'));
    this.logger.info('mirror maker stopped');
  }
}
