/**
 * Sends the messages of one source to the target cluster and never drops one: what the target
 * does not acknowledge is sent again, with a growing wait, until it is.
 *
 * Two producers: messages that carried metadata (key, creation time, host) in the source go
 * through one that writes it, plain messages through one that writes plain messages, so a
 * message arrives in the target as it was in the source. Every keyed message is of the first
 * kind, so all messages of one key share a producer and its ordered connections.
 *
 * Order: messages go out in the order they were taken from the source, and the producer keeps
 * the order of the records it sends to one target partition. When a send fails, the sender
 * stops taking new messages, waits until every send in flight has settled, then resends the
 * failed ones in their original order, and only then goes on. So two messages with the same
 * key (same target partition) reach the target in source order; a failure that was in fact
 * appended (an acknowledgement lost with its connection) can only add a duplicate, never
 * lose. One narrow window remains: a later message of the same key already batched when the
 * failure is reported (within the producer's linger time) may reach the target first if the
 * broker is back by the time that batch goes.
 */
import type { ZkProducer, ZkProducerRecord } from '@klog/client';
import { Backoff, sleep } from '@klog/retry';
import type { Logger } from 'pino';

/** A message to copy. */
export interface Outgoing {
  readonly topic: string;
  /** The record for the target: value, and the source message's key, timestamp and host when it had them. */
  readonly record: ZkProducerRecord;
  /** True when the source message carried metadata: it is sent by the producer that writes it. */
  readonly stamped: boolean;
  /** Called once the target acknowledged it (`copied` true), or once the `dropOneIn` testing aid dropped it (false). */
  readonly onAck: (copied: boolean) => void;
}

interface Queued extends Outgoing {
  /** Order in which it was taken. */
  readonly seq: number;
}

export interface TargetSenderOptions {
  readonly maxInFlightMessages: number;
  readonly retryBackoffMs: number;
  readonly retryBackoffMaxMs: number;
  /** Testing aid: drop one message in this many (acknowledge it without sending). 0: off. */
  readonly dropOneIn: number;
  readonly logger: Logger;
}

/** See the file comment. One per source. */
export class TargetSender {
  private seq = 0;
  private inFlight = 0;
  private failed: Queued[] = [];
  private lastError: unknown;
  /** Set while failed messages are being resent; new messages wait for it. */
  private retrying: Promise<void> | undefined;
  private waiters: Array<() => void> = [];
  private closed = false;
  /** Messages acknowledged by the target since the sender started. */
  acked = 0;
  /** Sends that failed and were queued again. */
  retries = 0;
  /** Messages dropped by the `dropOneIn` testing aid. */
  dropped = 0;

  constructor(
    private readonly producers: { readonly plain: ZkProducer; readonly stamped: ZkProducer },
    private readonly options: TargetSenderOptions,
  ) {}

  /** Messages sent and not yet acknowledged (failed ones waiting to be resent included). */
  get outstanding(): number {
    return this.inFlight + this.failed.length;
  }

  /** True while failed messages are being resent. */
  get isRetrying(): boolean {
    return this.retrying !== undefined;
  }

  /** Sends a message once there is room and no resend is under way. */
  async submit(m: Outgoing): Promise<void> {
    while (!this.closed && (this.retrying !== undefined || this.inFlight + this.failed.length >= this.options.maxInFlightMessages)) {
      await this.change();
    }
    const q: Queued = { ...m, seq: this.seq++ };
    const { dropOneIn } = this.options;
    if (dropOneIn > 0 && q.seq % dropOneIn === dropOneIn - 1) {
      this.dropped++;
      this.options.logger.debug({ topic: m.topic }, 'testing aid drop-one-in: message dropped');
      q.onAck(false);
      return;
    }
    this.dispatch(q);
  }

  /** Resolves once nothing is in flight (or `timeoutMs` passed); true when nothing is. */
  async drain(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.outstanding > 0 || this.retrying !== undefined) {
      const left = deadline - Date.now();
      if (left <= 0) return false;
      await Promise.race([this.change(), new Promise((resolve) => setTimeout(resolve, Math.min(left, 100)))]);
    }
    return true;
  }

  /** Stops resending; waiting submits return. What is not acknowledged stays so. */
  close(): void {
    this.closed = true;
    this.wake();
  }

  private dispatch(q: Queued): void {
    this.inFlight++;
    let sent: Promise<unknown>;
    try {
      sent = (q.stamped ? this.producers.stamped : this.producers.plain).send(q.topic, [q.record]);
    } catch (err) {
      sent = Promise.reject(err);
    }
    sent.then(
      () => {
        this.inFlight--;
        this.acked++;
        q.onAck(true);
        this.wake();
      },
      (err: unknown) => {
        this.inFlight--;
        this.failed.push(q);
        this.lastError = err;
        this.retries++;
        this.retrying ??= this.resend().finally(() => {
          this.retrying = undefined;
          this.wake();
        });
        this.wake();
      },
    );
  }

  /** Waits for the sends in flight, then resends the failed ones in order until none fails. */
  private async resend(): Promise<void> {
    const { retryBackoffMs, retryBackoffMaxMs } = this.options;
    const backoff = new Backoff({ initialMs: retryBackoffMs, maxMs: Math.max(retryBackoffMs, retryBackoffMaxMs) });
    let attempt = 0;
    for (;;) {
      while (this.inFlight > 0) await this.change();
      if (this.failed.length === 0 || this.closed) return;
      const batch = this.failed.sort((a, b) => a.seq - b.seq);
      this.failed = [];
      attempt++;
      const err = this.lastError;
      const backoffMs = backoff.next();
      this.options.logger.warn(
        { err, messages: batch.length, topics: [...new Set(batch.map((q) => q.topic))], attempt, retryInMs: backoffMs },
        'target did not acknowledge; waiting, then sending again (nothing is committed for these messages)',
      );
      await sleep(backoffMs);
      for (const q of batch) this.dispatch(q);
      while (this.inFlight > 0) await this.change();
      if (this.failed.length === 0) {
        this.options.logger.info({ messages: batch.length, attempts: attempt }, 'target acknowledged the resent messages');
        return;
      }
    }
  }

  private change(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }
}
