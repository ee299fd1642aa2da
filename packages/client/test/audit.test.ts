/**
 * Audit events and counters (docs/audit.md): the event format, window cutting, the counter's
 * deltas and retries, and a producer with `audit` against a real broker.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  AuditCounter,
  type AuditEvent,
  type AuditRecord,
  decodeAuditEvent,
  defaultAuditTopic,
  encodeAuditEvent,
  Producer,
  SimpleConsumer,
  windowStartOf,
} from '../src/index.js';
import { startTestBroker, type TestBroker } from './helpers.js';

const event: AuditEvent = { v: 1, tier: 'producer', host: 'h1', instance: 'abc', seq: 3, topic: 'clicks', windowStart: 1_764_489_600_000, windowMs: 600_000, count: 12 };

describe('audit events', () => {
  it('round-trip through their JSON bytes', () => {
    expect(decodeAuditEvent(encodeAuditEvent(event))).toEqual(event);
    const consumerEvent: AuditEvent = { ...event, tier: 'consumer', group: 'klog-audit' };
    expect(decodeAuditEvent(encodeAuditEvent(consumerEvent))).toEqual(consumerEvent);
  });

  it.each([
    ['not JSON', Buffer.from('{oops')],
    ['not an object', Buffer.from('3')],
    ['another version', encodeAuditEvent({ ...event, v: 2 })],
    ['an unknown tier', Buffer.from(JSON.stringify({ ...event, tier: 'broker' }))],
    ['a bad topic', Buffer.from(JSON.stringify({ ...event, topic: 'a/b' }))],
    ['an unaligned window', Buffer.from(JSON.stringify({ ...event, windowStart: event.windowStart + 1 }))],
    ['a count of 0', Buffer.from(JSON.stringify({ ...event, count: 0 }))],
    ['a fractional count', Buffer.from(JSON.stringify({ ...event, count: 1.5 }))],
    ['no host', Buffer.from(JSON.stringify({ ...event, host: undefined }))],
    ['a window past the last date', Buffer.from(JSON.stringify({ ...event, windowStart: 9_000_000_000_000_000, windowMs: 1000 }))],
  ])('are refused with a RangeError when they have %s', (_what, bytes) => {
    expect(() => decodeAuditEvent(bytes)).toThrow(RangeError);
  });

  it('cut windows aligned to the epoch', () => {
    expect(windowStartOf(0, 1000)).toBe(0);
    expect(windowStartOf(999, 1000)).toBe(0);
    expect(windowStartOf(1000, 1000)).toBe(1000);
    expect(windowStartOf(1_764_489_612_345, 600_000)).toBe(1_764_489_600_000);
  });
});

describe('AuditCounter', () => {
  function counter(send: (topic: string, records: AuditRecord[]) => Promise<unknown>) {
    return new AuditCounter({ tier: 'mirror', windowMs: 1000, host: 'h', send });
  }
  const decode = (records: AuditRecord[]) => records.map((r) => decodeAuditEvent(r.value));

  it('publishes per (topic, window) deltas, numbered, and skips the audit topic', async () => {
    const sent: AuditRecord[][] = [];
    const c = counter(async (topic, records) => {
      expect(topic).toBe(defaultAuditTopic);
      sent.push(records);
    });
    c.count('a', 100);
    c.count('a', 900);
    c.count('a', 1000, 5);
    c.count('b', 100);
    c.count(defaultAuditTopic, 100);
    c.count('a', 9_000_000_000_000_000); // no window holds it
    c.count('a', -1);
    await c.publish();
    c.count('a', 950);
    await c.publish();
    await c.publish(); // nothing new: nothing sent
    expect(sent).toHaveLength(2);
    const first = decode(sent[0]!);
    expect(first.map((e) => [e.topic, e.windowStart, e.count, e.seq])).toEqual([
      ['a', 0, 2, 0],
      ['a', 1000, 5, 1],
      ['b', 0, 1, 2],
    ]);
    expect(sent[0]!.map((r) => r.key)).toEqual(['a', 'a', 'b']);
    expect(decode(sent[1]!).map((e) => [e.topic, e.windowStart, e.count, e.seq])).toEqual([['a', 0, 1, 3]]);
    expect(first.every((e) => e.tier === 'mirror' && e.host === 'h' && e.instance === c.instance && e.windowMs === 1000)).toBe(true);
    expect(c.counted).toBe(9);
    expect(c.outOfRange).toBe(2);
  });

  it('sends the events of a failed publish again, with the same numbers, before newer ones', async () => {
    const sent: AuditEvent[][] = [];
    let fail = true;
    const c = counter(async (_topic, records) => {
      sent.push(decode(records));
      if (fail) throw new Error('target down');
    });
    c.count('a', 10);
    await expect(c.publish()).rejects.toThrow('target down');
    expect(c.pendingEvents).toBe(1);
    fail = false;
    c.count('a', 20);
    await c.publish();
    expect(c.pendingEvents).toBe(0);
    expect(sent[1]!.map((e) => [e.seq, e.count])).toEqual([
      [0, 1],
      [1, 1],
    ]);
  });

  it('refuses windows under a second', () => {
    expect(() => new AuditCounter({ tier: 'producer', windowMs: 999, send: async () => {} })).toThrow(RangeError);
  });
});

describe('a producer with audit', () => {
  let broker: TestBroker;
  beforeAll(async () => {
    broker = await startTestBroker();
  });
  afterAll(async () => broker.stop());

  it('stamps creation times and publishes the counts of what it sent to the audit topic on close', async () => {
    const producer = new Producer({ brokerList: broker.address, acks: 2, metadataHost: 'producer-host', audit: { windowMs: 1000 } });
    const t0 = 1_700_000_000_000;
    await producer.send('events', [{ value: 'a', timestamp: t0 }, { value: 'b', timestamp: t0 + 999 }, { value: 'c', timestamp: t0 + 1000 }]);
    const before = Date.now();
    await producer.send('events', [{ value: 'now' }]);
    await producer.send('other', [{ value: 'x', timestamp: t0 }]);
    await producer.close();

    const consumer = new SimpleConsumer({ host: broker.host, port: broker.port });
    const stored = (await consumer.fetch({ topic: 'events', partition: 0, offset: 0, maxBytes: 1 << 20 })).messages;
    expect(stored.map((m) => m.timestamp)).toEqual([t0, t0 + 999, t0 + 1000, expect.any(Number)]);
    const stamped = stored[3]!.timestamp!;
    expect(stamped).toBeGreaterThanOrEqual(before);
    expect(stored.every((m) => m.host === 'producer-host')).toBe(true);

    const fetched = await consumer.fetch({ topic: defaultAuditTopic, partition: 0, offset: 0, maxBytes: 1 << 20 });
    const audit = fetched.messages.map((m) => decodeAuditEvent(m.payload));
    const counts = audit.map((e) => [e.tier, e.topic, e.windowStart, e.count]).sort();
    expect(counts).toEqual(
      [
        ['producer', 'events', t0, 2],
        ['producer', 'events', t0 + 1000, 1],
        ['producer', 'events', windowStartOf(stamped, 1000), 1],
        ['producer', 'other', t0, 1],
      ].sort(),
    );
    expect(audit.every((e) => e.host === 'producer-host')).toBe(true);
    await consumer.close();
  });
});
