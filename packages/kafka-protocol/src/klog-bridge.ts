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
  checkMessageAt,
  decompressWrapper,
  encodeMessageSetWithHeaders,
  iterateInnerMessageSet,
  iterateMessageSet,
  messageCodec,
  readMessageHeader,
  type Message,
  type MessageEntry,
} from '@klog/protocol';
import { KafkaErrorCode, KafkaProtocolError } from './errors.js';
import { kafkaMessageSize, writeKafkaMessage, type KafkaMessage } from './message-set.js';

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

interface Entry {
  readonly offset: number;
  readonly timestamp: number | undefined;
  readonly key: Buffer | null;
  readonly value: Buffer;
}

/**
 * Re-frames the whole messages of a klog message set read from the log at `baseOffset` as Kafka
 * messages of `magic`, each with its klog byte offset. A partial message at the end is left out
 * (the next read starts at it). Compressed klog messages are decompressed (at most
 * `maxInnerBytes` each).
 * @throws KafkaProtocolError (CorruptMessage) when the first message is damaged; a damaged
 *   message later ends the set before it
 */
export async function kafkaMessageSetOf(set: Buffer, baseOffset: number, magic: 0 | 1, maxInnerBytes: number): Promise<KafkaFraming> {
  const entries: Entry[] = [];
  let nextOffset = baseOffset;
  let lastOffset: number | undefined;
  try {
    for (const { message, offset, nextOffset: next } of iterateMessageSet(set, baseOffset)) {
      if (messageCodec(message) === CompressionCodec.None) entries.push(entryOf(message, offset));
      else {
        const inner = await decompressWrapper(message, maxInnerBytes);
        if (inner === undefined) throw new KafkaProtocolError(KafkaErrorCode.CorruptMessage, `compressed message at ${offset} inflates past ${maxInnerBytes} bytes`);
        for (const m of iterateInnerMessageSet(inner)) entries.push(entryOf(m, offset));
      }
      lastOffset = offset;
      nextOffset = next;
    }
  } catch (err) {
    if (lastOffset === undefined) {
      throw err instanceof KafkaProtocolError ? err : new KafkaProtocolError(KafkaErrorCode.CorruptMessage, (err as Error).message);
    }
  }
  let size = 0;
  for (const e of entries) size += kafkaMessageSize(magic, e.key?.length ?? 0, e.value.length);
  const records = Buffer.allocUnsafe(size);
  let pos = 0;
  for (const e of entries) pos = writeKafkaMessage(records, pos, e.offset, magic, 0, e.timestamp, e.key, e.value);
  return { records, count: entries.length, lastOffset, nextOffset };
}

function entryOf(message: Message, offset: number): Entry {
  const { header, value } = readMessageHeader(message);
  return { offset, timestamp: header?.timestamp, key: header?.key ?? null, value };
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
