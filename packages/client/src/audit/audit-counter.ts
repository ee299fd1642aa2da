/**
 * Counts messages per (topic, window of creation time) for one tier and publishes the counts
 * as audit events (see ./event.ts, docs/audit.md). Used by the producers (`audit` option), the
 * mirror maker and the audit consumer.
 *
 * Counting is synchronous and cheap (one map update per message); publishing takes what was
 * counted since the last publish, numbers it (`seq`) and hands it to the tier's `send`. A
 * publish that fails keeps its events, with their numbers, and the next publish sends them
 * again first: an event that did arrive the first time is then counted once by the reconciler.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import {
  type AuditEvent,
  type AuditTier,
  auditEventVersion,
  defaultAuditTopic,
  defaultAuditWindowMs,
  encodeAuditEvent,
  maxAuditTime,
  validateWindowMs,
  windowStartOf,
} from './event.js';

/** An audit message to send: key (the audited topic) and value (the event's JSON). */
export interface AuditRecord {
  readonly key: string;
  readonly value: Buffer;
}

/** Settings of auditing shared by every tier. */
export interface AuditOptions {
  /** Window length, ms (≥ 1000). Default 10 minutes. Every tier of a deployment must use the same (or one dividing the report's). */
  readonly windowMs?: number;
  /** The audit topic. Default `__audit`; it is never audited itself. */
  readonly topic?: string;
  /** How often counts are published, ms. Default half the window, at most 60,000. */
  readonly publishIntervalMs?: number;
  /** Host written in the events. Default `os.hostname()`. */
  readonly host?: string;
}

/** Options of an {@link AuditCounter}. */
export interface AuditCounterOptions extends AuditOptions {
  readonly tier: AuditTier;
  /** With tier `consumer`: the group that counts, written in its events. */
  readonly group?: string;
  /**
   * Sends audit messages to the audit topic; resolves once the cluster accepted them (as far
   * as the tier's producer tells) and rejects when it did not.
   */
  readonly send: (topic: string, records: AuditRecord[]) => Promise<unknown>;
  /** Receives failures of timed publishes (they are retried at the next one). */
  readonly onPublishError?: (err: unknown) => void;
}

/** See the file comment. */
export class AuditCounter {
  readonly tier: AuditTier;
  readonly windowMs: number;
  /** The audit topic. */
  readonly topic: string;
  readonly publishIntervalMs: number;
  readonly host: string;
  /** This counter's id in its events. */
  readonly instance = randomBytes(8).toString('hex');
  private readonly group: string | undefined;
  private readonly sendRecords: AuditCounterOptions['send'];
  private readonly onPublishError: (err: unknown) => void;
  /** Counts not yet published: topic → window start → count. */
  private counts = new Map<string, Map<number, number>>();
  /** Events numbered but not yet accepted by the cluster. */
  private pending: AuditEvent[] = [];
  private seq = 0;
  private timer: NodeJS.Timeout | undefined;
  private publishing: Promise<void> = Promise.resolve();
  /** Messages counted since the start. */
  counted = 0;
  /** Messages not counted because their creation time is before 1970 or after {@link maxAuditTime}. */
  outOfRange = 0;

  /** @throws RangeError for a window under 1000 ms or a publish interval that is not a positive number */
  constructor(options: AuditCounterOptions) {
    this.tier = options.tier;
    this.windowMs = options.windowMs ?? defaultAuditWindowMs;
    validateWindowMs(this.windowMs);
    this.topic = options.topic ?? defaultAuditTopic;
    this.publishIntervalMs = options.publishIntervalMs ?? Math.min(60_000, Math.floor(this.windowMs / 2));
    if (!(this.publishIntervalMs > 0)) throw new RangeError(`audit publish interval ${this.publishIntervalMs} ms must be > 0`);
    this.host = options.host ?? hostname();
    this.group = options.group;
    this.sendRecords = options.send;
    this.onPublishError = options.onPublishError ?? (() => {});
  }

  /**
   * Counts `n` messages of `topic` created at `timestamp` (ms since the epoch). Messages of
   * the audit topic itself are not counted, nor (see {@link outOfRange}) messages created
   * before 1970 or after {@link maxAuditTime}, which no window can hold.
   */
  count(topic: string, timestamp: number, n = 1): void {
    if (topic === this.topic || n <= 0) return;
    if (!(timestamp >= 0 && timestamp < maxAuditTime)) {
      this.outOfRange += n;
      return;
    }
    const w = windowStartOf(timestamp, this.windowMs);
    let byWindow = this.counts.get(topic);
    if (!byWindow) {
      byWindow = new Map();
      this.counts.set(topic, byWindow);
    }
    byWindow.set(w, (byWindow.get(w) ?? 0) + n);
    this.counted += n;
  }

  /** Publishes on a timer every `publishIntervalMs` (the timer does not keep the process alive). */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.publish().catch(this.onPublishError);
    }, this.publishIntervalMs);
    this.timer.unref();
  }

  /**
   * Publishes everything counted so far (after any events an earlier publish could not send).
   * Publishes run one at a time; this one resolves once its events were accepted.
   * @throws what the tier's `send` throws; the events stay pending for the next publish
   */
  publish(): Promise<void> {
    const run = this.publishing.then(
      () => this.publishNow(),
      () => this.publishNow(),
    );
    this.publishing = run.catch(() => {});
    return run;
  }

  /**
   * Stops the timer and publishes what is left.
   * @throws what {@link publish} throws
   */
  async close(): Promise<void> {
    clearInterval(this.timer);
    this.timer = undefined;
    await this.publish();
  }

  /** Events numbered but not yet accepted (waiting for the next publish). */
  get pendingEvents(): number {
    return this.pending.length;
  }

  private async publishNow(): Promise<void> {
    for (const [topic, byWindow] of this.counts) {
      for (const [windowStart, count] of byWindow) {
        this.pending.push({
          v: auditEventVersion,
          tier: this.tier,
          host: this.host,
          instance: this.instance,
          seq: this.seq++,
          topic,
          windowStart,
          windowMs: this.windowMs,
          count,
          ...(this.group !== undefined && { group: this.group }),
        });
      }
    }
    this.counts = new Map();
    if (this.pending.length === 0) return;
    await this.sendRecords(
      this.topic,
      this.pending.map((e) => ({ key: e.topic, value: encodeAuditEvent(e) })),
    );
    this.pending = [];
  }
}
