/** What every request handler works with. */
import type { LogManager } from '@klog/storage';
import type { Logger } from 'pino';
import type { BrokerConfig } from '../config.js';
import type { BrokerMetrics } from '../metrics.js';

/** The broker's state shared by the request handlers. */
export interface BrokerContext {
  readonly config: BrokerConfig;
  /** Every partition log of this broker. */
  readonly logs: LogManager;
  readonly logger: Logger;
  readonly metrics: BrokerMetrics;
  /** Aborted when the broker shuts down; long-poll fetches stop waiting then. */
  readonly closing: AbortSignal;
}
