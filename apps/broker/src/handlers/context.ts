/** What every request handler works with. */
import type { FileRegion, LogManager, ReadPath } from '@klog/storage';
import type { Logger } from 'pino';
import type { BrokerConfig } from '../config.js';
import type { BrokerMetrics } from '../metrics.js';
import type { Controller } from '../controller/controller.js';
import type { MetadataCache } from '../replication/metadata-cache.js';
import type { ReplicaManager } from '../replication/replica-manager.js';

/** The broker's state shared by the request handlers. */
export interface BrokerContext {
  readonly config: BrokerConfig;
  /** Every partition log of this broker. */
  readonly logs: LogManager;
  readonly logger: Logger;
  readonly metrics: BrokerMetrics;
  /** How the connections send segment regions (docs/design.md §3 read path), resolved at start. */
  readonly readPath: ReadPath;
  /** Aborted when the broker shuts down or the request's connection closes; long-poll fetches stop waiting then. */
  readonly closing: AbortSignal;
  /** The controller election and, while this broker wins it, the controller (docs/replication.md §5); undefined when standalone. */
  controller?: Controller;
  /** Replicated topics' leaders and ISRs as watched in ZooKeeper (docs/replication.md §13.1); undefined when standalone. */
  metadataCache?: MetadataCache;
  /** The replicated partitions of this broker and their roles (docs/replication.md §9). */
  readonly replicas: ReplicaManager;
}

/**
 * One piece of a response, sent in order: bytes built in memory, or a pinned range of a
 * segment file that the connection sends without copying it through JavaScript where it can,
 * then releases.
 */
export type ResponsePart = Buffer | FileRegion;
