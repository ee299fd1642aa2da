/**
 * Redis Streams with ioredis.
 * setup:   nothing (XADD creates the stream); PINGs the server.
 * produce: pipelines of B `XADD <dest> * d <payload>` (one field; a batch of B is one pipeline,
 *          one socket write; a batch of 1 is a plain XADD, not a pipeline); at most
 *          --max-in-flight messages sent and not yet answered. The
 *          clock stops when the last pipeline's replies are in (XADD replies after the append).
 * consume: `XREAD COUNT 1000 STREAMS <dest> <last id>` in a loop, one request at a time, until
 *          N messages.
 * latency: the fixed-rate probe of `klog perf latency` (lib/common.mjs latencyProbe): the
 *          messages due each ms as one pipeline of XADDs, read on a second connection with
 *          `XREAD BLOCK 0 COUNT 1000 STREAMS <dest> <last id>` from the stream's end ($).
 */
import Redis from 'ioredis';
import { args, deadline, latencyProbe, now, payloadOf, report, run, secondsSince } from '../lib/common.mjs';

const a = args();

run(async () => {
  const redis = new Redis({ host: '127.0.0.1', port: a.port, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
  await redis.connect();
  try {
    if (a.mode === 'setup') {
      await redis.ping();
      return;
    }
    if (a.mode === 'latency') await Promise.race([latency(redis), deadline(a.timeoutMs, 'latency')]);
    else if (a.mode === 'produce') await Promise.race([produce(redis), deadline(a.timeoutMs, 'produce')]);
    else await Promise.race([consume(redis), deadline(a.timeoutMs, 'consume')]);
  } finally {
    redis.disconnect();
  }
});

async function produce(redis) {
  const payload = payloadOf(a.size);
  const key = Buffer.from(a.dest);
  const field = Buffer.from('d');
  const window = []; // { upTo, replies }
  let acked = 0;
  const t0 = now();
  for (let sent = 0; sent < a.messages; ) {
    const b = Math.min(a.batch, a.messages - sent);
    let replies;
    if (b === 1) {
      replies = redis.xadd(key, '*', field, payload).then((id) => [[null, id]]);
    } else {
      const p = redis.pipeline();
      for (let i = 0; i < b; i++) p.xadd(key, '*', field, payload);
      replies = p.exec();
    }
    replies.catch(() => {});
    sent += b;
    window.push({ upTo: sent, replies });
    while (window.length > 0 && sent - acked > a.maxInFlight) {
      const w = window.shift();
      check(await w.replies);
      acked = w.upTo;
    }
  }
  for (const w of window.splice(0)) check(await w.replies);
  const seconds = secondsSince(t0);
  const count = await redis.xlen(a.dest);
  if (count < a.messages) throw new Error(`stream holds ${count} messages, expected ${a.messages}`);
  report('produce', a.messages, a.messages * a.size, seconds, { batchSize: a.batch });
}

function check(replies) {
  for (const [err] of replies) if (err) throw err;
}

async function consume(redis) {
  let n = 0;
  let bytes = 0;
  let last = '0-0';
  const t0 = now();
  while (n < a.messages) {
    const res = await redis.xreadBuffer('COUNT', 1000, 'STREAMS', a.dest, last);
    if (!res) continue;
    const entries = res[0][1];
    for (const [id, fields] of entries) {
      n++;
      bytes += fields[1].length;
      last = id;
    }
  }
  const seconds = secondsSince(t0);
  report('consume', n, bytes, seconds, { count: 1000 });
}

async function latency(redis) {
  const reader = new Redis({ host: '127.0.0.1', port: a.port, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false });
  await reader.connect();
  const key = Buffer.from(a.dest);
  const field = Buffer.from('d');
  let reading = true;
  try {
    const r = await latencyProbe(
      a,
      async (onMessage) => {
        let last = '$';
        (async () => {
          while (reading) {
            const res = await reader.xreadBuffer('BLOCK', 0, 'COUNT', 1000, 'STREAMS', a.dest, last).catch(() => null);
            if (!res) continue;
            for (const [id, fields] of res[0][1]) {
              onMessage(fields[1]);
              last = id;
            }
          }
        })();
      },
      (payloads) => {
        if (payloads.length === 1) return redis.xadd(key, '*', field, payloads[0]);
        const p = redis.pipeline();
        for (const v of payloads) p.xadd(key, '*', field, v);
        return p.exec();
      },
    );
    process.stdout.write(`${JSON.stringify({ ...r, consumer: 'XREAD BLOCK' })}\n`);
  } finally {
    reading = false;
    reader.disconnect();
  }
}
