/**
 * Read-ahead of Kafka fetches (docs/kafka-protocol.md, "Offsets"): a Kafka consumer has one fetch
 * in flight and asks for the next one where the last answer ended, so after answering a fetch of
 * a paper partition that left visible bytes unread, the broker reads and re-frames the next
 * answer (same offset, max bytes and magic) once the response is on its way, while the client is
 * still taking the last one in; the next fetch then finds it ready. An answer prepared is only
 * bytes of the log below its visible end then, which a paper partition never rewrites: it is
 * served when the fetch is the one it was prepared for (log, offset, max bytes, magic) and the
 * log still holds its offset (retention), and dropped when a fetch at its offset asks otherwise. Replicated partitions (whose logs a follower may cut) are
 * not read ahead, nor fetches of more than {@link readAheadMaxBytes}. At most {@link maxPrepared}
 * answers wait at once, each of at most a quarter over the fetch's max bytes plus 1 KiB.
 * Answers waiting here are not counted in the fetch memory (`kafka.fetch.memory.bytes`): they
 * are at most {@link maxPrepared} × 1.25 MiB for the whole listener, however many connections
 * there are, so a bound of their own; one taken by a fetch is counted from then on as that
 * fetch's answer (./fetch.ts). A fetch whose max bytes the budget cut asks for another size,
 * so it does not take one prepared for its full size.
 */
import type { KafkaFraming } from '@klog/kafka-protocol';
import type { Log } from '@klog/storage';

/** Most answers prepared at once; a newer one drops the oldest. */
export const maxPrepared = 8;
/**
 * Largest max bytes of a fetch whose next answer is read ahead (1 MiB, librdkafka's default
 * partition max bytes): the answers waiting hold at most {@link maxPrepared} × 1.25 MiB.
 */
export const readAheadMaxBytes = 1024 * 1024;

interface Prepared {
  readonly log: Log;
  readonly offset: number;
  readonly maxBytes: number;
  readonly magic: 0 | 1;
  /** The log's visible end when it was read. */
  readonly end: number;
  readonly framed: KafkaFraming;
}

/**
 * The answers prepared for next fetches, shared by the listener's connections: one per log and
 * offset, so consumers of one log at different offsets (two groups) each find theirs.
 */
export class ReadAhead {
  /** Oldest first; at most {@link maxPrepared}. */
  private readonly prepared: Prepared[] = [];

  /** Answers waiting (for tests). */
  get size(): number {
    return this.prepared.length;
  }

  /**
   * The answer prepared for a fetch of `log` at `offset` (a message boundary) of `maxBytes` in
   * `magic`, with the log's visible end now `end`, or undefined; one prepared at that offset for
   * another size or version is dropped.
   */
  take(log: Log, offset: number, maxBytes: number, magic: 0 | 1, end: number): KafkaFraming | undefined {
    const i = this.prepared.findIndex((p) => p.log === log && p.offset === offset);
    if (i < 0) return undefined;
    const p = this.prepared[i]!;
    this.prepared.splice(i, 1);
    if (p.maxBytes !== maxBytes || p.magic !== magic || p.end > end || offset < log.earliestOffset || log.closed) return undefined;
    return p.framed;
  }

  /**
   * Prepares, after the current turn of the event loop (the response written), the answer of a
   * fetch of `log` at `offset`: `read` reads and re-frames it (undefined when it cannot be done
   * at once, e.g. a compressed message; it may throw, which drops it). The oldest answer waiting
   * goes when {@link maxPrepared} do. A fetch of more than {@link readAheadMaxBytes} is not read ahead.
   */
  prepare(log: Log, offset: number, maxBytes: number, magic: 0 | 1, read: () => { framed: KafkaFraming; end: number } | undefined): void {
    if (maxBytes > readAheadMaxBytes) return;
    setImmediate(() => {
      if (log.closed) return;
      let answer: { framed: KafkaFraming; end: number } | undefined;
      try {
        answer = read();
      } catch {
        return; // the fetch itself will read again and say why
      }
      if (answer === undefined || answer.framed.count === 0) return;
      const same = this.prepared.findIndex((p) => p.log === log && p.offset === offset);
      if (same >= 0) this.prepared.splice(same, 1);
      if (this.prepared.length >= maxPrepared) this.prepared.shift();
      this.prepared.push({ log, offset, maxBytes, magic, end: answer.end, framed: answer.framed });
    });
  }
}
