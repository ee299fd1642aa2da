/** STOP_REPLICA (type 17) over a socket, from the controller (docs/replication.md §6.2): handed to the replica manager. */
import { encodeStopReplicaResponse, type StopReplicaRequest } from '@klog/protocol';
import type { BrokerContext } from './context.js';

/** The framed STOP_REPLICA response, once every partition has stopped. */
export async function handleStopReplica(ctx: BrokerContext, req: StopReplicaRequest): Promise<Buffer> {
  return encodeStopReplicaResponse(await ctx.replicas.handleStopReplica(req));
}
