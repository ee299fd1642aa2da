/**
 * Carrying out a {@link Plan} (docs/replication.md §3.3, §5.3): its partition-state writes in
 * fenced multis of at most 100 partitions, each multi checked on the controller epoch, the view
 * updated after each multi that committed; then its LEADER_AND_ISR and STOP_REPLICA requests
 * handed to the request sender. Elections are counted and unclean ones logged at error (§12).
 */
import {
  ControllerRegistry,
  createPartitionStateOps,
  setPartitionStateOp,
  type ControllerLease,
  type ZkOp,
  type ZkOpResult,
} from '@klog/zk-registry';
import { sleep } from '@klog/retry';
import type { Logger } from 'pino';
import type { ControllerMetrics } from './controller-metrics.js';
import type { Plan, StateWrite } from './plan.js';
import { leaderAndIsrBody, stopReplicaBody, type LeaderAndIsrBody } from './requests.js';
import type { PartitionErrorsAnswer, RequestSender } from './request-sender.js';
import { parsePartitionKey } from './view.js';
import type { MutableView } from './zk-view.js';

/** Most partition writes in one multi (§3.3). */
export const maxPartitionWritesPerMulti = 100;

/** What applying needs. */
export interface ApplyContext {
  readonly registry: ControllerRegistry;
  readonly lease: ControllerLease;
  readonly view: MutableView;
  readonly sender: RequestSender;
  readonly metrics: ControllerMetrics;
  readonly logger: Logger;
  /** `controller.batch.delay.ms`: a wait between two multis (tests only, §17.7). */
  readonly batchDelayMs: number;
}

/** The answers of the requests of one plan, as they come (undefined: not sent). */
export interface SentRequests {
  readonly leaderAndIsr: readonly { readonly brokerId: number; readonly body: LeaderAndIsrBody; readonly answer: Promise<PartitionErrorsAnswer | undefined> }[];
  readonly stopReplica: readonly { readonly brokerId: number; readonly answer: Promise<PartitionErrorsAnswer | undefined> }[];
}

/**
 * Writes the plan's states, fenced, in batches.
 * @throws ControllerFencedError (resign); ZkMultiError when a state was not at the version the
 *   view had (the batches before it are written and in the view: read the states again and decide again)
 */
export async function writeStates(ctx: ApplyContext, plan: Plan): Promise<void> {
  const writes = plan.writes;
  for (let i = 0; i < writes.length; i += maxPartitionWritesPerMulti) {
    if (i > 0 && ctx.batchDelayMs > 0) await sleep(ctx.batchDelayMs);
    const batch = writes.slice(i, i + maxPartitionWritesPerMulti);
    const ops: ZkOp[] = [];
    const createsPartitionsNode = new Set<string>();
    const resultIndex: number[] = [];
    for (const w of batch) {
      const { topic, partition } = parsePartitionKey(w.key);
      if (w.expectedVersion === -1) {
        const withParent = !ctx.view.partitionsNode.has(topic) && !createsPartitionsNode.has(topic);
        if (withParent) createsPartitionsNode.add(topic);
        ops.push(...createPartitionStateOps(topic, [{ partition, state: w.state }], { createPartitionsNode: withParent }));
      } else {
        ops.push(setPartitionStateOp(topic, partition, w.state, w.expectedVersion));
      }
      resultIndex.push(ops.length - 1);
    }
    const results: ZkOpResult[] = await ctx.registry.commitFenced(ctx.lease, ops);
    for (const topic of createsPartitionsNode) ctx.view.partitionsNode.add(topic);
    batch.forEach((w, j) => {
      const r = results[resultIndex[j]!]!;
      ctx.view.partitions.set(w.key, { state: w.state, stateVersion: r.op === 'setData' ? r.stat.version : 0 });
      record(ctx, w);
    });
  }
}

/** Counts and logs one committed write. */
function record(ctx: ApplyContext, w: StateWrite): void {
  if (w.reason !== undefined) ctx.metrics.election(w.reason);
  if (w.uncleanFromIsr !== undefined) {
    ctx.metrics.uncleanElection();
    ctx.logger.error(
      { partition: w.key, oldIsr: w.uncleanFromIsr, newLeader: w.state.leader, leaderEpoch: w.state.leaderEpoch },
      'unclean leader election: the new leader was not in the ISR, and messages acknowledged by the old ISR may be lost',
    );
  } else if (w.reason !== undefined) {
    ctx.logger.info({ partition: w.key, leader: w.state.leader, leaderEpoch: w.state.leaderEpoch, isr: w.state.isr, reason: w.reason }, 'leader elected');
  } else if (w.state.leader === -1) {
    ctx.logger.warn({ partition: w.key, leaderEpoch: w.state.leaderEpoch, isr: w.state.isr }, 'partition offline: no ISR member can lead');
  }
}

/** Hands the plan's requests to the sender, built from the view as it is now (after the writes). */
export function sendRequests(ctx: ApplyContext, plan: Plan): SentRequests {
  const leaderAndIsr = [...plan.leaderAndIsr].map(([brokerId, keys]) => {
    const body = leaderAndIsrBody(ctx.view, keys);
    return { brokerId, body, answer: ctx.sender.leaderAndIsr(brokerId, body) };
  });
  const stopReplica = plan.stopReplicas.map((order) => ({
    brokerId: order.brokerId,
    answer: ctx.sender.stopReplica(order.brokerId, stopReplicaBody(ctx.view, order)),
  }));
  return { leaderAndIsr, stopReplica };
}
