/**
 * Where Kafka clients stand in a klog log (docs/kafka-protocol.md, "Offsets"): offsets are byte
 * offsets, the high watermark is the last visible message's offset + 1 (so that a client that
 * fetches "last + 1" is at the end of the partition), and a fetch at an offset inside a message
 * is answered from the first message at or after it.
 *
 * klog keeps no per-message index (docs/design.md §2), so both are found by walking message
 * heads from a known boundary: for the high watermark, from where the previous walk of the
 * partition stopped (each byte appended is walked once); for a fetch offset, the offset itself
 * when a message starts there, the answer remembered from an earlier fetch ("last + 1" of what
 * was served), or a walk from the start of the segment that holds it.
 */
import { klogMessageAt, walkKlogMessageHeads } from '@klog/kafka-protocol';
import type { Log } from '@klog/storage';

/** Bytes read per step of a walk of message heads. */
const walkReadBytes = 64 * 1024;
/** Bytes read to check whether a message starts at an offset. */
const headReadBytes = 4096;
/** Most remembered "last + 1 → next message" answers per partition. */
const maxRemembered = 256;

interface PartitionEnd {
  /** A message boundary up to which the heads have been walked. */
  walkedTo: number;
  /** Offset of the last message before `walkedTo`, undefined when none was seen. */
  last: number | undefined;
  /** `lastServed + 1` → the offset of the message after `lastServed`. */
  readonly next: Map<number, number>;
}

/** The high watermark and message boundaries of every log, for the Kafka listener. */
export class PartitionEnds {
  private readonly ends = new WeakMap<Log, PartitionEnd>();

  private state(log: Log): PartitionEnd {
    let s = this.ends.get(log);
    if (s === undefined || s.walkedTo < log.earliestOffset) {
      s = { walkedTo: lastSegmentStartAtOrBefore(log, log.visibleEnd), last: undefined, next: s?.next ?? new Map<number, number>() };
      this.ends.set(log, s);
    }
    return s;
  }

  /**
   * The last visible message's offset + 1; for a log without a visible message, its visible end.
   */
  highWatermark(log: Log): number {
    const s = this.state(log);
    const end = log.visibleEnd;
    if (s.walkedTo < end) {
      const { last, next } = walk(log, s.walkedTo, end);
      if (last !== undefined) s.last = last;
      s.walkedTo = next;
    }
    if (s.last === undefined && s.walkedTo === end && end > log.earliestOffset) {
      // The walk began at the last segment's start, which is the end: the last message is in an earlier segment.
      const starts = log.segmentStarts();
      for (let i = starts.length - 1; i >= 0 && s.last === undefined; i--) {
        if (starts[i]! < end) s.last = walk(log, starts[i]!, end).last;
      }
    }
    return s.last === undefined ? end : s.last + 1;
  }

  /**
   * The offset of the first message at or after `offset` (`visibleEnd` when there is none).
   * `offset` must be within `[earliestOffset, visibleEnd]`.
   */
  firstMessageAtOrAfter(log: Log, offset: number): number {
    const end = log.visibleEnd;
    if (offset >= end || offset <= log.earliestOffset) return Math.min(offset, end);
    const s = this.state(log);
    const remembered = s.next.get(offset);
    if (remembered !== undefined) return remembered;
    if (startsMessage(log, offset, end)) return offset;
    let pos = lastSegmentStartAtOrBefore(log, offset);
    while (pos < offset) {
      const heads = walkKlogMessageHeads(log.read(pos, Math.min(walkReadBytes, end - pos)), pos, offset);
      if (heads.next === pos || heads.corrupt) return end;
      pos = heads.next;
    }
    return Math.min(pos, end);
  }

  /** Remembers that the message after the one at `lastServed` starts at `next` (a fetch served up to it). */
  served(log: Log, lastServed: number, next: number): void {
    const m = this.state(log).next;
    if (m.size >= maxRemembered) m.delete(m.keys().next().value!);
    m.set(lastServed + 1, next);
  }
}

/** Walks message heads from the boundary `from` to `end`. */
function walk(log: Log, from: number, end: number): { last: number | undefined; next: number; corrupt: boolean } {
  let pos = from;
  let last: number | undefined;
  while (pos < end) {
    const heads = walkKlogMessageHeads(log.read(pos, Math.min(walkReadBytes, end - pos)), pos);
    if (heads.last !== undefined) last = heads.last;
    if (heads.corrupt || heads.next === pos) return { last, next: heads.next, corrupt: heads.corrupt };
    pos = heads.next;
  }
  return { last, next: pos, corrupt: false };
}

function startsMessage(log: Log, offset: number, end: number): boolean {
  const head = log.read(offset, Math.min(headReadBytes, end - offset));
  const at = klogMessageAt(head);
  if (at.status === 'cut' && at.size <= end - offset) return klogMessageAt(log.read(offset, at.size)).status === 'message';
  return at.status === 'message';
}

function lastSegmentStartAtOrBefore(log: Log, offset: number): number {
  const starts = log.segmentStarts();
  let best = starts[0] ?? 0;
  for (const s of starts) if (s <= offset) best = s;
  return best;
}
