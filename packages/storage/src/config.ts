/**
 * Settings of the log layer (docs/design.md §2). It logs through @klog/logger's Logger.
 */

/** Per-partition log settings (SPEC §2). */
export interface LogConfig {
  /** Roll to a new segment when an append would make the active one pass this many bytes (`segment.bytes`). */
  segmentBytes: number;
  /** Flush after this many unflushed messages (`flush.messages`). */
  flushMessages: number;
  /** Or flush this many ms after the first unflushed append (`flush.ms`), whichever comes first. */
  flushIntervalMs: number;
  /** Delete segments whose last write is older than this many ms (`retention.hours` × 3 600 000). */
  retentionMs: number;
  /** −1: no size limit; else delete the oldest segments while the log's total bytes exceed this (`retention.bytes`). */
  retentionBytes: number;
}

/** Kafka 0.7's defaults, except `flushIntervalMs` (0.7 used 3000 ms): SPEC §2. */
export const defaultLogConfig: Readonly<LogConfig> = Object.freeze({
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
  if (!Number.isSafeInteger(config.retentionBytes) || config.retentionBytes < -1) {
    throw new RangeError(`retentionBytes must be -1 or a non-negative integer, got ${config.retentionBytes}`);
  }
  return config;
}
