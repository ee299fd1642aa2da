/** What every Kafka request handler works with. */
import type { BrokerContext } from '../handlers/index.js';
import type { HeldBytes, RequestMemory } from '../request-memory.js';
import type { PartitionEnds } from './ends.js';
import type { GroupCoordinator } from './groups/coordinator.js';
import type { ReadAhead } from './read-ahead.js';
import type { KafkaTopology } from './topology.js';

/** The Kafka listener's state, shared by its connections. */
export interface KafkaContext {
  /** The broker's logs, settings, logger and metrics. */
  readonly broker: BrokerContext;
  readonly topology: KafkaTopology;
  readonly ends: PartitionEnds;
  readonly groups: GroupCoordinator;
  /** Answers of next fetches read ahead. */
  readonly readAhead: ReadAhead;
  /** The broker-wide budget of fetch answer bytes held in memory (`kafka.fetch.memory.bytes`). */
  readonly fetchMemory: RequestMemory;
  /** What the connection's request being handled holds of {@link fetchMemory}. */
  readonly held: HeldBytes;
}

/** The listener's context before a connection adds its own {@link KafkaContext.held}. */
export type KafkaListenerContext = Omit<KafkaContext, 'held'>;

/**
 * A response that waits on something other than the connection's next request (a produce with
 * acks -1: a paper topic's flush, a replicated topic's high watermark): its request's effects are done (the sets appended), so the connection goes on
 * reading and handling the requests after it meanwhile, and writes every response in the order
 * of its request (docs/kafka-protocol.md, "Messages"). `response` rejects as the handler would
 * have thrown.
 */
export class LaterResponse {
  constructor(readonly response: Promise<Buffer>) {}
}
