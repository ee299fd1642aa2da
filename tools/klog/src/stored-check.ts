/**
 * What the broker stored, for commands that send without acknowledgements (`klog produce --acks
 * 0`, `klog perf produce`): a fire-and-forget produce has no answer (docs/design.md §3), so a
 * message the broker rejected (too large, a bad partition) is lost without a word. The check reads
 * each partition's log end (OFFSETS latest) before the first send and again after the last one,
 * waiting for the log ends to stop growing (only flushed data is visible: docs/design.md §2), and
 * counts the messages in between, as bench/peers checks the bytes each system holds.
 *
 * The count assumes nothing else writes the partitions meanwhile; another producer's messages
 * would be counted as this command's.
 */
import { type BrokerAddress, parseBrokerAddress, Producer, SimpleConsumer, type ZkProducer } from '@klog/client';
import { messageSizeInBytes } from '@klog/protocol';

/** A partition to check: where it lives and how the user names it. */
export interface CheckedPartition {
  readonly broker: BrokerAddress;
  /** The partition's number on that broker (what OFFSETS and FETCH name). */
  readonly brokerPartition: number;
  /** How output names it (`0`, `1-0`, ...). */
  readonly name: string;
}

/** What the broker stored since {@link StoredCheck.start}. */
export interface Stored {
  /** Messages appended to the checked partitions, counted (or, with `messageBytes`, computed from the bytes). */
  readonly messages: number;
  /** Bytes the log ends moved by. */
  readonly bytes: number;
}

/** Options of {@link StoredCheck.stored}. */
export interface StoredOptions {
  /** Messages sent. */
  readonly sent: number;
  /**
   * Bytes the messages sent take in the log, when the caller knows (plain messages: payload
   * bytes + 10 each): polling stops once the log ends grew that much, and nothing is read when
   * they grew by exactly that.
   */
  readonly expectedBytes?: number;
  /** The size of every message sent when they all have one: the count is then the bytes ÷ this, and nothing is read. */
  readonly messageBytes?: number;
  /** The log ends count as settled after this many ms without growth. */
  readonly settleMs: number;
  /** Most ms to wait in all. */
  readonly timeoutMs: number;
}

/**
 * Polls at least this many ms apart while the log ends grow, and waits at least
 * {@link pollIdleShare} times as long as the last poll took: a poll asks every partition, so with
 * thousands of partitions it is thousands of requests, which must not crowd out the broker's
 * work being measured.
 */
const pollMs = 50;
/** Wait between polls, as a multiple of the last poll's duration (at least {@link pollMs}). */
const pollIdleShare = 4;

/** The log ends of a topic's partitions at the start, and what they grew by (see the file comment). */
export class StoredCheck {
  private readonly consumers = new Map<string, SimpleConsumer>();

  private constructor(
    private readonly topic: string,
    private readonly partitions: readonly CheckedPartition[],
    private readonly before: number[],
  ) {}

  /**
   * Reads the log end of every partition now.
   * @throws KlogConnectionError or KlogBrokerError when a broker cannot tell
   */
  static async start(topic: string, partitions: readonly CheckedPartition[]): Promise<StoredCheck> {
    const check = new StoredCheck(topic, partitions, []);
    check.before.push(...(await check.ends()));
    return check;
  }

  /** Bytes per plain message of `payloadBytes`: what a partition's log end moves by per message. */
  static plainMessageBytes(payloadBytes: number): number {
    return messageSizeInBytes(payloadBytes);
  }

  /**
   * Waits until the log ends grew by what was sent (when its size is known) or stop growing for
   * `settleMs`, then counts the messages they grew by.
   * @throws KlogConnectionError or KlogBrokerError when a broker cannot tell
   */
  async stored(options: StoredOptions): Promise<Stored> {
    const deadline = Date.now() + options.timeoutMs;
    const want = options.expectedBytes ?? (options.messageBytes === undefined ? undefined : options.messageBytes * options.sent);
    let polled = performance.now();
    let ends = await this.ends();
    let pollTook = performance.now() - polled;
    let grown = sum(ends) - sum(this.before);
    let lastChange = Date.now();
    while (Date.now() < deadline && (want === undefined || grown < want) && Date.now() - lastChange < options.settleMs) {
      await new Promise((resolve) => setTimeout(resolve, Math.max(pollMs, pollIdleShare * pollTook)));
      polled = performance.now();
      const next = await this.ends();
      pollTook = performance.now() - polled;
      const nextGrown = sum(next) - sum(this.before);
      if (nextGrown !== grown) lastChange = Date.now();
      ends = next;
      grown = nextGrown;
    }
    if (want !== undefined && grown === want) return { messages: options.sent, bytes: grown };
    if (options.messageBytes !== undefined) return { messages: Math.floor(grown / options.messageBytes), bytes: grown };
    let messages = 0;
    for (let i = 0; i < this.partitions.length; i++) messages += await this.count(this.partitions[i]!, this.before[i]!, ends[i]!);
    return { messages, bytes: grown };
  }

  /** Closes the connections. */
  async close(): Promise<void> {
    await Promise.all([...this.consumers.values()].map((c) => c.close().catch(() => {})));
  }

  private consumer(p: CheckedPartition): SimpleConsumer {
    const key = `${p.broker.host}:${p.broker.port}`;
    let c = this.consumers.get(key);
    if (!c) {
      c = new SimpleConsumer({ ...p.broker, connectTimeoutMs: 5000, requestTimeoutMs: 10_000 });
      this.consumers.set(key, c);
    }
    return c;
  }

  private async ends(): Promise<number[]> {
    return Promise.all(this.partitions.map((p) => this.consumer(p).latestOffset(this.topic, p.brokerPartition)));
  }

  /** Messages in `[from, to)` of a partition, compressed sets counted by their inner messages. */
  private async count(p: CheckedPartition, from: number, to: number): Promise<number> {
    if (to <= from) return 0;
    const stop = new AbortController();
    let n = 0;
    const batches = this.consumer(p).messageBatches({ topic: this.topic, partition: p.brokerPartition, offset: from, maxWaitMs: 0, signal: stop.signal });
    for await (const batch of batches) {
      for (const m of batch) {
        if (m.offset >= to) break;
        n++;
      }
      if (batch[batch.length - 1]!.nextOffset >= to) break;
    }
    stop.abort();
    return n;
  }
}

function sum(xs: readonly number[]): number {
  return xs.reduce((a, b) => a + b, 0);
}

/**
 * What the broker stored against what was sent: `undefined` when they match, else the error
 * the command fails with (non-zero exit).
 */
export function storedMismatch(sent: number, stored: Stored): string | undefined {
  if (stored.messages === sent) return undefined;
  const diff = sent - stored.messages;
  return diff > 0
    ? `the broker stored ${stored.messages} of the ${sent} messages sent: ${diff} LOST (rejected or dropped without acknowledgement; see the broker's log)`
    : `the broker stored ${stored.messages} messages, ${-diff} more than the ${sent} sent: another producer wrote to the topic meanwhile`;
}

/**
 * Starts a {@link StoredCheck} on every partition `producer` sends `topic` to: over its broker
 * list (Producer) or as ZooKeeper lists them (ZkProducer, live partitions only).
 * @throws what the producer's metadata calls throw, KlogConnectionError or KlogBrokerError from a broker
 */
export async function checkStoredBy(producer: Producer | ZkProducer, topic: string): Promise<StoredCheck> {
  if (producer instanceof Producer) {
    const partitions = await producer.partitionBrokers(topic);
    return StoredCheck.start(
      topic,
      partitions.map((p) => ({ broker: parseBrokerAddress(p.broker), brokerPartition: p.brokerPartition, name: String(p.partition) })),
    );
  }
  const partitions = (await producer.partitions(topic)).filter((p) => p.live);
  const brokers = new Map((await producer.brokers()).map((b) => [b.id, b]));
  const located: CheckedPartition[] = [];
  for (const p of partitions) {
    const b = brokers.get(p.brokerId);
    if (b) located.push({ broker: { host: b.host, port: b.port }, brokerPartition: p.partition, name: `${p.brokerId}-${p.partition}` });
  }
  return StoredCheck.start(topic, located);
}
