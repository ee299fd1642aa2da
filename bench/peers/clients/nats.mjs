/**
 * NATS JetStream with the `nats` client.
 * setup:   a stream `<DEST>` on subject `<dest>`, file storage, limits retention, `--replicas`
 *          replicas (default 1); on a cluster, retried until JetStream has a meta leader, then
 *          until the stream has a leader and every replica is current.
 * produce: core NATS publishes (fire-and-forget, no JetStream publish acks) to the stream's
 *          subject. A batch of B is B publishes followed by one flush (a PING; its PONG says the
 *          server has read everything before it); at most --max-in-flight messages are sent and
 *          not yet covered by a PONG. The clock stops when the stream counts every message
 *          (stream info, polled every 5 ms after the last PONG).
 * produce --acks: JetStream publishes, each answered by a PubAck once the stream has stored the
 *          message (on a quorum of its replicas). The client connects to the server that leads
 *          the stream (its name is `klogbench-<port>`, lib/clusters.mjs). A batch of B is B
 *          publishes whose B acks are awaited as one group; groups are pipelined with at most
 *          --max-in-flight messages unacknowledged (1 with B = 1: synchronous publishes, one
 *          at a time), each waiting at most 30 s for its ack (klog's producer request timeout).
 *          The clock stops at the last ack; the stream must then count N messages.
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
  let nc = await connect({ servers: `127.0.0.1:${a.port}`, pingInterval: 60000 });
  try {
    let jsm = await nc.jetstreamManager({ checkAPI: a.mode !== 'setup' }); // a new cluster answers 503 until it has a meta leader: setup retries
    if (a.mode === 'setup') {
      await Promise.race([setup(jsm), deadline(a.timeoutMs, 'setup')]);
      return;
    }
    if (a.mode === 'produce' && a.acks) {
      const leader = (await jsm.streams.info(stream)).cluster?.leader;
      const leaderPort = Number(/^klogbench-(\d+)$/.exec(leader ?? '')?.[1]);
      if (leaderPort && leaderPort !== a.port) {
        await nc.close();
        nc = await connect({ servers: `127.0.0.1:${leaderPort}`, pingInterval: 60000 });
        jsm = await nc.jetstreamManager();
      }
      await Promise.race([produceAcked(nc, jsm, leader ?? null), deadline(a.timeoutMs, 'produce')]);
      return;
    }
    if (a.mode === 'latency') await Promise.race([latency(nc), deadline(a.timeoutMs, 'latency')]);
    else if (a.mode === 'produce') await Promise.race([produce(nc, jsm), deadline(a.timeoutMs, 'produce')]);
    else await Promise.race([consume(nc, jsm), deadline(a.timeoutMs, 'consume')]);
  } finally {
    await nc.close().catch(() => {});
  }
});

async function setup(jsm) {
  const config = { name: stream, subjects: [a.dest], storage: StorageType.File, retention: RetentionPolicy.Limits, num_replicas: a.replicas };
  for (;;) {
    try {
      await jsm.streams.add(config);
      break;
    } catch (e) {
      // A cluster without a meta leader yet answers 503 (JetStream not ready).
      if (!/503|temporarily unavailable|no suitable peers|insufficient resources/i.test(String(e?.message))) throw e;
      await sleep(200);
    }
  }
  if (a.replicas === 1) return;
  for (;;) {
    const info = await jsm.streams.info(stream);
    const c = info.cluster;
    if (c?.leader && (c.replicas?.length ?? 0) === a.replicas - 1 && c.replicas.every((r) => r.current)) return;
    await sleep(100);
  }
}

/**
 * Most ms a publish waits for its PubAck: klog's producer request timeout (30,000 ms), not the
 * client's default of 5,000, which thousands of pipelined publishes on a loaded machine exceed.
 */
const publishTimeoutMs = 30000;

async function produceAcked(nc, jsm, leader) {
  const js = nc.jetstream();
  const payload = payloadOf(a.size);
  const before = (await jsm.streams.info(stream)).state.messages;
  const window = []; // { upTo, acks: Promise of the group's PubAcks }
  let acked = 0;
  const t0 = now();
  for (let sent = 0; sent < a.messages; ) {
    const b = Math.min(a.batch, a.messages - sent);
    const acks = new Array(b);
    for (let i = 0; i < b; i++) acks[i] = js.publish(a.dest, payload, { timeout: publishTimeoutMs });
    sent += b;
    window.push({ upTo: sent, acks: Promise.all(acks) });
    while (window.length > 0 && sent - acked >= a.maxInFlight) {
      const g = window.shift();
      await g.acks;
      acked = g.upTo;
    }
  }
  for (const g of window.splice(0)) await g.acks;
  const seconds = secondsSince(t0);
  const count = (await jsm.streams.info(stream)).state.messages - before;
  if (count !== a.messages) throw new Error(`stream ${stream} counts ${count} new messages after ${a.messages} acknowledged publishes`);
  report('produce', a.messages, a.messages * a.size, seconds, { batchSize: a.batch, acks: 'PubAck', replicas: a.replicas, maxInFlight: a.maxInFlight, streamLeader: leader, countedByBroker: count });
}

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
