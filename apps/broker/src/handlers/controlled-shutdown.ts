/**
 * CONTROLLED_SHUTDOWN (docs/replication.md §6.5, §15.2): a broker about to stop asks the
 * controller to move its leaderships away. Served by the controller's event queue; a broker that
 * is not the controller answers NotController.
 */
import { encodeControlledShutdownResponse, ErrorCode, errorCodeName, type ControlledShutdownRequest } from '@klog/protocol';
import type { BrokerContext } from './context.js';

/** The framed CONTROLLED_SHUTDOWN response. */
export async function handleControlledShutdown(ctx: BrokerContext, request: ControlledShutdownRequest): Promise<Buffer> {
  const controller = ctx.controller;
  const response =
    controller === undefined
      ? { errorCode: ErrorCode.NotController, remaining: [] }
      : await controller.controlledShutdown(request.brokerId, request.brokerEpoch, ctx.config.controllerRequestTimeoutMs);
  if (response.errorCode !== ErrorCode.None) ctx.metrics.error(errorCodeName(response.errorCode));
  return encodeControlledShutdownResponse(response);
}
