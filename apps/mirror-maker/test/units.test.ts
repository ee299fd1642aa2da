/** The mirror maker's pure parts: configuration, acknowledged-prefix tracking, the resending sender. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import type { ZkProducer, ZkProducerRecord } from '@klog/client';
import { ConfigError, readConfigFile, resolveConfig, topicFilter } from '../src/config.js';
import { PartitionProgress } from '../src/progress.js';
import { hasMetadata, targetRecord, type SourceMessage } from '../src/source-mirror.js';
import { TargetSender } from '../src/target-sender.js';

const base = { sources: ['127.0.0.1:2181/a'], target: '127.0.0.1:2181/t', group: 'g' };

describe('configuration', () => {
  it('wants exactly one of whitelist and blacklist', () => {
    expect(() => resolveConfig({ ...base })).toThrow(ConfigError);
    expect(() => resolveConfig({ ...base, whitelist: 'a', blacklist: 'b' })).toThrow(/exactly one/);
    expect(resolveConfig({ ...base, whitelist: 'a.*' }).numStreams).toBe(1);
  });

  it('refuses to mirror a cluster into itself or a source twice', () => {
    expect(() => resolveConfig({ ...base, sources: ['127.0.0.1:2181/t/'], whitelist: 'x' })).toThrow(/into itself/);
    expect(() => resolveConfig({ ...base, sources: ['h1:1,h2:2/a', 'h2:2,h1:1/a'], whitelist: 'x' })).toThrow(/twice/);
    expect(() => resolveConfig({ ...base, whitelist: '(' })).toThrow(/--whitelist/);
  });

  it('matches whole topic names', () => {
    const white = topicFilter({ whitelist: 'clicks|views', auditTopic: '__audit' });
    expect(['clicks', 'views', 'clicks2', 'xviews'].filter(white)).toEqual(['clicks', 'views']);
    const black = topicFilter({ blacklist: 'secret-.*', auditTopic: '__audit' });
    expect(['secret-a', 'public', 'a-secret-b'].filter(black)).toEqual(['public', 'a-secret-b']);
  });

  it('never selects the audit topic, whatever the pattern', () => {
    expect(['__audit', 'a'].filter(topicFilter({ whitelist: '.*', auditTopic: '__audit' }))).toEqual(['a']);
    expect(['audit2', '__audit'].filter(topicFilter({ blacklist: 'x', auditTopic: 'audit2' }))).toEqual(['__audit']);
  });

  it('checks the audit settings', () => {
    expect(resolveConfig({ ...base, whitelist: 'x' })).toMatchObject({ auditWindowMs: 600_000, auditTopic: '__audit' });
    expect(resolveConfig({ ...base, whitelist: 'x', auditWindowMs: 0 }).auditWindowMs).toBe(0);
    expect(() => resolveConfig({ ...base, whitelist: 'x', auditWindowMs: 999 })).toThrow(/audit.window.ms 999/);
    expect(() => resolveConfig({ ...base, whitelist: 'x', auditTopic: 'a/b' })).toThrow(/audit.topic/);
  });

  it('reads properties and JSON files', () => {
    const dir = mkdtempSync(join(tmpdir(), 'klog-mirror-config-'));
    try {
      const props = join(dir, 'mirror.properties');
      writeFileSync(props, 'source.1=h:2181/a\nsource.2=h:2181/b\ntarget=h:2181/t\ngroup.id=m\nwhitelist=.*\nnum.streams=3\ncommit.interval.ms=250\n');
      expect(resolveConfig(readConfigFile(props))).toMatchObject({ sources: ['h:2181/a', 'h:2181/b'], target: 'h:2181/t', group: 'm', numStreams: 3, commitIntervalMs: 250 });
      const json = join(dir, 'mirror.json');
      writeFileSync(json, JSON.stringify({ sources: ['h:2181/a'], target: 'h:2181/t', group: 'm', blacklist: 'x', 'drop.one.in': 10 }));
      expect(resolveConfig(readConfigFile(json))).toMatchObject({ sources: ['h:2181/a'], blacklist: 'x', dropOneIn: 10 });
      writeFileSync(props, 'sourse=h:2181/a\n');
      expect(() => readConfigFile(props)).toThrow(/unknown setting sourse/);
      writeFileSync(props, 'num.streams=two\n');
      expect(() => readConfigFile(props)).toThrow(/num.streams/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('PartitionProgress', () => {
  it('commits only the acknowledged prefix, whatever the order of acknowledgements', () => {
    const p = new PartitionProgress('t', 0, 0);
    const [a, b, c] = [p.take(10), p.take(20), p.take(30)];
    expect(p.commitPosition()).toBeUndefined();
    p.ack(b);
    p.ack(c);
    expect(p.commitPosition()).toBeUndefined();
    expect(p.pending).toBe(3);
    p.ack(a);
    expect(p.commitPosition()?.nextOffset).toBe(30);
    expect(p.pending).toBe(0);
    p.committedOffset = 30;
    expect(p.commitPosition()).toBeUndefined();
  });
});

describe('metadata', () => {
  const m = { topic: 't', brokerId: 0, partition: 0, offset: 0, nextOffset: 20, payload: Buffer.from('v') };
  it('copies key, timestamp and host; a plain message stays plain', () => {
    expect(hasMetadata(m)).toBe(false);
    expect(targetRecord(m)).toEqual({ value: m.payload });
    const withMeta: SourceMessage = { ...m, key: Buffer.from('k'), timestamp: 5, host: 'h' };
    expect(hasMetadata(withMeta)).toBe(true);
    expect(targetRecord(withMeta)).toEqual({ value: m.payload, key: Buffer.from('k'), timestamp: 5, host: 'h' });
  });
});

/** A producer whose sends fail while `down` is true, recording what arrived. */
function fakeProducer() {
  const state = { down: false, arrived: [] as string[], attempts: 0 };
  const producer = {
    async send(_topic: string, records: readonly ZkProducerRecord[]) {
      state.attempts++;
      await new Promise((resolve) => setTimeout(resolve, Math.random() * 3));
      if (state.down) throw new Error('broker down');
      for (const r of records) state.arrived.push(String(r.value));
      return records.map(() => ({ topic: _topic, brokerId: 0, partition: 0 }));
    },
  } as unknown as ZkProducer;
  return { state, producer };
}

describe('TargetSender', () => {
  it('resends what failed and acknowledges each message once', async () => {
    const { state, producer } = fakeProducer();
    const sender = new TargetSender({ plain: producer, stamped: producer }, { maxInFlightMessages: 50, retryBackoffMs: 5, retryBackoffMaxMs: 20, dropOneIn: 0, logger: pino({ level: 'silent' }) });
    const acked: number[] = [];
    for (let i = 0; i < 400; i++) {
      if (i === 100) state.down = true;
      if (i === 100) setTimeout(() => (state.down = false), 100);
      await sender.submit({ topic: 't', record: { value: String(i) }, stamped: false, onAck: () => acked.push(i) });
    }
    expect(await sender.drain(5000)).toBe(true);
    expect(sender.retries).toBeGreaterThan(0);
    expect([...acked].sort((a, b) => a - b)).toEqual(Array.from({ length: 400 }, (_, i) => i));
    // Everything arrived (a message whose send failed arrives once it is resent).
    expect(new Set(state.arrived.map(Number)).size).toBe(400);
    expect(sender.outstanding).toBe(0);
  });

  it('drops one in N with the testing aid', async () => {
    const { state, producer } = fakeProducer();
    const sender = new TargetSender({ plain: producer, stamped: producer }, { maxInFlightMessages: 10, retryBackoffMs: 5, retryBackoffMaxMs: 20, dropOneIn: 10, logger: pino({ level: 'silent' }) });
    let acked = 0;
    for (let i = 0; i < 100; i++) await sender.submit({ topic: 't', record: { value: String(i) }, stamped: false, onAck: () => acked++ });
    await sender.drain(5000);
    expect(acked).toBe(100);
    expect(state.arrived).toHaveLength(90);
    expect(sender.dropped).toBe(10);
  });
});
