/**
 * @klog/client: talks to klog brokers. {@link Producer} sends records over a static broker list
 * (SPEC §5); {@link SimpleConsumer} fetches from one broker by offset and follows a partition
 * (SPEC §3); {@link Connection} is the framed request/response channel both use. Every error is
 * a {@link KlogError}.
 */
export * from './connection.js';
export * from './errors.js';
export * from './partitioner.js';
export * from './producer.js';
export * from './simple-consumer.js';
