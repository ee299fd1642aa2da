/**
 * A byte range of one segment file, handed to the network layer so that it can send the bytes
 * without copying them through JavaScript (docs/design.md §3, the read path; Kafka 0.7's
 * `FileMessageSet.writeTo`). A region pins its segment: retention may delete the file meanwhile,
 * but the descriptor stays open, and the bytes readable, until the region is released.
 */
import type { Segment } from './segment.js';

/** A pinned range `[position, position + length)` of a segment file. Release it exactly once when done. */
export class FileRegion {
  #segment: Segment | undefined;
  /** Every byte of the region, once a read covered all of it: later reads are served from it. */
  #whole: Buffer | undefined;

  /**
   * @param segment the segment holding the bytes, already pinned by the caller (undefined for an empty region)
   * @param offset log offset of the region's first byte (docs/design.md §1: offsets are byte positions)
   * @param position file position of the region's first byte in the segment file
   * @param length bytes in the region; 0 for an empty region
   * @param segmentStart start offset of the segment holding the bytes (default `offset − position`)
   */
  constructor(
    segment: Segment | undefined,
    readonly offset: number,
    readonly position: number,
    readonly length: number,
    segmentStart = offset - position,
  ) {
    this.#segment = segment;
    this.fd = segment?.fd ?? -1;
    this.segmentStart = segmentStart;
  }

  /**
   * An empty region at log offset `offset`: nothing to send, nothing pinned.
   * @param segmentStart start offset of the segment that holds `offset` (default `offset`)
   */
  static empty(offset: number, segmentStart = offset): FileRegion {
    return new FileRegion(undefined, offset, 0, 0, segmentStart);
  }

  /**
   * Start offset of the segment holding the region's bytes, or for an empty region the segment
   * holding `offset` when the log gave it: REPLICA_FETCH's `segmentStart` (docs/replication.md §6.3).
   */
  readonly segmentStart: number;

  /** The segment file's descriptor (read-only use), −1 for an empty region. Valid until `release()`. */
  readonly fd: number;

  /** True once `release()` has been called (or for an empty region). */
  get released(): boolean {
    return this.#segment === undefined;
  }

  /**
   * The `length` bytes starting `from` bytes into the region (clamped to the region); used to
   * check the first message of a fetch without reading the rest, and to copy a small region
   * into its response. A read that covers the whole region is kept until `release()`, and later
   * reads are views of it, so a fetch of a small region reads the file once for both. The buffer
   * may be shared with other reads of the same region: treat it as read-only.
   * @throws Error after `release()` when the region is not empty
   */
  read(from: number, length: number): Buffer {
    const start = Math.min(Math.max(0, from), this.length);
    const n = Math.min(Math.max(0, length), this.length - start);
    if (n === 0) return Buffer.alloc(0);
    const whole = this.#whole;
    if (whole !== undefined) return whole.subarray(start, start + n);
    const segment = this.#segment;
    if (segment === undefined) throw new Error('file region read after release');
    const bytes = segment.read(this.position + start, n);
    if (start === 0 && bytes.length === this.length) this.#whole = bytes;
    return bytes;
  }

  /** Unpins the segment (a pending close or retention delete may then close the fd). Idempotent. */
  release(): void {
    const segment = this.#segment;
    if (segment === undefined) return;
    this.#segment = undefined;
    this.#whole = undefined;
    segment.unpin();
  }
}
