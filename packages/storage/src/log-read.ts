/**
 * The read side of one partition's log (docs/design.md §3 FETCH and OFFSETS): which segment
 * holds an offset, how many bytes a read from there may return, and the offsets OFFSETS lists.
 * Pure functions over a snapshot of the segment list and the end a read is bounded by.
 */
import { LogOffsetOutOfRangeError } from './errors.js';
import { findSegmentIndex } from './segment-list.js';
import type { Segment } from './segment.js';

/** Time value of {@link Log.offsetsBefore} asking for the latest offset (docs/design.md §3 OFFSETS). */
export const latestTime = -1;
/** Time value of {@link Log.offsetsBefore} asking for the earliest offset (docs/design.md §3 OFFSETS). */
export const earliestTime = -2;

/**
 * The segment of `view` holding `offset` and how many bytes from there a read may return: at
 * most `maxBytes`, never past `end`, never past the end of that segment (docs/design.md §3
 * FETCH); undefined when there is nothing to read (`offset === end`, `maxBytes` 0).
 * @throws LogOffsetOutOfRangeError when `offset` is outside `[earliest, end]`; RangeError for
 *   a negative or non-integer `maxBytes`
 */
export function locateRead(
  view: readonly Segment[],
  offset: number,
  maxBytes: number,
  end: number,
  topic: string,
  partition: number,
): { segment: Segment; length: number } | undefined {
  if (!Number.isSafeInteger(maxBytes) || maxBytes < 0) throw new RangeError(`maxBytes must be a non-negative integer, got ${maxBytes}`);
  const earliest = view[0]!.start;
  if (!Number.isSafeInteger(offset) || offset < earliest || offset > end) {
    throw new LogOffsetOutOfRangeError(topic, partition, offset, earliest, end);
  }
  if (offset === end || maxBytes === 0) return undefined;
  const segment = view[findSegmentIndex(view, offset)]!;
  const length = Math.min(maxBytes, Math.min(segment.end, end) - offset);
  return length > 0 ? { segment, length } : undefined; // length <= 0 only in a gap between segments, see Log.open()
}

/**
 * Kafka 0.7's getOffsetsBefore over `view`, counting only offsets up to `end`: see
 * `Log.offsetsBefore`.
 */
export function offsetsBefore(view: readonly Segment[], end: number, time: number, maxOffsets: number): number[] {
  const candidates: { offset: number; time: number }[] = [];
  for (const s of view) if (s.start <= end) candidates.push({ offset: s.start, time: s.lastModifiedMs });
  if (end > candidates[candidates.length - 1]!.offset) candidates.push({ offset: end, time: Date.now() });
  let i: number;
  if (time === latestTime) i = candidates.length - 1;
  else if (time === earliestTime) i = 0;
  else for (i = candidates.length - 1; i >= 0 && candidates[i]!.time > time; i--);
  const out: number[] = [];
  for (; i >= 0 && out.length < maxOffsets; i--) out.push(candidates[i]!.offset);
  return out;
}
