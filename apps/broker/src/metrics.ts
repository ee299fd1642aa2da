/**
 * The broker's metrics, kept in a prom-client registry of its own (one per broker, so several
 * brokers in one process do not share counters) and served in the Prometheus text format on
 * `--metrics-port` (see {@link serveMetrics}). The same registry is what the broker logs on
 * shutdown and what tests read. docs/metrics.md lists every metric.
 *
 * | metric | kind | labels | what |
 * |---|---|---|---|
 * | `klog_messages_in_total` | counter | topic | messages appended |
 * | `klog_bytes_in_total` | counter | topic | message-set bytes appended |
 * | `klog_bytes_out_total` | counter | topic | message-set bytes sent to consumers (FETCH, MULTIFETCH) |
 * | `klog_messages_out_estimated_total` | counter | topic | messages sent, estimated: bytes out × messages in / bytes in of the topic since start |
 * | `klog_fetch_responses_total` | counter | topic | fetch answers with data (one per partition of a MULTIFETCH) |
 * | `klog_requests_total` | counter | type | requests by request type name (Fetch, Produce, ...) |
 * | `klog_request_duration_seconds` | histogram | type | frame in to response ready (requests with a response; a long poll's wait included) |
 * | `klog_errors_total` | counter | code | error responses and rejected requests (fire-and-forget sets too; `DiskFull` for a full disk), by error code name |
 * | `klog_connections_open` | gauge | | client connections open |
 * | `klog_long_polls_waiting` | gauge | | fetches waiting at the log end for data |
 * | `klog_kafka_fetch_memory_bytes` | gauge | | bytes of Kafka fetch answers held in memory (`kafka.fetch.memory.bytes`) |
 * | `klog_flushes_total` | counter | result (ok, error) | log flushes (fdatasync rounds, docs/design.md §2) |
 * | `klog_flush_duration_seconds` | histogram | | time of each flush |
 * | `klog_partitions` | gauge | | partition logs on this broker |
 * | `klog_logs_size_bytes` | gauge | | bytes of all segments of all partitions |
 * | `klog_logs_segments` | gauge | | segment files of all partitions |
 * | `klog_logs_unflushed_bytes` | gauge | | bytes appended and not yet flushed, all partitions |
 * | `klog_log_end_offset` | gauge | topic, partition | end of everything appended (per partition: `/metrics?partitions=true`) |
 * | `klog_log_flushed_end_offset` | gauge | topic, partition | end visible to consumers (per partition) |
 * | `klog_log_size_bytes` | gauge | topic, partition | bytes of all segments (per partition) |
 * | `klog_log_segments` | gauge | topic, partition | segment files (per partition) |
 * | `klog_read_path` | gauge | path (sendfile, read-write) | 1 for the read path in use, else 0 |
 * | `klog_sendfile_eagain_total` | counter | | times a sendfile found the socket full and waited (process-wide) |
 * | `klog_crc_path` | gauge | path (native, js) | 1 for how message CRCs are checked (the CRC addon or JavaScript), else 0 |
 * | `process_*`, `nodejs_*` | | | prom-client's default metrics (CPU, memory, event loop lag, GC, handles) |
 *
 * The metrics of a leader and a follower of replicated partitions (docs/replication.md §15.3) are
 * in the same registry, kept by replication/replication-metrics.ts.
 *
 * The per-request and per-flush counters (messages and bytes in and out, fetch responses,
 * requests, request durations, flushes and their durations) are plain numbers on the request and
 * flush paths, copied into the exposition when the registry is read: a labelled prom-client `inc`
 * or `observe` costs about as much as checking a small message set (an observe about 850 ns).
 *
 * Per-partition gauges are served only when asked for (`GET /metrics?partitions=true`), written
 * straight as text with each partition's label string made once: at 5,000 partitions they are
 * 20,000 lines a scrape. The totals above are always served.
 *
 * Messages out are estimated, not counted: the read path sends segment bytes without reading
 * them (sendfile), so the broker does not know how many messages a fetch carried (Kafka's brokers
 * export bytes out, not messages out). Consumers count what they receive.
 */
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { crcSupport } from '@klog/protocol';
import { sendfileStats, type Log, type LogManager, type ReadPath } from '@klog/storage';
import { collectDefaultMetrics, Counter, Gauge, Registry, type Metric } from 'prom-client';

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
  readonly #requestDurations = new DurationHistogram('klog_request_duration_seconds', 'Time from a request frame to its response being ready, by request type (requests with a response)', durationBuckets, 'type');
  /** The logs, for the per-partition text. */
  readonly #logs: LogManager;
  /** `{topic="…",partition="…"}` of each log, made once. */
  readonly #labels = new WeakMap<Log, string>();
  readonly #errors = new Counter({ name: 'klog_errors_total', help: 'Error responses and rejected requests, by error code name', labelNames: ['code'], registers: [this.registry] });
  /** Fetches waiting now, on the long-poll path; `klog_long_polls_waiting` reads it at each scrape. */
  #longPollsWaiting = 0;
  /** Flushes by result, on the flush path; `klog_flushes_total` reads them at each scrape. */
  readonly #flushCounts = { ok: 0, error: 0 };
  readonly #flushSeconds = new DurationHistogram('klog_flush_duration_seconds', 'Duration of log flushes (fdatasync of the unflushed segments)', flushBuckets);

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
    new Counter({
      name: 'klog_messages_out_estimated_total',
      help: 'Messages sent to consumers, by topic, estimated from the bytes sent and the mean message size appended to the topic since start',
      labelNames: ['topic'],
      registers: [this.registry],
      collect(this: Counter) {
        this.reset();
        for (const [topic, t] of topics) if (t.bytesOut > 0 && t.bytesIn > 0) this.inc({ topic }, Math.round((t.bytesOut * t.messagesIn) / t.bytesIn));
      },
    });
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
    this.#logs = logs;
    this.registry.registerMetric(this.#requestDurations as unknown as Metric);
    collectDefaultMetrics({ register: this.registry, eventLoopMonitoringPrecision: eventLoopSampleMs });
    const total = (name: string, help: string, read: (log: Log) => number): void => {
      new Gauge({
        name,
        help,
        registers: [this.registry],
        collect() {
          let n = 0;
          for (const log of logs.logs()) n += read(log);
          this.set(n);
        },
      });
    };
    total('klog_partitions', 'Partition logs on this broker', () => 1);
    total('klog_logs_size_bytes', 'Bytes of all segments of all partitions', (log) => log.sizeInBytes);
    total('klog_logs_segments', 'Segment files of all partitions', (log) => log.segmentCount);
    total('klog_logs_unflushed_bytes', 'Bytes appended and not yet flushed, all partitions', (log) => log.logEndOffset - log.visibleEnd);
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
    this.#readAtScrape('klog_long_polls_waiting', 'Fetches waiting at the log end for data (long poll)', () => this.#longPollsWaiting);
    const flushCounts = this.#flushCounts;
    new Counter({
      name: 'klog_flushes_total',
      help: 'Log flushes, by result',
      labelNames: ['result'],
      registers: [this.registry],
      collect(this: Counter) {
        this.reset();
        this.inc({ result: 'ok' }, flushCounts.ok);
        if (flushCounts.error > 0) this.inc({ result: 'error' }, flushCounts.error);
      },
    });
    this.registry.registerMetric(this.#flushSeconds as unknown as Metric);
    logs.onFlushDone((e) => {
      if (e.error === undefined) flushCounts.ok++;
      else flushCounts.error++;
      this.#flushSeconds.observe('', e.durationMs / 1000);
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
    this.#longPollsWaiting += delta;
  }

  /** Counts one request of the given type name. */
  request(type: string): void {
    this.#requestCounts.set(type, (this.#requestCounts.get(type) ?? 0) + 1);
  }

  /** Records that a request of the given type name had its response ready `ms` after its frame arrived. */
  requestDone(type: string, ms: number): void {
    this.#requestDurations.observe(type, ms / 1000);
  }

  /** Serves `klog_connections_open` from `read` (the broker's set of connections). */
  countConnections(read: () => number): void {
    this.#readAtScrape('klog_connections_open', 'Client connections open', read);
  }

  /** Serves `klog_kafka_fetch_memory_bytes` from `read` (the Kafka listener's fetch memory, bytes held). */
  countKafkaFetchMemory(read: () => number): void {
    this.#readAtScrape('klog_kafka_fetch_memory_bytes', 'Bytes of Kafka fetch answers held in memory (kafka.fetch.memory.bytes)', read);
  }

  /** A gauge without labels whose value is `read()` at each scrape: nothing is done between scrapes. */
  #readAtScrape(name: string, help: string, read: () => number): void {
    new Gauge({
      name,
      help,
      registers: [this.registry],
      collect() {
        this.set(read());
      },
    });
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

  /**
   * The Prometheus text exposition of every metric.
   * @param options.partitions also the per-partition gauges (`klog_log_*{topic,partition}`)
   */
  async text(options: { partitions?: boolean } = {}): Promise<string> {
    const text = await this.registry.metrics();
    return options.partitions === true ? text + this.#partitionText() : text;
  }

  /** The per-partition gauges as exposition text, each log's label string made once. */
  #partitionText(): string {
    const logs = [...this.#logs.logs()];
    const labels = logs.map((log) => {
      let l = this.#labels.get(log);
      if (l === undefined) {
        l = `{topic="${escapeLabel(log.topic)}",partition="${log.partition}"}`;
        this.#labels.set(log, l);
      }
      return l;
    });
    let out = '';
    for (const [name, help, read] of partitionGauges) {
      out += `\n# HELP ${name} ${help}\n# TYPE ${name} gauge\n`;
      for (let i = 0; i < logs.length; i++) out += `${name}${labels[i]!} ${read(logs[i]!)}\n`;
    }
    return out;
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

/** The per-partition gauges: name, help, value. */
const partitionGauges: readonly (readonly [string, string, (log: Log) => number])[] = [
  ['klog_log_end_offset', 'End offset of everything appended, by partition', (log) => log.logEndOffset],
  ['klog_log_flushed_end_offset', 'End offset visible to consumers (flushed), by partition', (log) => log.visibleEnd],
  ['klog_log_size_bytes', 'Bytes of all segments, by partition', (log) => log.sizeInBytes],
  ['klog_log_segments', 'Segment files, by partition', (log) => log.segmentCount],
];

/** A label value escaped for the text format (backslash, double quote, newline). */
function escapeLabel(value: string): string {
  return value.replace(/[\\"\n]/g, (c) => (c === '\n' ? '\\n' : `\\${c}`));
}

/**
 * How often (ms) the event-loop delay behind `nodejs_eventloop_lag_*` is sampled: a timer that
 * wakes the idle broker each time. prom-client's default of 10 ms is 100 wake-ups a second, about
 * 45 ms of CPU per 10 s of an idle process on the benchmark machine (docs/benchmarks.md, latency);
 * at 100 ms it is 8 ms, and a stall of 100 ms or more is still always seen.
 */
const eventLoopSampleMs = 100;

/** Upper bounds (seconds) of the request duration buckets. */
const durationBuckets = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Upper bounds (seconds) of the flush duration buckets. */
const flushBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];

/**
 * A histogram by at most one label kept as plain numbers, registered as a prom-client metric:
 * an observe is a bucket scan and three additions (prom-client's own observe hashes its labels
 * each time), the exposition is made when the registry is read. Used on the request and flush
 * paths, which run once per request or flush.
 */
class DurationHistogram {
  readonly type = 'histogram';
  readonly aggregator = 'sum';
  readonly #byLabel = new Map<string, { buckets: Float64Array; sum: number; count: number }>();

  /**
   * @param buckets upper bounds in seconds, ascending
   * @param labelName the one label's name, or undefined for a histogram without labels
   */
  constructor(
    readonly name: string,
    readonly help: string,
    readonly buckets: readonly number[],
    readonly labelName?: string,
  ) {}

  /** Counts one duration of `seconds` under label value `label` ('' without a label). */
  observe(label: string, seconds: number): void {
    const bounds = this.buckets;
    let h = this.#byLabel.get(label);
    if (h === undefined) this.#byLabel.set(label, (h = { buckets: new Float64Array(bounds.length), sum: 0, count: 0 }));
    let i = 0;
    while (i < bounds.length && seconds > bounds[i]!) i++;
    if (i < bounds.length) h.buckets[i]!++;
    h.sum += seconds;
    h.count++;
  }

  /** The values as prom-client's histograms give them (cumulative buckets, then sum and count). */
  async get(): Promise<{ name: string; help: string; type: 'histogram'; aggregator: 'sum'; values: { value: number; labels: Record<string, string | number>; metricName: string }[] }> {
    const values: { value: number; labels: Record<string, string | number>; metricName: string }[] = [];
    const name = this.labelName;
    for (const [label, h] of this.#byLabel) {
      const labels: Record<string, string> = name === undefined ? {} : { [name]: label };
      let cumulative = 0;
      this.buckets.forEach((le, i) => {
        cumulative += h.buckets[i]!;
        values.push({ value: cumulative, labels: { le, ...labels }, metricName: `${this.name}_bucket` });
      });
      values.push({ value: h.count, labels: { le: '+Inf', ...labels }, metricName: `${this.name}_bucket` });
      values.push({ value: h.sum, labels, metricName: `${this.name}_sum` });
      values.push({ value: h.count, labels, metricName: `${this.name}_count` });
    }
    return { name: this.name, help: this.help, type: 'histogram', aggregator: 'sum', values };
  }

  reset(): void {
    this.#byLabel.clear();
  }
}

/**
 * Serves `GET /metrics` (Prometheus text format) on `host:port`, with the per-partition gauges
 * for `GET /metrics?partitions=true`; any other path answers 404.
 * @param port 0 picks a free port
 * @returns the server and the port it listens on
 * @throws the listen error (e.g. EADDRINUSE)
 */
export async function serveMetrics(metrics: BrokerMetrics, host: string, port: number): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://broker');
    if (req.method !== 'GET' || url.pathname !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: try GET /metrics (per partition: /metrics?partitions=true)\n');
      return;
    }
    metrics.text({ partitions: url.searchParams.get('partitions') === 'true' }).then(
      (body) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(body),
      (err: unknown) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${(err as Error).message}\n`),
    );
  });
  server.listen(port, host);
  await once(server, 'listening');
  const address = server.address();
  return { server, port: typeof address === 'object' && address ? address.port : port };
}
