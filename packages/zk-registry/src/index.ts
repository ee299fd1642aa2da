/**
 * @klog/zk-registry: klog's ZooKeeper layer (docs/design.md §4).
 *
 * - {@link ZkClient}: the connection (chroot, retries, session renewal, re-armed watches).
 * - `paths`: every znode path klog uses.
 * - {@link BrokerRegistry}, {@link ConsumerRegistry}, {@link OwnershipRegistry},
 *   {@link OffsetRegistry}: typed reads and writes of each registry.
 * - Replication (docs/replication.md §3, §5.1): {@link ReplicatedTopicRegistry} (topic
 *   definitions, partition states, the leader's ISR write), {@link ControllerRegistry} (the
 *   election, fenced multis), {@link AdminRequestRegistry} (deletion and preferred-leader
 *   requests); {@link ZkClient.multi} underneath.
 *
 * Test helpers live in `@klog/zk-registry/testing`.
 */
export * from './errors.js';
export * from './paths.js';
export * from './zk-client.js';
export * from './broker-registry.js';
export * from './consumer-registry.js';
export * from './ownership.js';
export * from './offsets.js';
export * from './audit-ranges.js';
export * from './kafka-listeners.js';
export * from './replica-assignment.js';
export * from './replicated-values.js';
export * from './replicated-topics.js';
export * from './controller-registry.js';
export * from './admin-requests.js';
