import { afterEach, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Decoder, decodeMetadataResponse, encodeMetadataRequest } from '@klog/protocol';
import { ConfigError, readPropertiesFile, resolveConfig } from '../src/index.js';
import { WireClient, removeDir, spawnBroker, tempDir, type BrokerProcess } from './helpers.js';

const dirs: string[] = [];
let running: BrokerProcess | undefined;
afterEach(async () => {
  if (running && running.proc.exitCode === null) {
    running.proc.kill('SIGTERM');
    await running.exited;
  }
  running = undefined;
  for (const d of dirs.splice(0)) removeDir(d);
});

function propertiesFile(text: string): string {
  const dir = tempDir('klog-config-test-');
  dirs.push(dir);
  const file = join(dir, 'broker.properties');
  writeFileSync(file, text);
  return file;
}

describe('broker configuration', () => {
  it('reads a properties file with Kafka-style keys', () => {
    const file = propertiesFile(
      ['# a comment', 'broker.id = 4', 'log.dir=/var/klog', 'num.partitions: 3', 'retention.hours=2', 'segment.bytes=4096', 'zookeeper.connect=zk1:2181/klog'].join('\n'),
    );
    expect(readPropertiesFile(file)).toEqual({
      brokerId: 4,
      logDir: '/var/klog',
      numPartitions: 3,
      retentionMs: 2 * 3600 * 1000,
      segmentBytes: 4096,
      zookeeper: 'zk1:2181/klog',
    });
  });

  it('names the setting and the value when one is wrong', () => {
    expect(() => readPropertiesFile(propertiesFile('segment.bytes=lots'))).toThrow(/segment\.bytes: expected an integer >= 64, got "lots"/);
    expect(() => readPropertiesFile(propertiesFile('flush.messages=0'))).toThrow(/flush\.messages/);
    expect(() => readPropertiesFile(propertiesFile('port=70000'))).toThrow(/port 70000/);
    expect(() => readPropertiesFile(propertiesFile('segmnet.bytes=1'))).toThrow(/unknown setting "segmnet\.bytes"/);
    expect(() => readPropertiesFile('/nonexistent/broker.properties')).toThrow(ConfigError);
    expect(() => resolveConfig({})).toThrow(/log dir is required/);
  });

  it('reads flush.policy and flush.threads, group commit by default', () => {
    expect(resolveConfig({ logDir: '/x' })).toMatchObject({ flushPolicy: 'group', flushThreads: 4 });
    expect(readPropertiesFile(propertiesFile('flush.policy=interval\nflush.threads=8'))).toEqual({ flushPolicy: 'interval', flushThreads: 8 });
    expect(() => readPropertiesFile(propertiesFile('flush.policy=sometimes'))).toThrow(/flush\.policy: expected one of group, interval, got "sometimes"/);
    expect(() => readPropertiesFile(propertiesFile('flush.threads=0'))).toThrow(/flush\.threads: expected an integer >= 1/);
    expect(() => readPropertiesFile(propertiesFile('flush.threads=65'))).toThrow(/flush\.threads 65 is above 64/);
  });

  it('reads kafka.fetch.memory.bytes, 128 MiB by default', () => {
    expect(resolveConfig({ logDir: '/x' }).kafkaFetchMemoryBytes).toBe(128 * 1024 * 1024);
    expect(readPropertiesFile(propertiesFile('kafka.fetch.memory.bytes=4194304'))).toEqual({ kafkaFetchMemoryBytes: 4 * 1024 * 1024 });
    expect(() => readPropertiesFile(propertiesFile('kafka.fetch.memory.bytes=0'))).toThrow(/kafka\.fetch\.memory\.bytes: expected an integer >= 1/);
  });

  it('starts from --config, with flags taking precedence', async () => {
    const logDir = tempDir();
    dirs.push(logDir);
    const file = propertiesFile(`log.dir=${logDir}\nnum.partitions=3\nport=1\n`);
    running = await spawnBroker(['--config', file, '--num-partitions', '5']);
    expect(running.port).not.toBe(1);
    const c = await WireClient.connect(running.port);
    const r = await c.request(encodeMetadataRequest(['configured']));
    expect(decodeMetadataResponse(new Decoder(r.body))).toEqual([{ topic: 'configured', errorCode: 0, partitions: 5 }]);
    c.close();
  });

  it('exits 2 with one line on stderr for a bad config file', async () => {
    const file = propertiesFile('flush.ms=soon\n');
    await expect(spawnBroker(['--config', file])).rejects.toThrow(/exited with 2 before listening: klog-broker: .*flush\.ms: expected an integer >= 1, got "soon"\n$/);
  });

  // Node's recursive mkdir loops for ever at full CPU on such a path; the broker must not.
  it.runIf(process.platform === 'linux')('exits 1 with one line for a log dir that cannot be created', async () => {
    await expect(spawnBroker(['--port', '0', '--log-dir', '/proc/klog-no-such-dir'])).rejects.toThrow(
      /exited with 1 before listening: klog-broker: cannot create directory \/proc\/klog-no-such-dir: [^\n]*\n$/,
    );
  }, 15_000);
});
