/**
 * Where each broker's Kafka listener is (docs/kafka-protocol.md, docs/format.md ZooKeeper
 * layout): ephemeral `/brokers/kafka/<brokerId>` = `<host>:<port>`, the address Kafka clients
 * are given in Metadata and FindCoordinator answers. A broker without `--kafka-port` has none.
 */
import { kafkaListenerPath, kafkaListenersPath, parseBrokerId } from './paths.js';
import { ZkError } from './errors.js';
import type { ZkClient } from './zk-client.js';

/** A live broker's Kafka listener. */
export interface KafkaListenerInfo {
  readonly brokerId: number;
  readonly host: string;
  readonly port: number;
}

/** Registers and lists the brokers' Kafka listeners. */
export class KafkaListenerRegistry {
  constructor(private readonly zk: ZkClient) {}

  /**
   * Registers broker `brokerId`'s Kafka listener (ephemeral, re-created after a session expiry).
   * @throws ZkError for an empty host or a port outside 1-65535
   */
  async register(brokerId: number, host: string, port: number): Promise<void> {
    if (host === '' || !Number.isInteger(port) || port < 1 || port > 65535) throw new ZkError(`invalid Kafka listener ${host}:${port}`);
    await this.zk.registerEphemeral(kafkaListenerPath(brokerId), `${host}:${port}`);
  }

  /** Every live Kafka listener, by ascending broker id; unreadable values are skipped. */
  async list(): Promise<KafkaListenerInfo[]> {
    const out: KafkaListenerInfo[] = [];
    const ids = (await this.zk.getChildren(kafkaListenersPath())).map(parseBrokerId).filter((id): id is number => id !== undefined);
    for (const brokerId of ids.sort((a, b) => a - b)) {
      const value = (await this.zk.getData(kafkaListenerPath(brokerId)))?.data.toString('utf8');
      const at = value?.lastIndexOf(':') ?? -1;
      const port = at > 0 ? Number(value!.slice(at + 1)) : NaN;
      if (port >= 1 && port <= 65535) out.push({ brokerId, host: value!.slice(0, at), port });
    }
    return out;
  }
}
