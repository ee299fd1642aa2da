/**
 * Where Kafka clients stand in a klog log (docs/kafka-protocol.md, "Offsets"): offsets are byte
 * offsets, the high watermark is the last visible message's offset + 1 (so that a client that
 * fetches "last + 1" is at the end of the partition), and a fetch at an offset inside a message
 * is answered from the first message at or after it.
 *
 * klog keeps no per-message index (docs/design.md §2), so both are found by walking message
 * heads from a known boundary: for the high watermark, the log's own record of its last visible
 * message where it has one (a paper partition this process appended to since opening it,
 * `Log.lastVisibleMessage`), else from where the previous walk of the partition stopped (each
 * byte appended is walked once); for a fetch offset, the offset itself
 * when a message starts there, the answer remembered from an earlier fetch ("last + 1" of what
 * was served), or a walk from the start of the segment that holds it.
 *
 * What consumers may see of a log ends at its visible end ({@link visibleEndOf}): the flushed end
 * of a paper partition, the high watermark of a replicated one (docs/replication.md §9.5). A
 * replicated partition's walk starts again when its leader epoch changes or its end falls below
 * what was walked (a follower that truncated, then led again), since the bytes past the old
 * high watermark may have changed.
 */
import { klogMessageAt, walkKlogMessageHeads } from '@klog/kafka-protocol';
import type { Log } from '@klog/storage';
import { visibleEndOf, type ServedLog } from './partitions.js';

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
  /** The leader epoch of a replicated partition when the walk began (0 for a paper one). */
  readonly epoch: number;
}

/** The high watermark and message boundaries of every log, for the Kafka listener. */
export class PartitionEnds {
  private readonly ends = new WeakMap<Log, PartitionEnd>();

  private state(served: ServedLog, end: number): PartitionEnd {
    const log = served.log;
    const epoch = served.replica?.leaderEpoch ?? 0;
    let s = this.ends.get(log);
    if (s === undefined || s.walkedTo < log.earliestOffset || s.walkedTo > end || s.epoch !== epoch) {
      const keep = s !== undefined && s.epoch === epoch && s.walkedTo <= end;
      s = { walkedTo: lastSegmentStartAtOrBefore(log, end), last: undefined, next: keep ? s!.next : new Map<number, number>(), epoch };
      this.ends.set(log, s);
    }
    return s;
  }

  /**
   * The last visible message's offset + 1; for a log without a visible message, its visible end
   * ({@link visibleEndOf}).
   */
  highWatermark(served: ServedLog): number {
    const log = served.log;
    const end = visibleEndOf(served);
    // A paper partition's log knows its last visible message when this process appended it.
    const known = served.replica === undefined ? log.lastVisibleMessage : undefined;
    if (known !== undefined && known >= log.earliestOffset) return known + 1;
    const s = this.state(served, end);
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
   * The offset of the first message at or after `offset` (the visible end, {@link visibleEndOf},
   * when there is none). `offset` must be within `[earliestOffset, visible end]`.
   */
  firstMessageAtOrAfter(served: ServedLog, offset: number): number {
    const log = served.log;
    const end = visibleEndOf(served);
    if (offset >= end || offset <= log.earliestOffset) return Math.min(offset, end);
    const s = this.state(served, end);
    const remembered = s.next.get(offset);
    if (remembered !== undefined) return remembered;
    if (startsMessage(log, offset, end)) return offset;
    let pos = lastSegmentStartAtOrBefore(log, offset);
    while (pos < offset) {
      const heads = walkKlogMessageHeads(log.read(pos, Math.min(walkReadBytes, end - pos), end), pos, offset);
      if (heads.next === pos || heads.corrupt) return end;
      pos = heads.next;
    }
    return Math.min(pos, end);
  }

  /** Remembers that the message after the one at `lastServed` starts at `next` (a fetch served up to it). */
  served(served: ServedLog, lastServed: number, next: number): void {
    const m = this.state(served, visibleEndOf(served)).next;
    if (m.size >= maxRemembered) m.delete(m.keys().next().value!);
    m.set(lastServed + 1, next);
  }
}

/** Walks message heads from the boundary `from` to `end`. */
function walk(log: Log, from: number, end: number): { last: number | undefined; next: number; corrupt: boolean } {
  let pos = from;
  let last: number | undefined;
  while (pos < end) {
    const heads = walkKlogMessageHeads(log.read(pos, Math.min(walkReadBytes, end - pos), end), pos);
    if (heads.last !== undefined) last = heads.last;
    if (heads.corrupt || heads.next === pos) return { last, next: heads.next, corrupt: heads.corrupt };
    pos = heads.next;
  }
  return { last, next: pos, corrupt: false };
}

function startsMessage(log: Log, offset: number, end: number): boolean {
  const head = log.read(offset, Math.min(headReadBytes, end - offset), end);
  const at = klogMessageAt(head);
  if (at.status === 'cut' && at.size <= end - offset) return klogMessageAt(log.read(offset, at.size, end)).status === 'message';
  return at.status === 'message';
}

function lastSegmentStartAtOrBefore(log: Log, offset: number): number {
  const starts = log.segmentStarts();
  let best = starts[0] ?? 0;
  for (const s of starts) if (s <= offset) best = s;
  return best;
}
