/**
 * Recovery of a partition's last segment after an unclean shutdown (SPEC §2): walk the
 * messages from the start, check each length and CRC, and cut the file at the first message
 * that is incomplete or corrupt. Earlier segments are trusted and never scanned.
 */
import { lengthFieldBytes, MessageSetIterator } from '@klog/protocol';
import type { Segment } from './segment.js';

/** Bytes read per step of the scan; a larger message grows the buffer to its size. */
export const recoveryChunkBytes = 1024 * 1024;

/** What {@link recoverSegment} found and did. */
export interface RecoveryResult {
  /** Whole, valid messages kept. */
  readonly messages: number;
  /** Bytes kept: the file's size after recovery. */
  readonly validBytes: number;
  /** Bytes cut from the end of the file (0 when the segment was intact). */
  readonly truncatedBytes: number;
  /** Why the scan stopped early (file position and cause), `undefined` when intact. */
  readonly reason?: string;
}

/**
 * Scans `segment` (open, not yet served) and truncates it at the first short, bad-length,
 * bad-magic or bad-CRC message, fsyncing the cut. A zero-length segment is intact.
 * Memory use is one chunk, or the size of the largest message when that is bigger.
 * @throws file system errors (read, truncate, fsync)
 */
export function recoverSegment(segment: Segment, chunkBytes = recoveryChunkBytes): RecoveryResult {
  const fileBytes = segment.size;
  let buf = Buffer.allocUnsafe(Math.max(lengthFieldBytes, Math.min(chunkBytes, fileBytes)));
  let pos = 0; // file position of buf[0]; everything before it is valid
  let messages = 0;
  let reason: string | undefined;
  while (pos < fileBytes) {
    const n = segment.readInto(buf, pos, Math.min(buf.length, fileBytes - pos));
    if (n === 0) {
      reason = `file ends at byte ${pos}, expected ${fileBytes}`;
      break;
    }
    const walk = new MessageSetIterator(buf, { end: n });
    messages += walk.count;
    const stop = walk.stop;
    if (stop === undefined) {
      pos += n;
      continue;
    }
    const at = pos + stop.position;
    pos = at;
    if (stop.kind !== 'partial') {
      reason = `invalid message at byte ${at}: ${stop.reason}`;
      break;
    }
    // Partial in this chunk: the message either runs past the end of the file (a torn tail)
    // or only past the end of the buffer (read again from `at`, growing the buffer to fit it).
    const needed = stop.size ?? lengthFieldBytes;
    if (at + needed > fileBytes) {
      reason = `incomplete message at byte ${at}: needs ${needed} bytes, ${fileBytes - at} left in the file`;
      break;
    }
    if (needed > buf.length) buf = Buffer.allocUnsafe(needed);
  }
  const truncatedBytes = fileBytes - pos;
  if (truncatedBytes > 0) segment.truncate(pos);
  return reason === undefined ? { messages, validBytes: pos, truncatedBytes } : { messages, validBytes: pos, truncatedBytes, reason };
}
