/**
 * The metrics of a broker as leader and follower of replicated partitions (docs/replication.md
 * §15.3), in the broker's registry (`BrokerMetrics.registry`, served on `/metrics`):
 *
 * | metric | kind | labels | what |
 * |---|---|---|---|
 * | `klog_partitions_led` | gauge | | replicated partitions this broker leads |
 * | `klog_under_replicated_partitions` | gauge | | partitions it leads whose ISR is smaller than their replica list |
 * | `klog_under_min_isr_partitions` | gauge | | partitions it leads whose ISR is smaller than `min.insync.replicas` |
 * | `klog_isr_shrinks_total`, `klog_isr_expands_total` | counter | | ISR changes written by this broker as leader |
 * | `klog_follower_lag_bytes` | gauge | topic, partition | as follower: the leader's log end minus its own, as of the last fetch |
 * | `klog_follower_lag_bytes_max` | gauge | | the largest of those |
 * | `klog_replica_fetch_errors_total` | counter | code | failed replica fetches and truncation requests, by error code name |
 * | `klog_truncated_bytes_total` | counter | | bytes cut from replica logs by truncation (docs/replication.md §10) |
 * | `klog_stale_replica_dirs` | gauge | | leftover replica directories renamed aside at start (docs/replication.md §8.1) |
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** What the gauges read at each scrape. */
export interface ReplicationGaugeSource {
  /** Counts over the partitions this broker leads. */
  leaderCounts(): { led: number; underReplicated: number; underMinIsr: number };
  /** The lag of each partition this broker follows (bytes). */
  followerLags(): Iterable<{ topic: string; partition: number; lagBytes: number }>;
}

/** The replication counters of one broker, and the gauges of its {@link ReplicationGaugeSource}. */
export class ReplicationMetrics {
  readonly #shrinks: Counter;
  readonly #expands: Counter;
  readonly #fetchErrors: Counter;
  readonly #truncated: Counter;
  #source: ReplicationGaugeSource | undefined;

  constructor(registry: Registry) {
    const registers = [registry];
    this.#shrinks = new Counter({ name: 'klog_isr_shrinks_total', help: 'ISR shrinks written by this broker as leader', registers });
    this.#expands = new Counter({ name: 'klog_isr_expands_total', help: 'ISR expands written by this broker as leader', registers });
    this.#fetchErrors = new Counter({ name: 'klog_replica_fetch_errors_total', help: 'Failed replica fetches, by error code name', labelNames: ['code'], registers });
    this.#truncated = new Counter({ name: 'klog_truncated_bytes_total', help: 'Bytes cut from replica logs by truncation against a leader', registers });
    const read = (): ReplicationGaugeSource | undefined => this.#source;
    const leader = (name: string, help: string, pick: (c: ReturnType<ReplicationGaugeSource['leaderCounts']>) => number): void => {
      new Gauge({
        name,
        help,
        registers,
        collect() {
          const s = read();
          this.set(s === undefined ? 0 : pick(s.leaderCounts()));
        },
      });
    };
    leader('klog_partitions_led', 'Replicated partitions this broker leads', (c) => c.led);
    leader('klog_under_replicated_partitions', 'Partitions this broker leads whose ISR is smaller than their replica list', (c) => c.underReplicated);
    leader('klog_under_min_isr_partitions', 'Partitions this broker leads whose ISR is smaller than min.insync.replicas', (c) => c.underMinIsr);
    new Gauge({
      name: 'klog_follower_lag_bytes',
      help: "As follower: the leader's log end minus this replica's, by partition",
      labelNames: ['topic', 'partition'],
      registers,
      collect() {
        this.reset();
        for (const l of read()?.followerLags() ?? []) this.set({ topic: l.topic, partition: String(l.partition) }, l.lagBytes);
      },
    });
    new Gauge({
      name: 'klog_follower_lag_bytes_max',
      help: 'The largest klog_follower_lag_bytes',
      registers,
      collect() {
        let max = 0;
        for (const l of read()?.followerLags() ?? []) max = Math.max(max, l.lagBytes);
        this.set(max);
      },
    });
  }

  /** Serves `klog_stale_replica_dirs` from `read` (the log manager's count). */
  countStaleReplicaDirs(registry: Registry, read: () => number): void {
    new Gauge({
      name: 'klog_stale_replica_dirs',
      help: 'Leftover replica directories renamed aside at start',
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  }

  /** Where the gauges read from (the replica manager). */
  setSource(source: ReplicationGaugeSource): void {
    this.#source = source;
  }

  /** Counts one ISR change written as leader. */
  isrChanged(kind: 'shrink' | 'expand'): void {
    (kind === 'shrink' ? this.#shrinks : this.#expands).inc();
  }

  /** Counts one failed replica fetch (or truncation request) by error code name. */
  replicaFetchError(code: string): void {
    this.#fetchErrors.inc({ code });
  }

  /** Counts bytes cut by a truncation. */
  truncated(bytes: number): void {
    if (bytes > 0) this.#truncated.inc(bytes);
  }
}
