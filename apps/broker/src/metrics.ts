/**
 * The broker's metrics, kept in a prom-client registry of its own (one per broker, so several
 * brokers in one process do not share counters) and served in the Prometheus text format on
 * `--metrics-port` (see {@link serveMetrics}). The same registry is what the broker logs on
 * shutdown and what tests read.
 *
 * | metric | kind | labels | what |
 * |---|---|---|---|
 * | `klog_messages_in_total` | counter | topic | messages appended |
 * | `klog_bytes_in_total` | counter | topic | message-set bytes appended |
 * | `klog_bytes_out_total` | counter | topic | message-set bytes sent to consumers (FETCH, MULTIFETCH) |
 * | `klog_fetch_responses_total` | counter | topic | fetch answers with data (one per partition of a MULTIFETCH) |
 * | `klog_requests_total` | counter | type | requests by request type name (Fetch, Produce, ...) |
 * | `klog_errors_total` | counter | code | error responses and produced sets not appended (`DiskFull` for a full disk), by error code name |
 * | `klog_flushes_total` | counter | result (ok, error) | log flushes (fdatasync rounds, SPEC §2) |
 * | `klog_flush_duration_seconds` | histogram | | time of each flush |
 * | `klog_log_end_offset` | gauge | topic, partition | end of everything appended |
 * | `klog_log_flushed_end_offset` | gauge | topic, partition | end visible to consumers |
 * | `klog_log_size_bytes` | gauge | topic, partition | bytes of all segments |
 * | `klog_log_segments` | gauge | topic, partition | segment files |
 * | `klog_read_path` | gauge | path (sendfile, read-write) | 1 for the read path in use, else 0 |
 * | `klog_sendfile_eagain_total` | counter | | times a sendfile found the socket full and waited (process-wide) |
 * | `klog_crc_path` | gauge | path (native, js) | 1 for how message CRCs are checked (the CRC addon or JavaScript), else 0 |
 *
 * The per-request counters (messages and bytes in and out, fetch responses, requests) are
 * plain numbers on the request path, copied into their prom-client counters when the registry
 * is read: a labelled `inc` costs about as much as checking a small message set.
 *
 * Messages out are not counted per message: the read path sends segment bytes without reading
 * them (sendfile), so the broker does not know how many messages a fetch carried, as in Kafka,
 * whose brokers export bytes out but not messages out. Consumers count what they receive.
 */
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { crcSupport } from '@klog/protocol';
import { sendfileStats, type Log, type LogManager, type ReadPath } from '@klog/storage';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';

/** What the broker counts per topic between scrapes (running totals). */
interface TopicCounts {
  messagesIn: number;
  bytesIn: number;
  bytesOut: number;
  fetchResponses: number;
}

/** The broker's counters and gauges. Create one per broker. */
export class BrokerMetrics {
  /** The registry every metric below lives in. */
  readonly registry = new Registry();
  /** Counts by topic and by request type, on the request path; the counters below read them at each scrape. */
  readonly #topics = new Map<string, TopicCounts>();
  readonly #requestCounts = new Map<string, number>();
  readonly #errors = new Counter({ name: 'klog_errors_total', help: 'Error responses and rejected requests, by error code name', labelNames: ['code'], registers: [this.registry] });
  readonly #longPolls = new Gauge({ name: 'klog_long_polls_waiting', help: 'Fetches waiting at the log end for data (long poll)', registers: [this.registry] });
  readonly #flushes = new Counter({ name: 'klog_flushes_total', help: 'Log flushes, by result', labelNames: ['result'], registers: [this.registry] });
  readonly #flushSeconds = new Histogram({
    name: 'klog_flush_duration_seconds',
    help: 'Duration of log flushes (fdatasync of the unflushed segments)',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [this.registry],
  });

  /**
   * Registers the counters read from `#topics` and `#requestCounts` when the registry is read
   * (`collect`), so the request path only adds to plain numbers.
   */
  #registerRequestCounters(): void {
    const topics = this.#topics;
    const byTopic = (name: string, help: string, read: (t: TopicCounts) => number): void => {
      new Counter({
        name,
        help,
        labelNames: ['topic'],
        registers: [this.registry],
        collect(this: Counter) {
          this.reset();
          for (const [topic, t] of topics) if (read(t) > 0) this.inc({ topic }, read(t));
        },
      });
    };
    byTopic('klog_messages_in_total', 'Messages appended, by topic', (t) => t.messagesIn);
    byTopic('klog_bytes_in_total', 'Message-set bytes appended, by topic', (t) => t.bytesIn);
    byTopic('klog_bytes_out_total', 'Message-set bytes sent to consumers, by topic', (t) => t.bytesOut);
    byTopic('klog_fetch_responses_total', 'Fetch answers carrying data, by topic (one per partition of a MULTIFETCH)', (t) => t.fetchResponses);
    const requests = this.#requestCounts;
    new Counter({
      name: 'klog_requests_total',
      help: 'Requests served, by request type',
      labelNames: ['type'],
      registers: [this.registry],
      collect(this: Counter) {
        this.reset();
        for (const [type, n] of requests) this.inc({ type }, n);
      },
    });
  }

  /**
   * @param readPath the read path the broker uses (exported as `klog_read_path`)
   * @param logs the broker's logs: their end offsets and sizes are read at each scrape, and
   *   their flushes counted and timed
   */
  constructor(
    readonly readPath: ReadPath,
    logs: LogManager,
  ) {
    this.#registerRequestCounters();
    const gauge = (name: string, help: string, read: (log: Log) => number): void => {
      new Gauge({
        name,
        help,
        labelNames: ['topic', 'partition'],
        registers: [this.registry],
        collect() {
          this.reset();
          for (const log of logs.logs()) this.set({ topic: log.topic, partition: String(log.partition) }, read(log));
        },
      });
    };
    gauge('klog_log_end_offset', 'End offset of everything appended, by partition', (log) => log.logEndOffset);
    gauge('klog_log_flushed_end_offset', 'End offset visible to consumers (flushed), by partition', (log) => log.visibleEnd);
    gauge('klog_log_size_bytes', 'Bytes of all segments, by partition', (log) => log.sizeInBytes);
    gauge('klog_log_segments', 'Segment files, by partition', (log) => log.segmentCount);
    const readPathGauge = new Gauge({ name: 'klog_read_path', help: 'The read path in use (1) and the other (0)', labelNames: ['path'], registers: [this.registry] });
    readPathGauge.set({ path: 'sendfile' }, readPath === 'sendfile' ? 1 : 0);
    readPathGauge.set({ path: 'read-write' }, readPath === 'read-write' ? 1 : 0);
    const crcPathGauge = new Gauge({ name: 'klog_crc_path', help: 'How message CRCs are computed (1) and the other way (0)', labelNames: ['path'], registers: [this.registry] });
    for (const path of ['native', 'js'] as const) crcPathGauge.set({ path }, crcSupport.path === path ? 1 : 0);
    new Counter({
      name: 'klog_sendfile_eagain_total',
      help: 'Times a sendfile found the socket full and waited for it (whole process)',
      registers: [this.registry],
      collect() {
        this.reset();
        this.inc(sendfileStats().eagain);
      },
    });
    logs.onFlushDone((e) => {
      this.#flushes.inc({ result: e.error === undefined ? 'ok' : 'error' });
      this.#flushSeconds.observe(e.durationMs / 1000);
    });
  }

  #topic(topic: string): TopicCounts {
    let t = this.#topics.get(topic);
    if (t === undefined) {
      t = { messagesIn: 0, bytesIn: 0, bytesOut: 0, fetchResponses: 0 };
      this.#topics.set(topic, t);
    }
    return t;
  }

  /** Counts `count` messages of `bytes` bytes appended to `topic`. */
  messagesIn(topic: string, count: number, bytes: number): void {
    const t = this.#topic(topic);
    t.messagesIn += count;
    t.bytesIn += bytes;
  }

  /** Counts one fetch answer of `bytes` message-set bytes from `topic`. */
  bytesOut(topic: string, bytes: number): void {
    const t = this.#topic(topic);
    t.bytesOut += bytes;
    t.fetchResponses++;
  }

  /** Counts a long-poll fetch starting (+1) or ending (−1) its wait. */
  longPollWaiting(delta: 1 | -1): void {
    this.#longPolls.inc(delta);
  }

  /** Counts one request of the given type name. */
  request(type: string): void {
    this.#requestCounts.set(type, (this.#requestCounts.get(type) ?? 0) + 1);
  }

  /** Counts one error of the given code name. */
  error(code: string): void {
    this.#errors.inc({ code });
  }

  /**
   * The current value of a counter or gauge for exactly these labels (0 when never set), e.g.
   * `value('klog_messages_in_total', { topic: 'events' })`.
   * @throws Error for a metric name this registry does not have
   */
  async value(name: string, labels: Record<string, string> = {}): Promise<number> {
    const metric = this.registry.getSingleMetric(name);
    if (metric === undefined) throw new Error(`no metric ${name}`);
    const { values } = await metric.get();
    const keys = Object.keys(labels);
    const hit = values.find((v) => {
      const l = v.labels as Record<string, string | number>;
      return Object.keys(l).length === keys.length && keys.every((k) => String(l[k]) === labels[k]);
    });
    return hit?.value ?? 0;
  }

  /** The Prometheus text exposition of every metric. */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  /** A plain-object snapshot for logging: metric name → `labels` → value (histograms as count and sum). */
  async toJSON(): Promise<Record<string, Record<string, number>>> {
    const out: Record<string, Record<string, number>> = {};
    for (const m of await this.registry.getMetricsAsJSON()) {
      const entries: Record<string, number> = {};
      for (const v of m.values) {
        const name = (v as { metricName?: string }).metricName ?? m.name;
        if (String(m.type) === 'histogram' && !name.endsWith('_count') && !name.endsWith('_sum')) continue;
        const labels = Object.entries(v.labels as Record<string, string | number>)
          .map(([k, x]) => `${k}=${x}`)
          .join(',');
        entries[name === m.name ? labels : `${name.slice(m.name.length + 1)}${labels ? `{${labels}}` : ''}`] = v.value;
      }
      if (Object.keys(entries).length > 0) out[m.name] = entries;
    }
    return out;
  }
}

/**
 * Serves `GET /metrics` (Prometheus text format) on `host:port`; any other path answers 404.
 * @param port 0 picks a free port
 * @returns the server and the port it listens on
 * @throws the listen error (e.g. EADDRINUSE)
 */
export async function serveMetrics(metrics: BrokerMetrics, host: string, port: number): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try GET /metrics\n');
      return;
    }
    metrics.text().then(
      (body) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(body),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${(err as Error).message}\n`),
    );
  });
  server.listen(port, host);
  await once(server, 'listening');
  const address = server.address();
  return { server, port: typeof address === 'object' && address ? address.port : port };
}
