/**
 * The mirror maker (the paper's deployment, SPEC §6): one {@link SourceMirror} per source
 * cluster, all producing through the same ZooKeeper producers (one for plain messages, one for
 * messages with metadata, see `TargetSender`) into the target cluster, which picks a
 * keyed message's partition with the same key function as the source's producers (so per-key
 * order survives mirroring) and an unkeyed message's at random. With the audit on, the copies
 * are counted per window of creation time and the counts published to the target's audit topic
 * (tier `mirror`, docs/audit.md).
 */
import { AuditCounter, ZkProducer } from '@klog/client';
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import type { MirrorConfig } from './config.js';
import { mirrorMetrics, serveMirrorMetrics } from './metrics.js';
import { SourceMirror } from './source-mirror.js';

/** How often a running mirror checks that no source shares brokers with the target, in ms. */
export const selfCheckIntervalMs = 2000;

/** Mirrors every source cluster into the target cluster; see the file comment. */
export class MirrorMaker {
  /** Writes plain messages, as they were in the source. */
  private readonly producer: ZkProducer;
  /** Writes messages with their metadata (key, creation time, host), as they were in the source. */
  private readonly stampedProducer: ZkProducer;
  /**
   * Publishes the audit counts, without linger: every commit waits for its counts to be
   * acknowledged, and a linger there would hold the commits back by one linger time each, so
   * that a crash copied again one linger batch rather than one commit interval.
   */
  private readonly auditProducer: ZkProducer | undefined;
  private readonly sources: SourceMirror[];
  /** Counts of the copies, published to the target's audit topic; undefined with `auditWindowMs` 0. */
  private readonly audit: AuditCounter | undefined;
  private closed = false;
  /** Checks, every {@link selfCheckIntervalMs}, that no source has become the target. */
  private selfCheck: NodeJS.Timeout | undefined;
  /** The metrics endpoint, when `metricsPort` is set. */
  private metricsServer: Server | undefined;
  /** The port the metrics endpoint listens on, once started with `metricsPort`. */
  metricsPort: number | undefined;
  /** Called once when the mirror stops on its own because of a fatal condition. */
  onFatal: (err: Error) => void = () => {};

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
    const auditProducer = config.auditWindowMs > 0 ? new ZkProducer({ ...options, lingerMs: 0 }) : undefined;
    this.auditProducer = auditProducer;
    this.audit =
      auditProducer !== undefined
        ? new AuditCounter({
            tier: 'mirror',
            windowMs: config.auditWindowMs,
            topic: config.auditTopic,
            send: (topic, records) => auditProducer.send(topic, records),
            onPublishError: (err) => logger.warn({ err }, 'publishing audit counts failed; retrying'),
          })
        : undefined;
    this.sources = config.sources.map((s) => new SourceMirror(s, config, producers, logger.child({ source: s }), this.audit));
    for (const s of this.sources) s.onFatal = (err) => void this.stopOnFatal(err);
  }

  /**
   * Starts every source. Refuses a source whose brokers are brokers of the target too (the same
   * cluster reached through another connect string): a cluster is never mirrored into itself.
   * The check is repeated every {@link selfCheckIntervalMs} while running, since brokers may
   * register after the start; then the mirror stops and `onFatal` is called. With `metricsPort`
   * it then serves its metrics (docs/metrics.md).
   * @throws Error naming the source and the shared brokers; the listen error of the metrics port
   */
  async start(): Promise<void> {
    this.audit?.start();
    for (const s of this.sources) await s.start();
    const shared = await this.sharedBrokers();
    if (shared !== undefined) {
      await this.close();
      throw shared;
    }
    this.selfCheck = setInterval(() => {
      void this.sharedBrokers().then(
        async (err) => {
          if (err !== undefined) await this.stopOnFatal(err);
        },
        (err: unknown) => this.logger.debug({ err }, 'broker overlap check failed; will retry'),
      );
    }, selfCheckIntervalMs);
    this.selfCheck.unref();
    if (this.config.metricsPort !== undefined) {
      const registry = mirrorMetrics(this.sources);
      ({ server: this.metricsServer, port: this.metricsPort } = await serveMirrorMetrics(registry, this.config.metricsHost, this.config.metricsPort));
    }
    const { sources, target, group, whitelist, blacklist } = this.config;
    const metrics = this.metricsPort !== undefined ? { metricsPort: this.metricsPort } : {};
    this.logger.info({ sources, target, group, whitelist, blacklist, ...metrics }, 'mirror maker started');
  }

  /** Stops the mirror because of `err` (once), then calls `onFatal`. */
  private async stopOnFatal(err: Error): Promise<void> {
    if (this.closed) return;
    this.logger.error({ err: err.message }, 'stopping');
    await this.close();
    this.onFatal(err);
  }

  /** The error naming a source that shares brokers with the target, or undefined when none does. */
  private async sharedBrokers(): Promise<Error | undefined> {
    const target = new Set((await this.producer.brokers()).map((b) => `${b.host}:${b.port}`));
    for (const s of this.sources) {
      const shared = (await s.brokerAddresses()).filter((a) => target.has(a));
      if (shared.length > 0) return new Error(`source ${s.source} shares brokers ${shared.join(', ')} with the target: a cluster is never mirrored into itself`);
    }
    return undefined;
  }

  /** Stops every source (each finishes and commits what the target acknowledged), publishes the last audit counts, then stops the producers. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.selfCheck);
    this.metricsServer?.closeAllConnections();
    this.metricsServer?.close();
    await Promise.all(this.sources.map((s) => s.close()));
    await this.audit?.close().catch((err: unknown) => this.logger.warn({ err }, 'publishing the last audit counts failed'));
    for (const p of [this.producer, this.stampedProducer, ...(this.auditProducer ? [this.auditProducer] : [])]) await p.close().catch((err: unknown) => this.logger.warn({ err }, 'producer close failed'));
    this.logger.info('mirror maker stopped');
  }
}
