/**
 * ActiveMQ over STOMP 1.2 with @stomp/stompjs on a TCP socket (@stomp/tcp-wrapper).
 * setup:   nothing (ActiveMQ creates the queue on first use); connects once to check the broker.
 * produce: SEND frames to /queue/<dest> with `persistent:true` and a binary body
 *          (content-length, so the broker stores a BytesMessage), no receipts. A batch of B is B
 *          SEND frames corked into one socket write; then the producer yields to the event loop
 *          (and waits for 'drain' while more than 4 MiB wait in the socket). The last SEND asks
 *          for a RECEIPT: the broker handles a connection's frames in order, so the receipt
 *          means every message has been taken in; the clock stops then.
 * consume: SUBSCRIBE with ack:auto and activemq.prefetchSize 1000, until N messages.
 * An ERROR frame from the broker or the connection closing fails the phase (a JSON line with
 * `error`, naming how many messages were sent or received by then).
 */
import { once } from 'node:events';
import { Client } from '@stomp/stompjs';
import { TCPWrapper } from '@stomp/tcp-wrapper';
import { args, deadline, now, payloadOf, report, run, secondsSince, tick } from '../lib/common.mjs';

const a = args();
const destination = `/queue/${a.dest}`;
const progress = { sent: 0, received: 0, over: false };

run(async () => {
  let wrapper;
  const client = new Client({
    webSocketFactory: () => (wrapper = new TCPWrapper('127.0.0.1', a.port)),
    connectHeaders: { host: 'localhost' },
    reconnectDelay: 0,
    heartbeatIncoming: 0,
    heartbeatOutgoing: 0,
  });
  const connected = new Promise((resolve, reject) => {
    client.onConnect = resolve;
    client.onStompError = (f) => reject(new Error(`STOMP error: ${f.headers.message} ${f.body}`));
    client.onWebSocketError = (e) => reject(new Error(`socket error: ${e?.message?.message ?? e?.message ?? e}`));
  });
  client.activate();
  await Promise.race([connected, deadline(30000, 'connect')]);
  // Once connected, an ERROR frame or the socket closing ends the phase with an error (else a
  // phase awaiting a receipt, a message or 'drain' would just stop with nothing left to run).
  const lost = new Promise((_, reject) => {
    client.onStompError = (f) => reject(new Error(`STOMP ERROR from the broker: ${f.headers.message ?? ''}${f.body ? ` ${f.body.split('\n')[0]}` : ''}`));
    client.onWebSocketClose = (e) => reject(new Error(`the broker closed the connection (${e?.wasClean === false ? 'with an error' : 'cleanly'})`));
    client.onWebSocketError = (e) => reject(new Error(`socket error: ${e?.message?.message ?? e?.message ?? e}`));
  }).catch((e) => {
    throw new Error(`${e.message}; ${progress.sent} messages sent, ${progress.received} received`);
  });
  lost.catch(() => {}); // raced below; not an unhandled rejection when it fires after the phase
  try {
    if (a.mode === 'setup') return;
    if (a.mode === 'produce') await Promise.race([produce(client, wrapper.socket), lost, deadline(a.timeoutMs, 'produce')]);
    else await Promise.race([consume(client), lost, deadline(a.timeoutMs, 'consume')]);
  } finally {
    progress.over = true; // a phase that failed or timed out reports nothing after all
    client.onWebSocketClose = () => {};
    await client.deactivate().catch(() => {});
  }
});

async function produce(client, sock) {
  const payload = payloadOf(a.size);
  const headers = { persistent: 'true' };
  const receipt = 'last-send';
  const received = new Promise((r) => client.watchForReceipt(receipt, r));
  const t0 = now();
  for (let sent = 0; sent < a.messages; ) {
    const b = Math.min(a.batch, a.messages - sent);
    sock.cork();
    for (let i = 0; i < b; i++) {
      const last = sent + i === a.messages - 1;
      client.publish({ destination, binaryBody: payload, headers: last ? { ...headers, receipt } : headers });
    }
    sock.uncork();
    sent += b;
    progress.sent = sent;
    if (sock.writableLength > 4 * 2 ** 20) await once(sock, 'drain');
    else await tick();
  }
  const published = secondsSince(t0);
  await received;
  const seconds = secondsSince(t0);
  if (progress.over) return;
  report('produce', a.messages, a.messages * a.size, seconds, { batchSize: a.batch, publishedSeconds: published });
}

async function consume(client) {
  let n = 0;
  let bytes = 0;
  let done;
  const finished = new Promise((r) => (done = r));
  const t0 = now();
  client.subscribe(
    destination,
    (msg) => {
      progress.received = ++n;
      bytes += msg.binaryBody.length;
      if (n === a.messages) done(secondsSince(t0));
    },
    { ack: 'auto', 'activemq.prefetchSize': '1000' },
  );
  const seconds = await finished;
  if (progress.over) return;
  report('consume', n, bytes, seconds, { ack: 'auto', prefetch: 1000 });
}
