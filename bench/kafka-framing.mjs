// Re-framing a fetched klog message set as a Kafka one, measured apart (not a test): a 1 MiB
// klog set of 4,700 messages of 200 bytes with a timestamp in their metadata header (as
// kcat -P stores them), re-framed 100 times, three rounds; prints ns per message per round.
// KLOG_DISABLE_NATIVE_CRC=1 measures the JavaScript fallback. Run `npm run setup` first.
//
//   node bench/kafka-framing.mjs [ROOT]      (ROOT: a klog checkout, default this one)
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const root = resolve(process.argv[2] ?? new URL('..', import.meta.url).pathname);
const kp = await import(pathToFileURL(`${root}/packages/kafka-protocol/dist/index.js`).href);
const msgs = Array.from({ length: 4700 }, () => ({ key: null, value: Buffer.alloc(200, 120), timestamp: 1_700_000_000_000 }));
const klog = kp.klogMessageSetOf(await kp.decodeKafkaMessageSet(kp.encodeKafkaMessageSet(msgs, 1), { maxInnerBytes: 1 << 30 }));
for (let round = 0; round < 3; round++) {
  const t0 = process.hrtime.bigint();
  const n = 100;
  for (let i = 0; i < n; i++) await kp.kafkaMessageSetOf(klog, 0, 1, 1 << 30);
  const ns = Number(process.hrtime.bigint() - t0) / n / msgs.length;
  console.log(JSON.stringify({ root, setBytes: klog.length, messages: msgs.length, nsPerMessage: Math.round(ns) }));
}
