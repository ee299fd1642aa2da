/**
 * Settings of the log layer (docs/design.md §2). It logs through @klog/logger's Logger.
 */

/**
 * When a log flushes (docs/design.md §10, docs/format.md `flush.policy`): `group` (the default)
 * starts a flush as soon as appended data waits and no flush of the log is running, so each
 * flush carries whatever arrived during the one before; `interval` is the paper's policy, a
 * flush after `flush.messages` messages or `flush.ms` ms, whichever comes first.
 */
export type FlushPolicy = 'group' | 'interval';
/** Values of {@link FlushPolicy}. */
export const flushPolicies: readonly FlushPolicy[] = Object.freeze(['group', 'interval']);

/** Per-partition log settings (SPEC §2). */
export interface LogConfig {
  /** When to flush (`flush.policy`): see {@link FlushPolicy}. */
  flushPolicy: FlushPolicy;
  /** Roll to a new segment when an append would make the active one pass this many bytes (`segment.bytes`). */
  segmentBytes: number;
  /**
   * Flush after this many unflushed messages (`flush.messages`); under `group` an upper bound
   * that a flush already in progress makes moot.
   */
  flushMessages: number;
  /**
   * Or flush this many ms after the first unflushed append (`flush.ms`), whichever comes first;
   * under `group` an upper bound, and the wait before retrying a failed flush.
   */
  flushIntervalMs: number;
  /** Delete segments whose last write is older than this many ms (`retention.hours` × 3 600 000). */
  retentionMs: number;
  /** −1: no size limit; else delete the oldest segments while the log's total bytes exceed this (`retention.bytes`). */
  retentionBytes: number;
}

/** Kafka 0.7's defaults, except `flushIntervalMs` (0.7 used 3000 ms) and the group-commit `flushPolicy`: docs/design.md §2, §10. */
export const defaultLogConfig: Readonly<LogConfig> = Object.freeze({
  flushPolicy: 'group',
  segmentBytes: 1024 * 1024 * 1024,
  flushMessages: 500,
  flushIntervalMs: 1000,
  retentionMs: 168 * 60 * 60 * 1000,
  retentionBytes: -1,
});

/**
 * Checks a log config and returns it.
 * @throws RangeError naming the setting and the value seen when a value is out of range
 */
export function checkLogConfig(config: LogConfig): LogConfig {
  const positive = ['segmentBytes', 'flushMessages', 'flushIntervalMs', 'retentionMs'] as const;
  for (const key of positive) {
    const v = config[key];
    if (!Number.isSafeInteger(v) || v <= 0) throw new RangeError(`${key} must be a positive integer, got ${v}`);
  }
  if (!flushPolicies.includes(config.flushPolicy)) throw new RangeError(`flushPolicy must be one of ${flushPolicies.join(', ')}, got ${String(config.flushPolicy)}`);
  if (!Number.isSafeInteger(config.retentionBytes) || config.retentionBytes < -1) {
    throw new RangeError(`retentionBytes must be -1 or a non-negative integer, got ${config.retentionBytes}`);
  }
  return config;
}
