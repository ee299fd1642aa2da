/**
 * The mirror maker's metrics (docs/metrics.md), in a prom-client registry of its own, served in
 * the Prometheus text format on `--metrics-port` (`GET /metrics`). Read from each source's
 * {@link SourceMirror.stats} when scraped:
 *
 * | metric | kind | labels | what |
 * |---|---|---|---|
 * | `klog_mirror_messages_copied_total` | counter | source | messages the target acknowledged |
 * | `klog_mirror_messages_dropped_total` | counter | source | messages the `--drop-one-in` testing aid dropped |
 * | `klog_mirror_messages_in_flight` | gauge | source | messages sent and not yet acknowledged |
 * | `klog_mirror_gaps_total` | counter | source | ranges source retention deleted before they were mirrored |
 * | `klog_mirror_gap_bytes_total` | counter | source | bytes of source log in those ranges |
 * | `klog_mirror_lag_bytes` | gauge | source | bytes of the owned source partitions not yet taken (as of the last progress line, every `--stats-interval-ms`) |
 * | `klog_mirror_partition_lag_bytes` | gauge | source, topic, partition | per source partition (`<brokerId>-<partition>`; replicated: `<partition>`) |
 * | `process_*`, `nodejs_*` | | | prom-client's default metrics |
 */
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { MirrorStats } from './source-mirror.js';
import { replicatedBrokerId } from '@klog/client';

/** A source cluster and how to read its stats. */
export interface MirrorMetricsSource {
  readonly source: string;
  stats(): MirrorStats;
}

/** Creates the registry of a mirror maker copying from `sources`. */
export function mirrorMetrics(sources: readonly MirrorMetricsSource[]): Registry {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry });
  const bySource = (kind: 'counter' | 'gauge', name: string, help: string, read: (s: MirrorStats) => number): void => {
    const collect = function (this: Counter | Gauge): void {
      this.reset();
      for (const s of sources) {
        const v = read(s.stats());
        if (this instanceof Counter) this.inc({ source: s.source }, v);
        else this.set({ source: s.source }, v);
      }
    };
    if (kind === 'counter') new Counter({ name, help, labelNames: ['source'], registers: [registry], collect });
    else new Gauge({ name, help, labelNames: ['source'], registers: [registry], collect });
  };
  bySource('counter', 'klog_mirror_messages_copied_total', 'Messages the target acknowledged, by source cluster', (s) => s.copied);
  bySource('counter', 'klog_mirror_messages_dropped_total', 'Messages the --drop-one-in testing aid dropped, by source cluster', (s) => s.dropped);
  bySource('gauge', 'klog_mirror_messages_in_flight', 'Messages sent to the target and not yet acknowledged, by source cluster', (s) => s.inFlight);
  bySource('counter', 'klog_mirror_gaps_total', 'Ranges source retention deleted before they were mirrored, by source cluster', (s) => s.gaps);
  bySource('counter', 'klog_mirror_gap_bytes_total', 'Bytes of source log lost in gaps, by source cluster', (s) => s.gapBytes);
  bySource('gauge', 'klog_mirror_lag_bytes', 'Bytes of the owned source partitions not yet taken, as of the last progress line', (s) => s.partitions.reduce((n, p) => n + (p.lag ?? 0), 0));
  new Gauge({
    name: 'klog_mirror_partition_lag_bytes',
    help: 'Bytes of a source partition not yet taken, as of the last progress line',
    labelNames: ['source', 'topic', 'partition'],
    registers: [registry],
    collect() {
      this.reset();
      for (const s of sources) {
        for (const p of s.stats().partitions) if (p.lag !== null) this.set({ source: s.source, topic: p.topic, partition: p.brokerId === replicatedBrokerId ? String(p.partition) : `${p.brokerId}-${p.partition}` }, p.lag);
      }
    },
  });
  return registry;
}

/**
 * Serves `GET /metrics` of `registry` on `host:port`; any other path answers 404.
 * @param port 0 picks a free port
 * @returns the server and the port it listens on
 * @throws the listen error (e.g. EADDRINUSE)
 */
export async function serveMirrorMetrics(registry: Registry, host: string, port: number): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || new URL(req.url ?? '/', 'http://mirror').pathname !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try GET /metrics\n');
      return;
    }
    registry.metrics().then(
      (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${(err as Error).message}\n`),
    );
  });
  server.listen(port, host);
  await once(server, 'listening');
  const address = server.address();
  return { server, port: typeof address === 'object' && address ? address.port : port };
}
