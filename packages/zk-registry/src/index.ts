/**
 * @klog/zk-registry: klog's ZooKeeper layer (SPEC §4).
 *
 * - {@link ZkClient}: the connection (chroot, retries, session renewal, re-armed watches).
 * - `paths`: every znode path klog uses.
 * - {@link BrokerRegistry}, {@link ConsumerRegistry}, {@link OwnershipRegistry},
 *   {@link OffsetRegistry}: typed reads and writes of each registry.
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
