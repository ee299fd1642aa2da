/**
 * @klog/audit: proves that nothing was lost between tiers (docs/audit.md). `klog-audit`
 * (main.ts) is its command line; the pieces are exported for programs that embed the audit.
 */
export { readAuditLog, type AuditLog } from './audit-log.js';
export { Cluster, parseClusterSpecs, scanPartition, type ClusterSpec, type TopicPartition } from './cluster.js';
export { countCluster, type CountOptions, type CountResult } from './cluster-counter.js';
export { renderHtmlReport } from './html-report.js';
export * from './reconcile.js';
export { describeDiscrepancy, formatTime, renderTable, summaryLine } from './table.js';
