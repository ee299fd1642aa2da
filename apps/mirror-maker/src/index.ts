/**
 * @klog/mirror-maker: copies topics of one or more source clusters into a target cluster
 * (the paper's analytics datacenter); `klog-mirror-maker` (main.ts) is its command line.
 */
export { MirrorMaker } from './mirror-maker.js';
export { SourceMirror, hasMetadata, targetRecord, type MirrorStats, type PartitionStats, type SourceMessage } from './source-mirror.js';
export { ConfigError, clusterIdentity, defaultMirrorConfig, readConfigFile, resolveConfig, topicFilter, type MirrorConfig } from './config.js';
export { PartitionProgress, partitionKey } from './progress.js';
export { TargetSender } from './target-sender.js';
export { mirrorMetrics, serveMirrorMetrics, type MirrorMetricsSource } from './metrics.js';
