/**
 * LEADER_AND_ISR (type 16) over a socket, from the controller
 * (docs/replication.md §6.1): handed to the replica manager, whose entry points the
 * controller also calls for its own broker.
 */
import { encodeLeaderAndIsrResponse, type LeaderAndIsrRequest } from '@klog/protocol';
import type { BrokerContext } from './context.js';

/** The framed LEADER_AND_ISR response, once every partition has taken its role. */
export async function handleLeaderAndIsr(ctx: BrokerContext, req: LeaderAndIsrRequest): Promise<Buffer> {
  return encodeLeaderAndIsrResponse(await ctx.replicas.handleLeaderAndIsr(req));
}
