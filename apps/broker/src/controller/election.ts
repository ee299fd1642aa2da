/**
 * Choosing a leader (docs/replication.md §5.4, §12): pure functions of a partition's replica
 * list, its state and which brokers can lead. No I/O.
 */
import type { PartitionStateValue } from './view.js';

/** Which brokers may take a role: live and not in controlled shutdown. */
export interface Eligibility {
  /** True when the broker is live (in `/brokers/ids`). */
  readonly isLive: (brokerId: number) => boolean;
  /** True when the broker is in controlled shutdown (§15.2). */
  readonly isShuttingDown: (brokerId: number) => boolean;
  /** Whether an unclean election is allowed for this partition's topic (§12). */
  readonly unclean: boolean;
}

/** The outcome of {@link electLeader}. */
export type Election =
  /** A leader: `isr` is the new ISR, `unclean` true when it was not in the ISR (§12). */
  | { readonly kind: 'leader'; readonly leader: number; readonly isr: readonly number[]; readonly unclean: boolean }
  /** No broker can lead: the partition goes (or stays) offline. */
  | { readonly kind: 'offline' };

/** True when `b` is live and not shutting down. */
export function canLead(b: number, e: Eligibility): boolean {
  return e.isLive(b) && !e.isShuttingDown(b);
}

/**
 * A new leader for a partition whose leader must change (§5.4):
 * - a `new` partition (no leader created its log, so it holds no message): the first eligible
 *   broker of the replica list, ISR `[it]`;
 * - otherwise the first broker of the replica list that is in the ISR and eligible, with the
 *   ISR less every broker not eligible;
 * - with none and `unclean`: the first eligible broker of the replica list, ISR `[it]`
 *   (`unclean` true);
 * - else offline.
 * `exclude` is never chosen (the broker being moved away from, one that lost its replica).
 */
export function electLeader(replicas: readonly number[], state: PartitionStateValue, e: Eligibility, exclude?: number): Election {
  const eligible = (b: number): boolean => b !== exclude && canLead(b, e);
  if (state.isNew) {
    const first = replicas.find(eligible);
    return first === undefined ? { kind: 'offline' } : { kind: 'leader', leader: first, isr: [first], unclean: false };
  }
  const clean = replicas.find((b) => state.isr.includes(b) && eligible(b));
  if (clean !== undefined) return { kind: 'leader', leader: clean, isr: orderedIsr(replicas, state.isr.filter(eligible)), unclean: false };
  if (e.unclean) {
    const any = replicas.find(eligible);
    if (any !== undefined) return { kind: 'leader', leader: any, isr: [any], unclean: true };
  }
  return { kind: 'offline' };
}

/** `isr` in replica-list order (members not in the list, which a well-formed state never has, last). */
export function orderedIsr(replicas: readonly number[], isr: readonly number[]): number[] {
  const inList = replicas.filter((b) => isr.includes(b));
  return [...inList, ...isr.filter((b) => !replicas.includes(b))];
}

/** The state after a controller write: the given fields, `leaderEpoch + 1`, this controller's epoch. */
export function nextState(
  state: PartitionStateValue,
  controllerEpoch: number,
  change: { leader?: number; isr?: readonly number[]; isNew?: boolean },
): PartitionStateValue {
  return {
    leader: change.leader ?? state.leader,
    leaderEpoch: state.leaderEpoch + 1,
    isr: change.isr ?? state.isr,
    controllerEpoch,
    isNew: change.isNew ?? state.isNew,
  };
}

/** True when two ISRs hold the same brokers in the same order. */
export function sameIsr(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}
