/**
 * The one place where Kafka messages and klog messages meet (docs/kafka-protocol.md,
 * "Messages"): Kafka's key and timestamp are klog's metadata header (docs/format.md); a Kafka
 * message with neither is a plain klog message. klog's bytes are read only through
 * @klog/protocol's message-set iterator and written only through its encoder.
 *
 * A klog message's Kafka offset is its byte offset in the partition's log; the messages inside a
 * klog gzip wrapper all carry the wrapper's offset and are served uncompressed.
 */
import {
  CompressionCodec,
  ErrorCode,
  ProtocolError,
  checkMessageAt,
  compressionCodecMask,
  crcAddon,
  currentMagic,
  decompressWrapper,
  encodeMessageSetWithHeaders,
  hasHeaderAttribute,
  headerTagKey,
  headerTagTimestamp,
  iterateInnerMessageSet,
  lengthFieldBytes,
  maxHeaderFieldBytes,
  messageOverheadBytes,
  newMessageHeaderSpan,
  scanMessageHeader,
  scanMessageSet,
  writeMessageCrcs,
  type MessageEntry,
} from '@klog/protocol';
import { KafkaErrorCode, KafkaProtocolError } from './errors.js';
import {
  KafkaCodec,
  KafkaCopies,
  decodeKafkaMessageSet,
  kafkaMessageEnd,
  newKafkaMessageSpan,
  scanKafkaMessage,
  writeKafkaCrcs,
  writeKafkaMessageOf,
  type DecodeMessageSetOptions,
  type KafkaMessage,
  type KafkaMessageSpan,
} from './message-set.js';

/**
 * The klog message set of Kafka messages: key and timestamp (when present) in each message's
 * metadata header, a null value stored as an empty one. Offsets of the Kafka messages are
 * ignored (the log assigns byte offsets).
 * @throws ProtocolError (InvalidMessage) for a key over 65535 bytes
 */
export function klogMessageSetOf(messages: readonly KafkaMessage[]): Buffer {
  const entries: MessageEntry[] = messages.map((m) => {
    const empty = m.key === null && m.timestamp === undefined;
    return {
      value: m.value ?? Buffer.alloc(0),
      ...(!empty && { header: { ...(m.key !== null && { key: m.key }), ...(m.timestamp !== undefined && { timestamp: m.timestamp }) } }),
    };
  });
  return encodeMessageSetWithHeaders(entries);
}

/**
 * The klog message set of a produced Kafka message set (magic 0 or 1), as
 * {@link klogMessageSetOf} of its decoded messages gives it: {@link plainKlogMessageSetOfKafka}
 * when no message is compressed (what producers send by default), else the set decoded
 * ({@link decodeKafkaMessageSet}, gzip wrappers inflated) and converted from that.
 * @throws KafkaProtocolError as decodeKafkaMessageSet does; ProtocolError (InvalidMessage) for a key over 65535 bytes
 */
export async function klogMessageSetOfKafka(records: Buffer, options: DecodeMessageSetOptions): Promise<Buffer> {
  return plainKlogMessageSetOfKafka(records) ?? decodedKlogMessageSetOfKafka(records, options);
}

/**
 * The klog message set of a produced Kafka message set decoded first ({@link decodeKafkaMessageSet},
 * gzip wrappers inflated): for a set {@link plainKlogMessageSetOfKafka} left alone.
 * @throws as klogMessageSetOfKafka
 */
export async function decodedKlogMessageSetOfKafka(records: Buffer, options: DecodeMessageSetOptions): Promise<Buffer> {
  return klogMessageSetOf(await decodeKafkaMessageSet(records, options));
}

/**
 * The klog message set of a Kafka message set without compressed messages, synchronously, into
 * `out` (from its start; a new buffer by default): each message checked where it lies
 * ({@link scanKafkaMessage}), its key, timestamp bytes and value copied (all copies in one call,
 * {@link KafkaCopies}), every klog CRC filled by one call ({@link writeMessageCrcs}); no object
 * per message. Where klog's CRC addon is loaded all of that is one call into it
 * (`crcAddon.klogOfKafka`, the same bytes), which leaves a set it does not convert (damaged,
 * compressed) to this path. A klog message is never larger than the Kafka message it comes from
 * (26 bytes of framing at most, against 26 for magic 0 and 34 for magic 1), so `records.length`
 * bytes of `out` always suffice.
 * @returns a view of `out`, or undefined when a message is compressed (call klogMessageSetOfKafka)
 * @throws RangeError when `out` is shorter than `records`; KafkaProtocolError (CorruptMessage)
 *   for a damaged message; ProtocolError (InvalidMessage) for a key over 65535 bytes
 */
export function plainKlogMessageSetOfKafka(records: Buffer, out: Buffer = Buffer.allocUnsafe(records.length)): Buffer | undefined {
  if (out.length < records.length) throw new RangeError(`output of ${out.length} bytes for a Kafka message set of ${records.length}`);
  if (crcAddon?.klogOfKafka !== undefined) {
    const end = crcAddon.klogOfKafka(records, 0, records.length, out, 0);
    if (end >= 0) return out.subarray(0, end);
  }
  const span = newKafkaMessageSpan();
  const copies = new KafkaCopies();
  let at = 0;
  for (let pos = 0; pos < records.length; ) {
    const end = kafkaMessageEnd(records, pos);
    const m = scanKafkaMessage(records, pos, end, span);
    if (m.codec !== KafkaCodec.None) return undefined;
    at = writeKlogMessageOf(records, m, end, out, at, copies);
    pos = end;
  }
  copies.flush(records, out);
  writeMessageCrcs(out, 0, at);
  return out.subarray(0, at);
}

/** Bytes of the metadata header's fields of a Kafka message (key and timestamp), 0 for none. */
function headerFieldsOf(m: KafkaMessageSpan): number {
  const fields = (m.keyStart < 0 ? 0 : 3 + m.keyEnd - m.keyStart) + (m.timestampAt < 0 ? 0 : 3 + 8);
  if (fields > maxHeaderFieldBytes) throw new ProtocolError(ErrorCode.InvalidMessage, `message header of ${fields} bytes is over ${maxHeaderFieldBytes}`);
  return fields;
}

/**
 * Writes the klog message of the Kafka message `m` of `src` (ending at `end`) at `out[at]`, but
 * for its CRC; key, timestamp and value bytes are queued on `copies` (flush them from `src`).
 * @returns the position after it
 */
function writeKlogMessageOf(src: Buffer, m: KafkaMessageSpan, end: number, out: Buffer, at: number, copies: KafkaCopies): number {
  const fields = headerFieldsOf(m);
  let pos = at + messageOverheadBytes;
  if (fields > 0) {
    pos = out.writeUInt16BE(fields, pos);
    if (m.keyStart >= 0) {
      const n = m.keyEnd - m.keyStart;
      out[pos] = headerTagKey;
      pos = out.writeUInt16BE(n, pos + 1);
      copies.add(m.keyStart, pos, n);
      pos += n;
    }
    if (m.timestampAt >= 0) {
      out[pos] = headerTagTimestamp;
      pos = out.writeUInt16BE(8, pos + 1);
      copies.add(m.timestampAt, pos, 8);
      pos += 8;
    }
  }
  if (m.valueStart >= 0) {
    copies.add(m.valueStart, pos, end - m.valueStart);
    pos += end - m.valueStart;
  }
  out.writeInt32BE(pos - at - lengthFieldBytes, at);
  out[at + 4] = currentMagic;
  out[at + 5] = fields > 0 ? hasHeaderAttribute : 0;
  return pos;
}

/** A klog message set re-framed as a Kafka one. */
export interface KafkaFraming {
  /** The Kafka message set. */
  readonly records: Buffer;
  /** Kafka messages in it. */
  readonly count: number;
  /** Byte offset of the last klog message re-framed, or undefined for none. */
  readonly lastOffset: number | undefined;
  /** Byte offset after the last whole klog message read (where the next read starts). */
  readonly nextOffset: number;
}

/** A run of uncompressed klog messages of one buffer, re-framed in one go. */
interface Run {
  readonly buf: Buffer;
  readonly start: number;
  readonly end: number;
  /** The Kafka offset of every message of the run (a wrapper's inner set), or -1: each message's own byte offset (`baseOffset` + its position). */
  readonly offset: number;
  /** Byte offset in the log of the run's last klog message (the wrapper, for an inner set) and after it. */
  readonly lastOffset: number;
  readonly nextOffset: number;
}

/** Bytes a Kafka message (magic 1) takes at most beyond the klog message it comes from: 34 of framing against klog's 10. */
const maxGrowthBytes = 24;

/**
 * Re-frames the whole messages of a klog message set read from the log at `baseOffset` as Kafka
 * messages of `magic`, each with its klog byte offset, into one buffer allocated once, whose
 * CRCs are then filled by one call ({@link writeKafkaCrcs}). A partial message at the end is
 * left out (the next read starts at it). Compressed klog messages are decompressed (at most
 * `maxInnerBytes` each).
 * Where klog's CRC addon is loaded, a set of uncompressed, sound messages is re-framed by one
 * call into it ({@link plainKafkaMessageSetOf}); any other set takes the path here.
 * @throws KafkaProtocolError (CorruptMessage) when the first message is damaged; a damaged
 *   message later ends the set before it
 */
export async function kafkaMessageSetOf(set: Buffer, baseOffset: number, magic: 0 | 1, maxInnerBytes: number): Promise<KafkaFraming> {
  const plain = plainKafkaMessageSetOf(set, baseOffset, magic);
  if (plain !== undefined) return plain;
  const scan = scanMessageSet(set);
  const runs: Run[] = [];
  let count = 0;
  let bytes = 0;
  let plainStart = -1;
  let lastAt = 0;
  let pos = 0;
  let damage: string | undefined;
  const closePlain = (): void => {
    if (plainStart < 0) return;
    runs.push({ buf: set, start: plainStart, end: pos, offset: -1, lastOffset: baseOffset + lastAt, nextOffset: baseOffset + pos });
    bytes += pos - plainStart;
    plainStart = -1;
  };
  while (pos < scan.validBytes) {
    const size = lengthFieldBytes + set.readInt32BE(pos);
    const attributes = set[pos + 5]!;
    if ((attributes & compressionCodecMask) === CompressionCodec.None) {
      if (plainStart < 0) plainStart = pos;
      lastAt = pos;
      count++;
      pos += size;
      continue;
    }
    closePlain();
    const inner = await innerSetOf(set, pos, size, attributes, maxInnerBytes);
    if (typeof inner === 'string') {
      damage = `invalid message at offset ${baseOffset + pos}: ${inner}`;
      break;
    }
    runs.push({ buf: inner.set, start: 0, end: inner.set.length, offset: baseOffset + pos, lastOffset: baseOffset + pos, nextOffset: baseOffset + pos + size });
    bytes += inner.set.length;
    count += inner.count;
    pos += size;
  }
  closePlain();
  if (damage === undefined && scan.stopReason !== undefined && !scan.partial) {
    const c = checkMessageAt(set, pos);
    damage = `invalid message at offset ${baseOffset + pos}: ${c.status === 'invalid' ? c.reason : scan.stopReason}`;
  }
  const framed = frameRuns(runs, Buffer.allocUnsafe(bytes + maxGrowthBytes * count), magic, baseOffset);
  if (framed.lastOffset === undefined && (damage !== undefined || framed.damage !== undefined)) {
    throw new KafkaProtocolError(KafkaErrorCode.CorruptMessage, framed.damage ?? damage!);
  }
  return { records: framed.records, count: framed.count, lastOffset: framed.lastOffset, nextOffset: framed.nextOffset };
}

/** Where {@link plainKafkaMessageSetOf} has the addon put its figures: stop position, end of output, count, last message. */
const nativeResult = new Float64Array(4);

/**
 * {@link kafkaMessageSetOf} of a set of uncompressed, sound klog messages (a partial one may end
 * it), synchronously, in one call into klog's CRC addon (`crcAddon.kafkaOfKlog`), into a new
 * buffer of a quarter more than the set plus 1 KiB: the first message always fits (24 bytes of
 * growth at most), and when later ones do not the set served ends before them (the next fetch
 * starts there). `set` is not kept: a caller may read the next set into the same buffer.
 * @returns undefined without the addon, or when the set holds a message the addon leaves to
 *   JavaScript (compressed, a bad CRC or metadata header, damaged framing): call
 *   kafkaMessageSetOf, which reports or serves it
 */
export function plainKafkaMessageSetOf(set: Buffer, baseOffset: number, magic: 0 | 1): KafkaFraming | undefined {
  if (crcAddon?.kafkaOfKlog === undefined) return undefined;
  const out = Buffer.allocUnsafe(Math.ceil(set.length * 1.25) + 1024);
  const r = nativeResult;
  const stop = crcAddon.kafkaOfKlog(set, 0, set.length, out, 0, baseOffset, magic, r);
  const [stopAt, end, count, last] = r as unknown as [number, number, number, number];
  if (stop === nativeStop.notPlain || (stop === nativeStop.notWhole && checkMessageAt(set, stopAt, set.length, false).status !== 'partial')) return undefined;
  return { records: out.subarray(0, end), count, lastOffset: last < 0 ? undefined : baseOffset + last, nextOffset: baseOffset + stopAt };
}

/** Why `crcAddon.kafkaOfKlog` stopped (its return value). */
const nativeStop = { whole: 0, notWhole: 1, noRoom: 2, notPlain: 3 } as const;

/** The inner set of the compressed klog message at `set[pos, pos + size)` and its message count, or why it is damaged. */
async function innerSetOf(set: Buffer, pos: number, size: number, attributes: number, maxInnerBytes: number): Promise<{ set: Buffer; count: number } | string> {
  try {
    const inner = await decompressWrapper({ attributes, payload: set.subarray(pos + messageOverheadBytes, pos + size) }, maxInnerBytes);
    if (inner === undefined) return `compressed message inflates past ${maxInnerBytes} bytes`;
    let count = 0;
    for (const m of iterateInnerMessageSet(inner)) if (m !== undefined) count++;
    return { set: inner, count };
  } catch (err) {
    return (err as Error).message;
  }
}

/** Writes the messages of `runs` into `out`, then their CRCs; a bad metadata header ends the set before its message (or its wrapper). */
function frameRuns(runs: readonly Run[], out: Buffer, magic: 0 | 1, baseOffset: number): KafkaFraming & { damage?: string } {
  const span = newMessageHeaderSpan();
  const copies = new KafkaCopies();
  let at = 0;
  let count = 0;
  let lastOffset: number | undefined;
  let nextOffset = baseOffset;
  let damage: string | undefined;
  runs: for (const run of runs) {
    const runAt = at;
    const runCount = count;
    const b = run.buf;
    let pos = run.start;
    let previous = -1;
    while (pos < run.end) {
      const end = pos + lengthFieldBytes + b.readInt32BE(pos);
      try {
        scanMessageHeader(b, pos + messageOverheadBytes, end, b[pos + 5]!, span);
      } catch (err) {
        damage = (err as Error).message;
        if (run.offset >= 0) {
          at = runAt; // a wrapper is served whole or not at all
          count = runCount;
        } else if (previous >= 0) {
          lastOffset = baseOffset + previous;
          nextOffset = baseOffset + pos;
        }
        copies.flush(b, out);
        break runs;
      }
      const offset = run.offset >= 0 ? run.offset : baseOffset + pos;
      at = writeKafkaMessageOf(out, at, offset, magic, span.hasTimestamp ? span.timestamp : -1, copies, span.keyStart, span.keyEnd, span.valueStart, end);
      count++;
      previous = pos;
      pos = end;
    }
    copies.flush(b, out);
    lastOffset = run.lastOffset;
    nextOffset = run.nextOffset;
  }
  const records = out.subarray(0, at);
  writeKafkaCrcs(records, 0, at);
  return { records, count, lastOffset, nextOffset, ...(damage !== undefined && { damage }) };
}

/** What {@link walkKlogMessageHeads} found. */
export interface KlogMessageHeads {
  /** Byte offset of the last message whose head was in the bytes, or undefined for none. */
  readonly last: number | undefined;
  /** Byte offset after it (may be past the bytes read, for a message they hold only the head of). */
  readonly next: number;
  /** True when the walk stopped at bytes that are not a message head. */
  readonly corrupt: boolean;
}

/**
 * Walks the heads (length, magic) of the klog messages in `buf`, read from the log at
 * `baseOffset` and starting at a message boundary, without checking CRCs: where each message
 * starts, so a high watermark (the last message's offset + 1) and the first message at or after
 * an offset can be found.
 * @param stopAt stop at the first message that starts at or after this offset
 */
export function walkKlogMessageHeads(buf: Buffer, baseOffset: number, stopAt = Infinity): KlogMessageHeads {
  let pos = 0;
  let last: number | undefined;
  while (pos < buf.length && baseOffset + pos < stopAt) {
    const c = checkMessageAt(buf, pos, buf.length, false);
    if (c.status === 'invalid') return { last, next: baseOffset + pos, corrupt: true };
    if (c.size === undefined) break;
    last = baseOffset + pos;
    pos += c.size;
    if (c.status === 'partial') break;
  }
  return { last, next: baseOffset + pos, corrupt: false };
}

/**
 * Whether `head` (bytes read from the log at some offset) starts with a whole klog message whose
 * CRC is right, or with the head of one `size` bytes long that was cut (read more and ask again).
 */
export function klogMessageAt(head: Buffer): { status: 'message' } | { status: 'cut'; size: number } | { status: 'none' } {
  const c = checkMessageAt(head, 0, head.length, true);
  if (c.status === 'valid') return { status: 'message' };
  if (c.status === 'partial' && c.size !== undefined) return { status: 'cut', size: c.size };
  return { status: 'none' };
}
