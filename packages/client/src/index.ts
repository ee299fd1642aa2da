/**
 * @klog/client: talks to klog brokers. {@link Producer} sends records over a static broker list
 * (docs/design.md §5); {@link SimpleConsumer} fetches from one broker by offset and follows a partition
 * (docs/design.md §3); {@link Connection} is the framed request/response channel both use. Every error is
 * a {@link KlogError}. Replicated topics (docs/replication.md §13-§15): {@link Admin} creates,
 * describes and deletes them; both producers follow their leaders ({@link LeaderView}).
 */
export * from './connection.js';
export * from './errors.js';
export * from './partitioner.js';
export * from './producer.js';
export * from './simple-consumer.js';
export * from './zk-producer.js';
export * from './admin.js';
export { checkCreateTopic, partitionStatus } from './admin-checks.js';
export * from './leader-retry.js';
export * from './leader-view.js';
export { type BrokerPartitionState, type TopicPartitionsView } from './broker-partition-info.js';
export { type PartitionMeta, type SendResult } from './producer-pool.js';
export * from './group-consumer/index.js';
export * from './audit/index.js';
