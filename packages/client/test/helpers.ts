/** Test helpers: a real broker on 127.0.0.1 (port 0) over a temp log dir, with its logs silenced. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBroker } from '@klog/broker';

type BrokerSettings = Parameters<typeof startBroker>[0];
type BrokerLogger = NonNullable<Parameters<typeof startBroker>[1]>;

/** A logger that drops everything (any method is a no-op; child() returns itself). */
export const silentLogger: BrokerLogger = new Proxy(
  {},
  {
    get: (_t, prop) => {
      if (prop === 'level') return 'silent';
      if (prop === 'isLevelEnabled') return () => false;
      if (prop === 'child') return () => silentLogger;
      return () => {};
    },
  },
) as BrokerLogger;

export interface TestBroker {
  readonly host: string;
  readonly port: number;
  readonly address: string;
  readonly logDir: string;
  /** Stops the broker and removes its log dir. */
  stop(): Promise<void>;
}

/** Starts a broker on a fresh temp dir. */
export async function startTestBroker(settings: Partial<BrokerSettings> = {}): Promise<TestBroker> {
  const logDir = mkdtempSync(join(tmpdir(), 'klog-client-test-'));
  const broker = await startBroker({ host: '127.0.0.1', port: 0, ...settings, logDir }, silentLogger);
  return {
    host: broker.host,
    port: broker.port,
    address: `${broker.host}:${broker.port}`,
    logDir,
    stop: async () => {
      await broker.close();
      rmSync(logDir, { recursive: true, force: true });
    },
  };
}
