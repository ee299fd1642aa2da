/**
 * Audit events (the paper's deployment section, docs/design.md §6; docs/audit.md): each tier that moves
 * messages — producers, mirror makers, the audit consumer — counts the messages of each topic
 * per fixed window of their creation time and publishes the counts to an audit topic of the
 * cluster the messages went to (or were counted in). `klog-audit` reads them back and
 * reconciles the tiers window by window.
 *
 * One event is one message of the audit topic: its value is a JSON object (UTF-8), its key the
 * audited topic's name (so one topic's events share a partition).
 *
 * ```json
 * {"v":1,"tier":"producer","host":"web-7","instance":"3f0c…","seq":12,
 *  "topic":"clicks","windowStart":1764489600000,"windowMs":600000,"count":1234}
 * ```
 *
 * `count` is a delta: the messages the emitter counted in that window since its previous event
 * for it. An emitter is one process's counter (`instance`, random per start); `seq` numbers its
 * events, so an event published twice (a retried publish that had in fact arrived) is counted
 * once by the reconciler, which keys events by `(instance, seq)`.
 */
import { validateTopic } from '@klog/protocol';

/** The audit topic unless configured otherwise. */
export const defaultAuditTopic = '__audit';
/** Window length unless configured otherwise: 10 minutes, in ms. */
export const defaultAuditWindowMs = 10 * 60 * 1000;
/** Shortest window accepted, ms (windows of a few seconds are for tests). */
export const minAuditWindowMs = 1000;
/** Latest time a window may end, ms since the epoch: the last one a JavaScript Date can show (year 275760). */
export const maxAuditTime = 8.64e15;
/** Version written in every event's `v`. */
export const auditEventVersion = 1;

/**
 * Who counted: `producer` (messages a producer had accepted by the cluster), `mirror` (messages
 * a mirror maker copied into the cluster), `consumer` (messages a consumer read from the cluster).
 */
export type AuditTier = 'producer' | 'mirror' | 'consumer';
const tiers: ReadonlySet<string> = new Set<AuditTier>(['producer', 'mirror', 'consumer']);

/** One audit event; see the file comment. */
export interface AuditEvent {
  readonly v: number;
  readonly tier: AuditTier;
  /** Host of the emitting process. */
  readonly host: string;
  /** Random id of the emitting counter, new at each start. */
  readonly instance: string;
  /** Number of this event among the emitter's events, from 0. */
  readonly seq: number;
  /** The audited topic. */
  readonly topic: string;
  /** Window start, ms since the epoch: a multiple of `windowMs`. */
  readonly windowStart: number;
  /** Window length, ms. */
  readonly windowMs: number;
  /** Messages counted in the window since the emitter's previous event for it (≥ 1). */
  readonly count: number;
  /** With tier `consumer`: the consumer group that counted. */
  readonly group?: string;
}

/**
 * Start of the window of length `windowMs` that holds `timestamp` (both ms; windows are
 * aligned to the epoch, so every tier cuts the same windows).
 */
export function windowStartOf(timestamp: number, windowMs: number): number {
  return Math.floor(timestamp / windowMs) * windowMs;
}

/**
 * Checks a window length in ms.
 * @throws RangeError unless it is an integer ≥ {@link minAuditWindowMs}
 */
export function validateWindowMs(windowMs: number): void {
  if (!Number.isSafeInteger(windowMs) || windowMs < minAuditWindowMs) {
    throw new RangeError(`audit window ${windowMs} ms must be an integer ≥ ${minAuditWindowMs} ms`);
  }
}

/** The JSON bytes of an event (the message value). */
export function encodeAuditEvent(e: AuditEvent): Buffer {
  return Buffer.from(JSON.stringify(e), 'utf8');
}

/**
 * Parses an audit message's value.
 * @throws RangeError naming the first field that is missing or malformed (not JSON, unknown
 *   version or tier, a bad topic name, a window start that is not a multiple of the window
 *   length or a window ending after {@link maxAuditTime}, a count below 1)
 */
export function decodeAuditEvent(value: Uint8Array): AuditEvent {
  let o: unknown;
  try {
    o = JSON.parse(Buffer.from(value.buffer, value.byteOffset, value.byteLength).toString('utf8'));
  } catch {
    throw new RangeError('audit event is not JSON');
  }
  if (typeof o !== 'object' || o === null) throw new RangeError('audit event is not a JSON object');
  const r = o as Record<string, unknown>;
  const int = (k: string, min: number): number => {
    const x = r[k];
    if (typeof x !== 'number' || !Number.isSafeInteger(x) || x < min) throw new RangeError(`audit event field ${k}: ${JSON.stringify(x)} is not an integer ≥ ${min}`);
    return x;
  };
  const str = (k: string): string => {
    const x = r[k];
    if (typeof x !== 'string' || x === '') throw new RangeError(`audit event field ${k}: ${JSON.stringify(x)} is not a non-empty string`);
    return x;
  };
  if (r.v !== auditEventVersion) throw new RangeError(`audit event version ${JSON.stringify(r.v)} is not ${auditEventVersion}`);
  const tier = str('tier');
  if (!tiers.has(tier)) throw new RangeError(`audit event tier ${JSON.stringify(tier)} is not producer, mirror or consumer`);
  const topic = str('topic');
  try {
    validateTopic(topic);
  } catch (e) {
    throw new RangeError(`audit event topic: ${(e as Error).message}`, { cause: e });
  }
  const windowMs = int('windowMs', 1);
  const windowStart = int('windowStart', 0);
  if (windowStart % windowMs !== 0) throw new RangeError(`audit event windowStart ${windowStart} is not a multiple of windowMs ${windowMs}`);
  if (windowStart + windowMs > maxAuditTime) throw new RangeError(`audit event window ends after ${new Date(maxAuditTime).toISOString()}`);
  const event: AuditEvent = {
    v: auditEventVersion,
    tier: tier as AuditTier,
    host: str('host'),
    instance: str('instance'),
    seq: int('seq', 0),
    topic,
    windowStart,
    windowMs,
    count: int('count', 1),
  };
  return r.group === undefined ? event : { ...event, group: str('group') };
}
