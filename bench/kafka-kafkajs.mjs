// kafkajs 2.2 against klog's Kafka listener (part of bench/kafka.sh, not a test):
//   node bench/kafka-kafkajs.mjs HOST:PORT MESSAGES
// Sends MESSAGES messages of 200 bytes in sends of 1000 (acks 1, no compression), then reads
// them with one consumer (a group of one, from the beginning). Prints one JSON line per run.
import { createRequire } from 'node:module';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(join(dirname(fileURLToPath(import.meta.url)), '../tests/kafka/package.json'));
const { Kafka, logLevel } = require('kafkajs');
const [broker, countText] = process.argv.slice(2);
const total = Number(countText ?? 200000);
process.env.KAFKAJS_NO_PARTITIONER_WARNING = '1';
const kafka = new Kafka({ brokers: [broker], clientId: 'bench', logLevel: logLevel.NOTHING });
const topic = `kafkajs-bench-${Date.now()}`;
const value = Buffer.alloc(200, 'x');

const producer = kafka.producer();
await producer.connect();
let t = process.hrtime.bigint();
for (let i = 0; i < total; i += 1000) {
  await producer.send({ topic, acks: 1, messages: Array.from({ length: Math.min(1000, total - i) }, () => ({ value })) });
}
let s = Number(process.hrtime.bigint() - t) / 1e9;
await producer.disconnect();
console.log(JSON.stringify({ client: 'kafkajs', op: 'produce', messages: total, seconds: +s.toFixed(3), messagesPerSecond: Math.round(total / s), mbPerSecond: +((total * 200) / s / 1e6).toFixed(2) }));

const consumer = kafka.consumer({ groupId: `bench-${Date.now()}`, maxBytesPerPartition: 1 << 20, maxWaitTimeInMs: 100 });
await consumer.connect();
await consumer.subscribe({ topic, fromBeginning: true });
let n = 0;
t = process.hrtime.bigint();
await new Promise((resolve) => {
  void consumer.run({
    autoCommit: false,
    eachBatch: async ({ batch }) => {
      n += batch.messages.length;
      if (n >= total) resolve();
    },
  });
});
s = Number(process.hrtime.bigint() - t) / 1e9;
await consumer.disconnect();
console.log(JSON.stringify({ client: 'kafkajs', op: 'consume', messages: n, seconds: +s.toFixed(3), messagesPerSecond: Math.round(n / s), mbPerSecond: +((n * 200) / s / 1e6).toFixed(2) }));
