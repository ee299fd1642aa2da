/**
 * Crash safety (docs/design.md §2): the broker is a child process killed with SIGKILL mid-burst, or its
 * last segment is damaged while it is down. Whatever was flushed survives, nothing corrupt is
 * served, and new produces land at the recovered log end.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { existsSync, readdirSync, readFileSync, statSync, truncateSync, writeFileSync, appendFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  AckLevel,
  Decoder,
  ErrorCode,
  OffsetTime,
  decodeFetchResponse,
  decodeOffsetsResponse,
  decodeProduceAckResponse,
  encodeFetchRequest,
  encodeMessageSet,
  encodeMultiProduceRequest,
  encodeOffsetsRequest,
  encodeProduceAckRequest,
  iterateMessageSet,
} from '@klog/protocol';
import { WireClient, removeDir, spawnBroker, tempDir, type BrokerProcess } from './helpers.js';

let dir: string;
let running: BrokerProcess | undefined;

beforeEach(() => {
  dir = tempDir('klog-crash-test-');
});
afterEach(async () => {
  if (running && running.proc.exitCode === null) {
    running.proc.kill('SIGKILL');
    await running.exited;
  }
  running = undefined;
  removeDir(dir);
});

async function boot(extra: string[] = []): Promise<{ b: BrokerProcess; c: WireClient }> {
  running = await spawnBroker(['--log-dir', dir, '--segment-bytes', '65536', '--flush-messages', '100', '--flush-ms', '20', ...extra]);
  return { b: running, c: await WireClient.connect(running.port) };
}

async function killHard(b: BrokerProcess): Promise<void> {
  b.proc.kill('SIGKILL');
  await b.exited;
}

/** Every message of partition 0 of `topic`, read through the broker; throws on any bad CRC. */
async function readAll(c: WireClient, topic: string): Promise<string[]> {
  const out: string[] = [];
  let offset = 0;
  for (;;) {
    const r = await c.request(encodeFetchRequest({ topic, partition: 0, offset, maxBytes: 32 * 1024 }));
    const f = decodeFetchResponse(r.code, new Decoder(r.body));
    expect(f.errorCode).toBe(ErrorCode.None);
    if (f.messages.length === 0) return out;
    for (const m of iterateMessageSet(f.messages, offset)) {
      out.push(m.message.payload.toString());
      offset = m.nextOffset;
    }
  }
}

async function logEnd(c: WireClient, topic: string): Promise<number> {
  const r = await c.request(encodeOffsetsRequest({ topic, partition: 0, time: OffsetTime.Latest, maxOffsets: 1 }));
  return decodeOffsetsResponse(new Decoder(r.body))[0]!;
}

function lastSegment(topic: string): string {
  const d = join(dir, `${topic}-0`);
  const files = readdirSync(d).filter((f) => f.endsWith('.kafka')).sort();
  return join(d, files[files.length - 1]!);
}

describe('broker crash recovery', () => {
  it('keeps every flushed message across 20 kill -9s during produce bursts', async () => {
    const acked: string[] = []; // messages the broker confirmed as flushed, in order
    const sentAcks: string[] = []; // every acknowledged-produce message sent, confirmed or not
    for (let round = 0; round < 20; round++) {
      const { b, c } = await boot();
      const stored = await readAll(c, 'burst');
      // Everything acknowledged as flushed is there, in order, as a subsequence of what is stored.
      let j = 0;
      for (const m of stored) if (m === acked[j]) j++;
      expect(j).toBe(acked.length);
      // After a kill there is no clean-shutdown marker: the last segments are scanned.
      if (round > 0) expect(b.logs.find((l) => l.msg === 'logs loaded')).toMatchObject({ cleanShutdown: false });
      // New produces land at the recovered end.
      const end = await logEnd(c, 'burst');
      // Burst: fire-and-forget sets interleaved with flushed acknowledged ones, killed at a random moment.
      const killAfterMs = 20 + Math.floor(Math.random() * 150);
      const killer = new Promise<void>((resolve) => setTimeout(() => void killHard(b).then(resolve), killAfterMs));
      let first = true;
      try {
        for (let k = 0; ; k++) {
          const body = Array.from({ length: 20 }, (_, i) => Buffer.from(`r${round}-b${k}-m${i}-${'x'.repeat(100)}`));
          const burst = encodeMessageSet(body);
          c.send(encodeMultiProduceRequest([{ topic: 'burst', partition: 0, messages: burst }]));
          const ackBody = [Buffer.from(`r${round}-ack${k}`)];
          sentAcks.push(ackBody[0]!.toString());
          const res = await c.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic: 'burst', partition: 0, messages: encodeMessageSet(ackBody) }] }));
          const result = decodeProduceAckResponse(new Decoder(res.body))[0]!;
          expect(result.errorCode).toBe(0);
          if (first) {
            expect(result.offset).toBe(end + burst.length);
            first = false;
          }
          acked.push(ackBody[0]!.toString());
        }
      } catch (err) {
        expect(String(err)).toMatch(/closed|ECONNRESET|EPIPE/);
      }
      await killer;
      c.close();
    }
    expect(acked.length).toBeGreaterThan(20);
    const { c } = await boot();
    const stored = (await readAll(c, 'burst')).filter((m) => m.includes('-ack'));
    // Every confirmed message is there in order; the only others are ones sent but killed before
    // their confirmation went out (flushed, but the answer was lost with the process).
    expect(stored.filter((m) => acked.includes(m))).toEqual(acked);
    const confirmedOrSent = new Set(sentAcks);
    expect(stored.every((m) => confirmedOrSent.has(m))).toBe(true);
    expect(new Set(stored).size).toBe(stored.length);
    c.close();
  }, 120_000);

  const lastMessageBytes = 10 + 'message 99'.length;
  /** [what, how, bytes of the segment's end that recovery must cut] */
  const damages: [string, (file: string) => void, number][] = [
    ['a flipped byte in the last message', (f) => {
      const b = readFileSync(f);
      b[b.length - 3]! ^= 0x5a;
      writeFileSync(f, b);
    }, lastMessageBytes],
    ['zero-filled garbage appended', (f) => appendFileSync(f, Buffer.alloc(4096)), 0],
    ['a length field of 0x7FFFFFFF', (f) => {
      const b = readFileSync(f);
      b.writeInt32BE(0x7fffffff, b.length - lastMessageBytes);
      writeFileSync(f, b);
    }, lastMessageBytes],
    ['a length field of -5', (f) => {
      const b = readFileSync(f);
      b.writeInt32BE(-5, b.length - lastMessageBytes);
      writeFileSync(f, b);
    }, lastMessageBytes],
    ['a torn last message', (f) => truncateSync(f, statSync(f).size - 4), lastMessageBytes - 4],
  ];

  for (const [name, damage, cutBytes] of damages) {
    it(`truncates the last segment at ${name} and serves the rest`, async () => {
      let { b, c } = await boot();
      const sent = Array.from({ length: 100 }, (_, i) => Buffer.from(`message ${i}`));
      const res = await c.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic: 'd', partition: 0, messages: encodeMessageSet(sent) }] }));
      expect(res.code).toBe(0);
      c.close();
      await killHard(b);
      const file = lastSegment('d');
      const before = statSync(file).size;
      damage(file);
      ({ b, c } = await boot());
      const stored = await readAll(c, 'd');
      const kept = cutBytes === 0 ? 100 : 99;
      expect(stored).toEqual(sent.slice(0, kept).map(String));
      expect(statSync(file).size).toBe(before - (cutBytes === 0 ? 0 : lastMessageBytes));
      const cut = b.logs.find((l) => String(l.msg).includes('truncat'));
      expect(cut, JSON.stringify(b.logs)).toBeDefined();
      // The next produce lands at the recovered end.
      const next = await c.request(encodeProduceAckRequest({ acks: AckLevel.Flushed, partitions: [{ topic: 'd', partition: 0, messages: encodeMessageSet([Buffer.from('after')]) }] }));
      expect(decodeProduceAckResponse(new Decoder(next.body))[0]!.offset).toBe(statSync(file).size - 15);
      c.close();
    });
  }

  it('flushes and writes the clean-shutdown marker on SIGTERM, exiting 0', async () => {
    const { b, c } = await boot(['--flush-messages', '100000', '--flush-ms', '600000']);
    const sent = Array.from({ length: 50 }, (_, i) => Buffer.from(`m${i}`));
    const res = await c.request(encodeProduceAckRequest({ acks: AckLevel.Appended, partitions: [{ topic: 's', partition: 0, messages: encodeMessageSet(sent) }] }));
    expect(res.code).toBe(0);
    b.proc.kill('SIGTERM');
    expect(await b.exited).toBe(0);
    expect(existsSync(join(dir, '.klog_cleanshutdown'))).toBe(true);
    const again = await boot();
    expect(await readAll(again.c, 's')).toEqual(sent.map(String));
    expect(existsSync(join(dir, '.klog_cleanshutdown'))).toBe(false);
    again.c.close();
  });

  it('refuses a second broker on the same log dir, and takes the dir over after a kill -9', async () => {
    const { b, c } = await boot();
    await expect(spawnBroker(['--log-dir', dir])).rejects.toThrow(new RegExp(`klog-broker: log dir .* is in use by process ${b.proc.pid}: one broker per log dir\\n$`));
    c.close();
    await killHard(b);
    const again = await boot();
    expect(again.b.logs.find((l) => l.msg === 'logs loaded')).toMatchObject({ cleanShutdown: false });
    again.c.close();
  });

  it('exits with a one-line error on a bad flag', async () => {
    await expect(spawnBroker(['--log-dir', dir, '--segment-bytes', 'lots'])).rejects.toThrow(/segment-bytes/);
  });
});
