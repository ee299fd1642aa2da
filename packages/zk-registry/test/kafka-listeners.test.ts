import { describe, expect, it } from 'vitest';
import { KafkaListenerRegistry, ZkError, kafkaListenerPath } from '../src/index.js';
import { connectClient, freshChroot, waitFor } from './helpers.js';

describe('Kafka listener registry', () => {
  it('registers each broker’s Kafka listener ephemerally and lists them by broker id', async () => {
    const connectString = freshChroot();
    const b2 = await connectClient(connectString);
    const b0 = await connectClient(connectString);
    const reader = new KafkaListenerRegistry(await connectClient(connectString));
    await new KafkaListenerRegistry(b2).register(2, 'kafka-2.local', 19094);
    await new KafkaListenerRegistry(b0).register(0, '::1', 19092);
    expect((await b0.getData(kafkaListenerPath(2)))?.data.toString()).toBe('kafka-2.local:19094');
    expect(await reader.list()).toEqual([
      { brokerId: 0, host: '::1', port: 19092 },
      { brokerId: 2, host: 'kafka-2.local', port: 19094 },
    ]);
    await expect(new KafkaListenerRegistry(b0).register(1, 'h', 70000)).rejects.toBeInstanceOf(ZkError);
    await b2.close();
    await waitFor(async () => (await reader.list()).length === 1);
    expect((await reader.list()).map((l) => l.brokerId)).toEqual([0]);
  });
});
