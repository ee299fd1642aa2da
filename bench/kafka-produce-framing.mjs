// A produced Kafka message set converted to klog's, measured apart (not a test): a 1 MiB Kafka
// set (magic 1) of 4,700 messages of 200 bytes with a timestamp and no key (as kcat -P sends
// them), converted 100 times per round, the decode-then-encode path (decodeKafkaMessageSet +
// klogMessageSetOf) and the one-pass klogMessageSetOfKafka alternating, three rounds each;
// prints ns per message per round. KLOG_DISABLE_NATIVE_CRC=1 measures the JavaScript fallback.
// Run `npm run setup` first.
//
//   node bench/kafka-produce-framing.mjs
const kp = await import(new URL('../packages/kafka-protocol/dist/index.js', import.meta.url).href);
const msgs = Array.from({ length: 4700 }, () => ({ key: null, value: Buffer.alloc(200, 120), timestamp: 1_700_000_000_000 }));
const set = kp.encodeKafkaMessageSet(msgs, 1);
const options = { maxInnerBytes: 1 << 30 };
const paths = {
  'decode, then klogMessageSetOf': async () => kp.klogMessageSetOf(await kp.decodeKafkaMessageSet(set, options)),
  klogMessageSetOfKafka: () => kp.klogMessageSetOfKafka(set, options),
};
if (!(await paths.klogMessageSetOfKafka()).equals(await paths['decode, then klogMessageSetOf']())) throw new Error('the two paths differ');
for (let round = 0; round < 3; round++) {
  for (const [path, convert] of Object.entries(paths)) {
    const n = 100;
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await convert();
    const ns = Number(process.hrtime.bigint() - t0) / n / msgs.length;
    console.log(JSON.stringify({ round, path, setBytes: set.length, messages: msgs.length, nsPerMessage: Math.round(ns) }));
  }
}
