/** Helpers of the leader-following tests: what a broker stored, read back with a SimpleConsumer. */
import { SimpleConsumer } from '../src/index.js';

/** Every value of `topic`/`partition` on the broker at `host:port`, up to its flushed end, in log order. */
export async function storedValues(at: { host: string; port: number }, topic: string, partition: number): Promise<string[]> {
  const c = new SimpleConsumer({ host: at.host, port: at.port });
  try {
    const end = await c.latestOffset(topic, partition);
    const out: string[] = [];
    let offset = 0;
    while (offset < end) {
      const r = await c.fetch({ topic, partition, offset, maxBytes: 1024 * 1024 });
      if (r.messages.length === 0) break;
      for (const m of r.messages) out.push(m.payload.toString());
      offset = r.nextOffset;
    }
    return out;
  } finally {
    await c.close();
  }
}
