/**
 * NATS JetStream with the `nats` client.
 * setup:   a stream `<DEST>` on subject `<dest>`, file storage, limits retention, one replica.
 * produce: core NATS publishes (fire-and-forget, no JetStream publish acks) to the stream's
 *          subject. A batch of B is B publishes followed by one flush (a PING; its PONG says the
 *          server has read everything before it); at most --max-in-flight messages are sent and
 *          not yet covered by a PONG. The clock stops when the stream counts every message
 *          (stream info, polled every 5 ms after the last PONG).
 * consume: a durable pull consumer with AckPolicy none, read with consume() in pull batches of
 *          1000 messages, until N messages.
 * latency: the fixed-rate probe of `klog perf latency` (lib/common.mjs latencyProbe): core
 *          publishes of the messages due each ms, read by an ordered consumer (JetStream's
 *          lowest-latency consumer: no acks, flow control by the server) from the stream's end.
 */
import { AckPolicy, connect, DeliverPolicy, RetentionPolicy, StorageType } from 'nats';
import { args, deadline, latencyProbe, now, payloadOf, report, run, secondsSince, sleep } from '../lib/common.mjs';

const a = args();
const stream = a.dest.toUpperCase();

run(async () => {
  const nc = await connect({ servers: `127.0.0.1:${a.port}`, pingInterval: 60000 });
  try {
    const jsm = await nc.jetstreamManager();
    if (a.mode === 'setup') {
      await jsm.streams.add({ name: stream, subjects: [a.dest], storage: StorageType.File, retention: RetentionPolicy.Limits, num_replicas: 1 });
      return;
    }
    if (a.mode === 'latency') await Promise.race([latency(nc), deadline(a.timeoutMs, 'latency')]);
    else if (a.mode === 'produce') await Promise.race([produce(nc, jsm), deadline(a.timeoutMs, 'produce')]);
    else await Promise.race([consume(nc, jsm), deadline(a.timeoutMs, 'consume')]);
  } finally {
    await nc.close().catch(() => {});
  }
});

async function produce(nc, jsm) {
  const payload = payloadOf(a.size);
  const before = (await jsm.streams.info(stream)).state.messages;
  const window = []; // { upTo: messages sent before the flush, pong: its promise }
  let acked = 0;
  const t0 = now();
  for (let sent = 0; sent < a.messages; ) {
    const b = Math.min(a.batch, a.messages - sent);
    for (let i = 0; i < b; i++) nc.publish(a.dest, payload);
    sent += b;
    window.push({ upTo: sent, pong: nc.flush() });
    while (window.length > 0 && sent - acked > a.maxInFlight) {
      const f = window.shift();
      await f.pong;
      acked = f.upTo;
    }
  }
  for (const f of window.splice(0)) await f.pong;
  const published = secondsSince(t0);
  let count = 0;
  for (;;) {
    count = (await jsm.streams.info(stream)).state.messages - before;
    if (count >= a.messages) break;
    await sleep(5);
  }
  const seconds = secondsSince(t0);
  report('produce', a.messages, a.messages * a.size, seconds, { batchSize: a.batch, publishedSeconds: published, countedByBroker: count });
}

async function consume(nc, jsm) {
  await jsm.consumers.add(stream, { durable_name: 'bench', ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All });
  const consumer = await nc.jetstream().consumers.get(stream, 'bench');
  let n = 0;
  let bytes = 0;
  const t0 = now();
  const messages = await consumer.consume({ max_messages: 1000 });
  for await (const m of messages) {
    n++;
    bytes += m.data.length;
    if (n === a.messages) break;
  }
  const seconds = secondsSince(t0);
  messages.stop();
  report('consume', n, bytes, seconds, { ackPolicy: 'none', pullBatch: 1000 });
}

async function latency(nc) {
  const js = nc.jetstream();
  let messages;
  const r = await latencyProbe(
    a,
    async (onMessage) => {
      const consumer = await js.consumers.get(stream, { deliver_policy: DeliverPolicy.New });
      messages = await consumer.consume();
      (async () => {
        for await (const m of messages) onMessage(m.data);
      })();
    },
    (payloads) => {
      for (const p of payloads) nc.publish(a.dest, p);
    },
  );
  messages.stop();
  process.stdout.write(`${JSON.stringify({ ...r, consumer: 'ordered' })}\n`);
}
