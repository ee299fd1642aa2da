/**
 * The controller's metrics (docs/replication.md §15.3), in the broker's registry
 * (metrics.ts):
 *
 * | metric | kind | labels | what |
 * |---|---|---|---|
 * | `klog_active_controller` | gauge | | 1 on the controller, 0 elsewhere |
 * | `klog_controller_epoch` | gauge | | the highest controller epoch this broker has seen |
 * | `klog_offline_partitions` | gauge | | on the controller: partitions with no leader (0 elsewhere) |
 * | `klog_leader_elections_total` | counter | reason | on the controller: leader changes, by reason (failure, controlled-shutdown, preferred, new-topic) |
 * | `klog_unclean_leader_elections_total` | counter | | on the controller: unclean elections (§12) |
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ElectionReason } from './plan.js';

/** The controller's counters and gauges; one per broker. */
export class ControllerMetrics {
  readonly #active: Gauge;
  readonly #epoch: Gauge;
  readonly #elections: Counter;
  readonly #unclean: Counter;
  #highestEpoch = 0;
  #offline: () => number = () => 0;

  constructor(registry: Registry) {
    this.#active = new Gauge({ name: 'klog_active_controller', help: '1 on the controller, 0 elsewhere', registers: [registry] });
    this.#active.set(0);
    this.#epoch = new Gauge({ name: 'klog_controller_epoch', help: 'The highest controller epoch this broker has seen', registers: [registry] });
    this.#epoch.set(0);
    const offline = (): number => this.#offline();
    new Gauge({
      name: 'klog_offline_partitions',
      help: 'On the controller: replicated partitions with no leader',
      registers: [registry],
      collect() {
        this.set(offline());
      },
    });
    this.#elections = new Counter({ name: 'klog_leader_elections_total', help: 'On the controller: leader changes, by reason', labelNames: ['reason'], registers: [registry] });
    this.#unclean = new Counter({ name: 'klog_unclean_leader_elections_total', help: 'On the controller: unclean leader elections (a leader outside the ISR)', registers: [registry] });
  }

  /** Whether this broker is the controller; `offline` counts its offline partitions (read at each scrape). */
  setActive(active: boolean, offline: () => number = () => 0): void {
    this.#active.set(active ? 1 : 0);
    this.#offline = active ? offline : () => 0;
  }

  /** Records a controller epoch seen (in `/controller` or in a request); the gauge keeps the highest. */
  sawEpoch(epoch: number): void {
    if (epoch <= this.#highestEpoch) return;
    this.#highestEpoch = epoch;
    this.#epoch.set(epoch);
  }

  /** The highest controller epoch seen (0: none). */
  get highestEpoch(): number {
    return this.#highestEpoch;
  }

  /** Counts one leader change written by the controller. */
  election(reason: ElectionReason): void {
    this.#elections.inc({ reason });
  }

  /** Counts one unclean election (§12). */
  uncleanElection(): void {
    this.#unclean.inc();
  }
}
