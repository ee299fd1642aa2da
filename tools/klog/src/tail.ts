/**
 * `klog consume --offset -N`: where the last N messages of a partition start. Offsets are byte
 * positions and messages differ in size, so the start is found by walking back from the end one
 * segment at a time (the segment starts come from OFFSETS, docs/format.md §10): the messages
 * from the newest segment start to the end are counted; when they are fewer than N, from the
 * start of the segment before it, and so on down to the earliest offset.
 */
import type { SimpleConsumer } from '@klog/client';

/** Where to start, and how many messages there to skip (the start is inside a compressed set, whose messages share an offset). */
export interface TailStart {
  readonly offset: number;
  readonly skip: number;
}

/** A day in ms: OFFSETS before a time this far ahead lists every segment start. */
const dayMs = 86_400_000;

/**
 * The start of the last `n` messages (all of them when there are fewer), as of the partition's
 * end when called.
 * @throws what the consumer's OFFSETS and FETCH requests throw
 */
export async function startOfLast(consumer: SimpleConsumer, topic: string, partition: number, n: number, fetchBytes: number): Promise<TailStart> {
  const end = await consumer.latestOffset(topic, partition);
  const earliest = await consumer.earliestOffset(topic, partition);
  if (end <= earliest || n === 0) return { offset: end, skip: 0 };
  const starts = (await consumer.offsetsBefore(topic, partition, Date.now() + dayMs, 2 ** 31 - 1)).filter((o) => o >= earliest && o < end);
  if (!starts.includes(earliest)) starts.push(earliest);
  starts.sort((a, b) => b - a);
  for (const from of starts) {
    const last = await lastOffsets(consumer, topic, partition, from, end, n, fetchBytes);
    if (last.length === n || from === earliest) return last[0] ?? { offset: end, skip: 0 };
  }
  return { offset: earliest, skip: 0 };
}

/** The positions of the last (at most) `n` messages of `[from, end)`, oldest first. */
async function lastOffsets(
  consumer: SimpleConsumer,
  topic: string,
  partition: number,
  from: number,
  end: number,
  n: number,
  fetchBytes: number,
): Promise<TailStart[]> {
  const ring = new Array<TailStart>(n);
  let count = 0;
  let previous = -1;
  let skip = 0;
  outer: for await (const batch of consumer.messageBatches({ topic, partition, offset: from, fetchBytes, maxWaitMs: 0 })) {
    for (const m of batch) {
      skip = m.offset === previous ? skip + 1 : 0;
      previous = m.offset;
      ring[count++ % n] = { offset: m.offset, skip };
      if (m.nextOffset >= end) break outer;
    }
  }
  if (count <= n) return ring.slice(0, count);
  const head = count % n;
  return [...ring.slice(head), ...ring.slice(0, head)];
}
