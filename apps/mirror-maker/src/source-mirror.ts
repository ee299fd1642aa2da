/**
 * The mirror of one source cluster: a group consumer over the selected topics of the source,
 * whose messages are sent to the target and whose offsets are committed only up to what the
 * target acknowledged.
 *
 * Topics: `/brokers/topics` of the source is watched; the selected topics (whitelist or
 * blacklist) are created in the target as they appear, and since a group consumer subscribes
 * once, a change of the selection closes the consumer (finishing and committing what it holds,
 * see below) and starts a new one in the same group over the new selection. Its first
 * rebalance claims the partitions again and starts from the committed offsets.
 *
 * Guarantee (at-least-once): a committed source offset never passes a message the target has
 * not acknowledged (see {@link PartitionProgress}). Acknowledged positions are committed every
 * `commitIntervalMs`. Before a partition is released (a rebalance, a new selection, shutdown)
 * the consumer stops fetching and the mirror waits up to `releaseFlushTimeoutMs`
 * (`shutdownTimeoutMs` on close) for the partition's messages in flight to be acknowledged,
 * then commits the acknowledged position, so that a rebalance copies nothing twice unless the
 * target stayed silent for that long. Duplicates otherwise come only from a crash: the messages
 * acknowledged after the last commit (at most one commit interval of them, plus the messages
 * in flight) are copied again by the next owner.
 *
 * Audit (docs/audit.md): each message the target acknowledged is counted by its creation time
 * (messages without one are not counted), and the counts are published to the target's audit
 * topic before every commit and release, so a committed offset never passes a copy that was not
 * counted. A copy counted but not committed is copied and counted again after a crash, as it
 * is stored twice in the target: the audit reports it as over, not as loss.
 *
 * Gaps: when retention on the source deleted messages the mirror had not copied, the fetch
 * meets OffsetOutOfRange; the range lost is logged as an error, in bytes and, estimated from the
 * mean size of the messages kept right after it (the lost ones are gone), in messages. With `onGap` `continue` the copy
 * goes on from the earliest offset still kept; with `fail` nothing of that partition past the
 * gap is copied or committed and {@link SourceMirror.onFatal} is called.
 */
import { type AuditCounter, GroupConsumer, SimpleConsumer, type GroupMessage, type MessageStream, type OffsetResetEvent, type OwnedPartition, type ZkProducer, type ZkProducerRecord } from '@klog/client';
import { BrokerRegistry, ZkClient, type ZkWatch } from '@klog/zk-registry';
import type { Logger } from 'pino';
import { topicFilter, type MirrorConfig } from './config.js';
import { PartitionProgress, partitionKey } from './progress.js';
import { TargetSender } from './target-sender.js';

/**
 * A message as consumed, with the metadata a producer may have put in it (key, creation time,
 * producing host); absent fields were not in the message.
 */
export type SourceMessage = Pick<GroupMessage, 'topic' | 'brokerId' | 'partition' | 'offset' | 'nextOffset' | 'payload' | 'key' | 'timestamp' | 'host'>;

/** True when the message carried metadata in the source. */
export function hasMetadata(m: SourceMessage): boolean {
  return m.key !== undefined || m.timestamp !== undefined || m.host !== undefined;
}

/** The record that copies `m` to the target: same value, key, timestamp and host. */
export function targetRecord(m: SourceMessage): ZkProducerRecord {
  return {
    value: m.payload,
    ...(m.key !== undefined && { key: m.key }),
    ...(m.timestamp !== undefined && { timestamp: m.timestamp }),
    ...(m.host !== undefined && { host: m.host }),
  };
}

/** What {@link SourceMirror.stats} gives. */
export interface MirrorStats {
  readonly copied: number;
  readonly dropped: number;
  readonly inFlight: number;
  readonly gaps: number;
  readonly gapBytes: number;
  readonly partitions: readonly PartitionStats[];
}

/** One source partition in a progress log line. */
export interface PartitionStats {
  topic: string;
  brokerId: number;
  partition: number;
  /** Offset after the last message taken from the source. */
  position: number | null;
  committed: number | null;
  logEnd: number | null;
  /** Bytes of the source partition not yet taken. */
  lag: number | null;
  inFlight: number;
}

export class SourceMirror {
  private readonly selects: (topic: string) => boolean;
  private readonly sender: TargetSender;
  private zk: ZkClient | undefined;
  private registry: BrokerRegistry | undefined;
  private watch: ZkWatch | undefined;
  /** The consumer of the current selection, if any topic is selected. */
  private consumer: GroupConsumer | undefined;
  private workers: Promise<void>[] = [];
  /** Topics the current consumer subscribes to. */
  private subscribed: string[] = [];
  /** Topics selected now. */
  private wanted: string[] = [];
  private restartWanted = false;
  private restartLoop: Promise<void> | undefined;
  private readonly progress = new Map<string, PartitionProgress>();
  private commitTimer: NodeJS.Timeout | undefined;
  private statsTimer: NodeJS.Timeout | undefined;
  private committing = false;
  /** Set while a progress line is being gathered (its OFFSETS requests may outlast the interval). */
  private statsRunning = false;
  private closing = false;
  /** Source broker connections for lag (OFFSETS requests), by broker id. */
  private readonly offsetClients = new Map<number, { address: string; consumer: SimpleConsumer }>();
  private lastStats = { t: Date.now(), acked: 0 };
  /** Gaps reported since start. */
  gaps = 0;
  /** Bytes of source log lost in those gaps. */
  gapBytes = 0;
  /** The owned partitions as the last progress line found them (every `stats.interval.ms`). */
  private lastPartitions: readonly PartitionStats[] = [];
  /** Called once when a gap stops the mirror (`onGap` `fail`), with the error to report. */
  onFatal: (err: Error) => void = () => {};
  /** Partitions whose gap stopped the mirror: nothing of them past the gap is copied or committed. */
  private readonly gapped = new Set<string>();


  constructor(
    readonly source: string,
    private readonly config: MirrorConfig,
    private readonly producers: { readonly plain: ZkProducer; readonly stamped: ZkProducer },
    private readonly logger: Logger,
    /** Counts of the copies for the audit (tier `mirror`); undefined when the audit is off. */
    private readonly audit: AuditCounter | undefined,
  ) {
    this.selects = topicFilter(config);
    this.sender = new TargetSender(producers, {
      maxInFlightMessages: config.maxInFlightMessages,
      retryBackoffMs: config.retryBackoffMs,
      retryBackoffMaxMs: config.retryBackoffMaxMs,
      dropOneIn: config.dropOneIn,
      logger,
    });
  }

  /** Connects to the source, watches its topics and starts copying the selected ones. */
  async start(): Promise<void> {
    this.zk = await ZkClient.connect(this.source, { sessionTimeoutMs: this.config.zkSessionTimeoutMs, logger: this.logger });
    this.registry = new BrokerRegistry(this.zk);
    this.watch = this.registry.watchTopics((topics) => this.onTopics(topics));
    await this.watch.ready;
    this.commitTimer = setInterval(() => void this.commit(), this.config.commitIntervalMs);
    this.statsTimer = setInterval(() => void this.logStats(), this.config.statsIntervalMs);
  }

  /**
   * What the metrics serve: messages copied (acknowledged by the target), dropped by the
   * `dropOneIn` testing aid and in flight, gaps and their bytes, and the owned partitions as the
   * last progress line found them (lag in bytes, refreshed every `statsIntervalMs`).
   */
  stats(): MirrorStats {
    const { acked: copied, dropped, outstanding: inFlight } = this.sender;
    return { copied, dropped, inFlight, gaps: this.gaps, gapBytes: this.gapBytes, partitions: this.lastPartitions };
  }

  /** The `host:port` of the source's live brokers. */
  async brokerAddresses(): Promise<string[]> {
    return (await this.registry!.listBrokers()).map((b) => `${b.host}:${b.port}`);
  }

  /**
   * Stops: the consumer closes (waiting up to `shutdownTimeoutMs` for the messages in flight
   * and committing what was acknowledged), then the ZooKeeper session.
   */
  async close(): Promise<void> {
    if (this.closing) return;
    this.closing = true;
    this.watch?.close();
    clearInterval(this.commitTimer);
    clearInterval(this.statsTimer);
    await this.restartLoop;
    await this.stopConsumer();
    this.sender.close();
    for (const c of this.offsetClients.values()) await c.consumer.close().catch(() => {});
    await this.zk?.close();
    this.logger.info({ acked: this.sender.acked, dropped: this.sender.dropped, gaps: this.gaps }, 'source mirror closed');
  }

  private onTopics(topics: string[]): void {
    const selected = topics.filter((t) => this.selects(t)).sort();
    if (selected.join('\0') === this.wanted.join('\0')) return;
    const added = selected.filter((t) => !this.wanted.includes(t));
    this.wanted = selected;
    this.logger.info({ selected, added, skipped: topics.filter((t) => !this.selects(t)) }, 'source topics changed');
    this.requestRestart();
  }

  /** Asks for the consumer to be (re)created over the current selection; runs one at a time. */
  private requestRestart(): void {
    if (this.closing) return;
    this.restartWanted = true;
    this.restartLoop ??= this.runRestarts().finally(() => {
      this.restartLoop = undefined;
    });
  }

  private async runRestarts(): Promise<void> {
    while (this.restartWanted && !this.closing) {
      this.restartWanted = false;
      const topics = [...this.wanted];
      if (this.consumer && topics.join('\0') === this.subscribed.join('\0')) continue;
      await this.stopConsumer();
      if (topics.length === 0 || this.closing) continue;
      try {
        await this.startConsumer(topics);
      } catch (err) {
        this.logger.error({ err, topics, retryInMs: this.config.rebalanceBackoffMs }, 'could not start the source consumer; retrying');
        await new Promise((resolve) => setTimeout(resolve, Math.max(this.config.rebalanceBackoffMs, 200)));
        this.restartWanted = true;
      }
    }
  }

  private async startConsumer(topics: string[]): Promise<void> {
    for (const topic of topics.filter((t) => !this.subscribed.includes(t))) {
      // Create it in the target now, so that it exists even before its first message; a send creates it too.
      await this.producers.plain.partitions(topic).then(
        (ps) => this.logger.info({ topic, targetPartitions: ps.length }, 'topic ready in the target'),
        (err: unknown) => this.logger.warn({ topic, err }, 'could not create the topic in the target yet; the first send will'),
      );
    }
    const consumer = new GroupConsumer({
      zookeeper: this.source,
      groupId: this.config.group,
      autoCommit: false,
      autoOffsetReset: this.config.autoOffsetReset,
      zkSessionTimeoutMs: this.config.zkSessionTimeoutMs,
      rebalanceMaxRetries: this.config.rebalanceMaxRetries,
      rebalanceBackoffMs: this.config.rebalanceBackoffMs,
      logger: this.logger,
      onOffsetReset: (e) => this.onOffsetReset(e),
      beforeRelease: (partitions, why) => this.finishPartitions(partitions, why),
    });
    const map: Record<string, number> = {};
    for (const t of topics) map[t] = this.config.numStreams;
    const streams = await consumer.createMessageStreams(map);
    this.consumer = consumer;
    this.subscribed = topics;
    this.workers = Object.values(streams).flatMap((list) => list.map((s) => this.work(consumer, s)));
    this.logger.info({ topics, streamsPerTopic: this.config.numStreams, consumerId: consumer.consumerId }, 'mirroring');
  }

  /** Closes the current consumer (it finishes and commits through {@link finishPartitions}) and waits for its workers. */
  private async stopConsumer(): Promise<void> {
    const consumer = this.consumer;
    if (!consumer) return;
    this.consumer = undefined;
    this.subscribed = [];
    await consumer.close().catch((err: unknown) => this.logger.warn({ err }, 'closing the source consumer failed'));
    await Promise.all(this.workers);
    this.workers = [];
  }

  /** Copies the messages of one stream until the consumer closes. */
  private async work(consumer: GroupConsumer, stream: MessageStream): Promise<void> {
    try {
      for await (const message of stream) {
        const m: SourceMessage = message;
        const key = partitionKey(m);
        if (this.gapped.has(key)) continue;
        let p = this.progress.get(key);
        if (!p) {
          p = new PartitionProgress(m.topic, m.brokerId, m.partition);
          this.progress.set(key, p);
        }
        const entry = p.take(m.nextOffset);
        const progress = p;
        const onAck = (copied: boolean): void => {
          if (copied && m.timestamp !== undefined) this.audit?.count(m.topic, m.timestamp);
          progress.ack(entry);
        };
        await this.sender.submit({ topic: m.topic, record: targetRecord(m), stamped: hasMetadata(m), onAck });
      }
    } catch (err) {
      if (this.closing || consumer !== this.consumer) return;
      this.logger.error({ err }, 'source consumer failed; starting a new one');
      this.consumer = undefined;
      this.subscribed = [];
      void consumer.close().catch(() => {});
      this.requestRestart();
    }
  }

  /**
   * Before partitions are released: wait (bounded) until the target acknowledged their
   * messages in flight, forget them, and return the positions to commit.
   */
  private async finishPartitions(partitions: readonly OwnedPartition[], why: 'rebalance' | 'close'): Promise<Array<{ topic: string; brokerId: number; partition: number; nextOffset: number }>> {
    const timeoutMs = why === 'close' ? this.config.shutdownTimeoutMs : this.config.releaseFlushTimeoutMs;
    const tracked = partitions.map((p) => this.progress.get(partitionKey(p))).filter((p): p is PartitionProgress => p !== undefined);
    const started = Date.now();
    while (tracked.some((p) => p.pending > 0) && Date.now() - started < timeoutMs) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    const unacknowledged = tracked.reduce((n, p) => n + p.pending, 0);
    // The positions before the counts: an acknowledgement arriving while they are published is
    // counted in a later publish, so it must not be committed now.
    const positions = [];
    for (const p of tracked) {
      this.progress.delete(partitionKey(p));
      const pos = p.commitPosition();
      if (pos) positions.push(pos);
    }
    if (!(await this.publishAudit())) {
      this.logger.warn({ why, partitions: partitions.length }, 'releasing partitions without committing: the audit counts of their copies could not be published; they will be copied again');
      return [];
    }
    const offsets = positions.map((p) => ({ topic: p.topic, brokerId: p.brokerId, partition: p.partition, offset: p.nextOffset }));
    if (unacknowledged > 0) {
      this.logger.warn({ why, unacknowledged, waitedMs: Date.now() - started, offsets }, 'releasing partitions with messages the target has not acknowledged; they will be copied again');
    } else {
      this.logger.info({ why, partitions: partitions.length, waitedMs: Date.now() - started, offsets }, 'in-flight messages acknowledged before release; committing');
    }
    return positions;
  }

  /** Commits the acknowledged positions that moved. */
  private async commit(): Promise<void> {
    const consumer = this.consumer;
    if (!consumer || this.committing) return;
    // What is committed is fixed before the counts are published (see finishPartitions).
    const moved = [...this.progress.values()].flatMap((p) => {
      const position = p.commitPosition();
      return position ? [{ p, position }] : [];
    });
    if (moved.length === 0) return;
    const positions = moved.map((m) => m.position);
    this.committing = true;
    try {
      // Counts first: a committed offset never passes a copy whose count was not published.
      if (!(await this.publishAudit())) return;
      await consumer.commitOffsets(positions);
      // Only what was committed: acknowledgements that arrived meanwhile are for the next commit.
      for (const { p, position } of moved) p.committedOffset = Math.max(p.committedOffset ?? 0, position.nextOffset);
      this.logger.info({ offsets: positions.map((p) => ({ topic: p.topic, brokerId: p.brokerId, partition: p.partition, offset: p.nextOffset })) }, 'offsets committed');
    } catch (err) {
      this.logger.warn({ err }, 'commit failed; will retry');
    } finally {
      this.committing = false;
    }
  }

  /** Publishes the audit counts (if the audit is on); false, logged, when that failed. */
  private async publishAudit(): Promise<boolean> {
    try {
      await this.audit?.publish();
      return true;
    } catch (err) {
      this.logger.warn({ err }, 'publishing audit counts to the target failed; not committing until it succeeds');
      return false;
    }
  }

  private onOffsetReset(e: OffsetResetEvent): void {
    const where = partitionFields(e);
    if (e.earliest !== undefined && e.from < e.earliest) {
      this.gaps++;
      const to = e.to ?? e.earliest;
      this.gapBytes += to - e.from;
      const fail = this.config.onGap === 'fail';
      // Before anything else: nothing of this partition past the gap is copied (so nor committed).
      if (fail) this.gapped.add(partitionKey(e));
      void this.reportGap(e, to, fail);
    } else {
      this.logger.warn({ ...where, from: e.from, to: e.to, earliest: e.earliest, end: e.end }, 'source offset out of range (not below the earliest offset); continuing from the reset offset');
    }
  }

  /** Logs a gap (and with `fail` stops the mirror through {@link onFatal}). */
  private async reportGap(e: OffsetResetEvent, to: number, fail: boolean): Promise<void> {
    const where = partitionFields(e);
    const lostBytes = to - e.from;
    const meanBytes = await this.meanMessageBytes(e, to);
    const lostMessages = meanBytes === undefined ? undefined : Math.max(1, Math.round(lostBytes / meanBytes));
    const size = `${lostBytes} bytes, ${lostMessages === undefined ? 'messages unknown' : `about ${lostMessages} messages`}`;
    const what = `gap: source retention deleted ${e.topic} ${e.brokerId}-${e.partition} offsets [${e.from}, ${to}) (${size}) before they were mirrored`;
    this.logger.error(
      { ...where, lostFrom: e.from, lostTo: to, lost: `[${e.from}, ${to})`, lostBytes, lostMessages, earliest: e.earliest, end: e.end, onGap: this.config.onGap },
      fail ? `${what}; stopping (--on-gap fail), nothing past the gap committed` : `${what}; continuing from ${to}`,
    );
    if (fail) this.onFatal(new Error(`${what} (source ${this.source}); stopped by --on-gap fail, nothing past the gap committed`));
  }

  /**
   * The mean size of the messages the source keeps from `offset` on (one fetch of up to 64 KiB),
   * bytes; undefined when there are none or the broker does not answer.
   */
  private async meanMessageBytes(p: OwnedPartition, offset: number): Promise<number | undefined> {
    try {
      const client = await this.sourceClient(p.brokerId);
      const r = await client?.fetch({ topic: p.topic, partition: p.partition, offset, maxBytes: 64 * 1024 });
      if (!r || r.messages.length === 0) return undefined;
      return (r.messages.at(-1)!.nextOffset - r.messages[0]!.offset) / r.messages.length;
    } catch {
      return undefined;
    }
  }

  /** Logs the rate since the last line and the lag of every owned partition. */
  private async logStats(): Promise<void> {
    if (this.statsRunning) return;
    this.statsRunning = true;
    try {
      await this.gatherStats();
    } finally {
      this.statsRunning = false;
    }
  }

  private async gatherStats(): Promise<void> {
    const now = Date.now();
    const acked = this.sender.acked;
    const rate = ((acked - this.lastStats.acked) * 1000) / Math.max(1, now - this.lastStats.t);
    this.lastStats = { t: now, acked };
    const partitions: PartitionStats[] = [];
    for (const o of this.consumer?.ownedPartitions() ?? []) {
      const p = this.progress.get(partitionKey(o));
      const logEnd = await this.logEnd(o);
      const position = p?.takenOffset ?? p?.committedOffset;
      partitions.push({
        topic: o.topic,
        brokerId: o.brokerId,
        partition: o.partition,
        position: position ?? null,
        committed: p?.committedOffset ?? null,
        logEnd: logEnd ?? null,
        lag: logEnd !== undefined && position !== undefined ? Math.max(0, logEnd - position) : null,
        inFlight: p?.pending ?? 0,
      });
    }
    this.lastPartitions = partitions;
    const lag = partitions.reduce((n, p) => n + (p.lag ?? 0), 0);
    this.logger.info(
      { rate: Math.round(rate), acked, inFlight: this.sender.outstanding, retrying: this.sender.isRetrying, lagBytes: lag, partitions },
      'mirror progress',
    );
  }

  /** The source partition's log end (OFFSETS latest); undefined when its broker does not answer. */
  private async logEnd(o: OwnedPartition): Promise<number | undefined> {
    try {
      return await (await this.sourceClient(o.brokerId))?.latestOffset(o.topic, o.partition);
    } catch {
      return undefined;
    }
  }

  /** A connection to a source broker for OFFSETS and sample fetches; undefined when it is not registered. */
  private async sourceClient(brokerId: number): Promise<SimpleConsumer | undefined> {
    const broker = await this.registry!.getBroker(brokerId);
    if (!broker) return undefined;
    const address = `${broker.host}:${broker.port}`;
    let client = this.offsetClients.get(brokerId);
    if (client && client.address !== address) {
      await client.consumer.close().catch(() => {});
      client = undefined;
    }
    if (!client) {
      client = { address, consumer: new SimpleConsumer({ host: broker.host, port: broker.port, connectTimeoutMs: 2000, requestTimeoutMs: 2000 }) };
      this.offsetClients.set(brokerId, client);
    }
    return client.consumer;
  }
}

/** A source partition as log fields. */
interface PartitionFields {
  readonly topic: string;
  readonly brokerId: number;
  readonly partition: number;
}

/**
 * The log fields naming a source partition. The source itself is not among them: every line of a
 * {@link SourceMirror} comes from a child logger that already carries `source`.
 */
function partitionFields(p: PartitionFields): PartitionFields {
  return { topic: p.topic, brokerId: p.brokerId, partition: p.partition };
}
