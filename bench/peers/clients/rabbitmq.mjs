/**
 * RabbitMQ over AMQP 0-9-1 with amqplib.
 * setup:   a durable classic queue `dest` on the default exchange.
 * produce: persistent messages (deliveryMode 2), no publisher confirms. A batch of B is B
 *          publishes in one event-loop turn, corked into one socket write; then the producer
 *          yields (and waits for 'drain' when amqplib says its buffer is full). The clock stops
 *          when the broker counts every message in the queue (checkQueue, polled every 5 ms
 *          after the last publish).
 * consume: basic.consume with noAck (auto-ack; prefetch does not apply then), until N messages.
 */
import { once } from 'node:events';
import amqp from 'amqplib';
import { args, deadline, now, payloadOf, report, run, secondsSince, sleep } from '../lib/common.mjs';

const a = args();

run(async () => {
  const conn = await amqp.connect(`amqp://guest:guest@127.0.0.1:${a.port}`);
  try {
    const ch = await conn.createChannel();
    await ch.assertQueue(a.dest, { durable: true });
    if (a.mode === 'setup') return;
    if (a.mode === 'produce') await Promise.race([produce(conn, ch), deadline(a.timeoutMs, 'produce')]);
    else await Promise.race([consume(ch), deadline(a.timeoutMs, 'consume')]);
  } finally {
    await conn.close().catch(() => {});
  }
});

const afterMux = () => new Promise((r) => process.nextTick(() => setImmediate(r)));

async function produce(conn, ch) {
  const payload = payloadOf(a.size);
  const sock = conn.connection.stream;
  const before = (await ch.checkQueue(a.dest)).messageCount;
  const t0 = now();
  for (let sent = 0; sent < a.messages; ) {
    const b = Math.min(a.batch, a.messages - sent);
    sock.cork();
    let ok = true;
    for (let i = 0; i < b; i++) ok = ch.publish('', a.dest, payload, { persistent: true });
    sent += b;
    // Listen before yielding: the buffer may drain in the turn below.
    const drained = ok ? null : once(ch, 'drain');
    // amqplib hands frames to the socket from a setImmediate that it schedules on a
    // nextTick; uncork in a setImmediate scheduled after it, in the same loop turn.
    await afterMux();
    sock.uncork();
    if (drained) await drained;
  }
  const published = secondsSince(t0);
  let count = 0;
  for (;;) {
    count = (await ch.checkQueue(a.dest)).messageCount - before;
    if (count >= a.messages) break;
    await sleep(5);
  }
  const seconds = secondsSince(t0);
  if (count !== a.messages) throw new Error(`queue holds ${count} new messages, expected ${a.messages}`);
  report('produce', a.messages, a.messages * a.size, seconds, { batchSize: a.batch, publishedSeconds: published, countedByBroker: count });
}

async function consume(ch) {
  let n = 0;
  let bytes = 0;
  let t0;
  let done;
  const finished = new Promise((r) => (done = r));
  t0 = now();
  await ch.consume(
    a.dest,
    (msg) => {
      if (msg === null) return;
      n++;
      bytes += msg.content.length;
      if (n === a.messages) done(secondsSince(t0));
    },
    { noAck: true },
  );
  const seconds = await finished;
  report('consume', n, bytes, seconds, { ack: 'auto (noAck)' });
}
