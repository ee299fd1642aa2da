/**
 * @klog/broker: the klog broker (the paper §3, docs/design.md §3 and §6) as a library; `klog-broker`
 * (main.ts) is its command line.
 */
export { startBroker, type Broker } from './server.js';
export { ConfigError, defaultBrokerConfig, readPropertiesFile, resolveConfig, type BrokerConfig, type ReadPathSetting } from './config.js';
export { BrokerMetrics, serveMetrics } from './metrics.js';
