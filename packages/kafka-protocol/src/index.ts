/**
 * @klog/kafka-protocol: Apache Kafka's wire protocol at the Kafka 0.10 level, as klog's Kafka
 * listener speaks it (docs/kafka-protocol.md): request header v1, one codec module per API and
 * version, message sets of magic 0 and 1, error codes, and the mapping between Kafka messages
 * and klog messages. No I/O.
 */
export * from './api-keys.js';
export * from './codec.js';
export * from './errors.js';
export * from './header.js';
export * from './klog-bridge.js';
export * from './message-set.js';
export * from './requests/index.js';
