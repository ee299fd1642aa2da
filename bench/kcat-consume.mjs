// The reading end of bench/kafka.sh's `kcat -C -e` (not a test):
//   kcat -C -e ... | node bench/kcat-consume.mjs FILE MESSAGES T0
// Compares what kcat writes with FILE (the lines produced) as it streams, and prints one JSON
// line with two times from T0 (seconds since the epoch, taken before kcat started): `seconds`,
// until the bytes read reach FILE's size less kcat's output buffer (the last message consumed;
// the rate is of this), and `wallSeconds`, until kcat exits. The difference is kcat's wait for
// end of partition: librdkafka only reports it after a fetch at the end comes back empty, which
// the broker holds up to the fetch's max_wait_ms (librdkafka's fetch.wait.max.ms, 500 ms) as
// Kafka does while fewer than min_bytes (1) are there. kcat writes to a pipe through a stdio
// buffer of 4096 bytes (at most 20 messages here), and its last, partial buffer comes out only
// when it exits, after that wait: so the last message counts as consumed once all but 4096 bytes
// are read.
import { openSync, readSync, statSync } from 'node:fs';

const [file, messagesText, t0Text] = process.argv.slice(2);
const messages = Number(messagesText);
const t0 = Number(t0Text) * 1000;
const size = statSync(file).size;
const fd = openSync(file, 'r');
const want = Buffer.allocUnsafe(1 << 20);
/** kcat's stdout buffer on a pipe (glibc's, the pipe's st_blksize). */
const stdioBufferBytes = 4096;
let read = 0;
let identical = true;
let lastMs;
process.stdin.on('data', (chunk) => {
  for (let at = 0; identical && at < chunk.length; ) {
    const n = readSync(fd, want, 0, Math.min(want.length, chunk.length - at), read + at);
    if (n === 0 || !chunk.subarray(at, at + n).equals(want.subarray(0, n))) identical = false;
    at += n;
  }
  read += chunk.length;
  if (lastMs === undefined && read >= size - stdioBufferBytes) lastMs = Date.now();
});
process.stdin.on('end', () => {
  const endMs = Date.now();
  const s = ((lastMs ?? endMs) - t0) / 1000;
  console.log(
    JSON.stringify({
      client: 'kcat',
      op: 'consume',
      messages,
      seconds: +s.toFixed(3),
      messagesPerSecond: Math.round(messages / s),
      mbPerSecond: +((messages * 200) / s / 1e6).toFixed(2),
      wallSeconds: +((endMs - t0) / 1000).toFixed(3),
      wallMessagesPerSecond: Math.round(messages / ((endMs - t0) / 1000)),
      identical: identical && read === size,
    }),
  );
});
