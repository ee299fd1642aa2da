/** One module per Kafka API (docs/kafka-protocol.md has the table). */
export * from './api-versions.js';
export * from './create-topics.js';
export * from './fetch.js';
export * from './find-coordinator.js';
export * from './heartbeat.js';
export * from './join-group.js';
export * from './leave-group.js';
export * from './list-offsets.js';
export * from './metadata.js';
export * from './offset-commit.js';
export * from './offset-fetch.js';
export * from './produce.js';
export * from './sync-group.js';
