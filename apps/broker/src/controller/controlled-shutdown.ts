/**
 * A broker's controlled shutdown (docs/replication.md §15.2): before it closes its sockets and
 * logs, it asks the controller (found in `/controller`) with its broker epoch to move its
 * leaderships away, and asks again after `controlled.shutdown.retry.backoff.ms` while some are
 * left, at most `controlled.shutdown.max.retries` more times; then it stops anyway and logs what
 * it still leads. The controller's own broker asks its controller directly, through the event
 * queue.
 */
import { decodeControlledShutdownResponse, encodeControlledShutdownRequest, ErrorCode, errorCodeName, type ControlledShutdownResponse } from '@klog/protocol';
import { sleep } from '@klog/retry';
import { BrokerRegistry, ControllerRegistry, type ZkClient } from '@klog/zk-registry';
import type { Logger } from 'pino';
import type { BrokerConfig } from '../config.js';
import { BrokerConnection } from '../replication/broker-connection.js';
import type { Controller } from './controller.js';

/** What a controlled shutdown needs. */
export interface ControlledShutdownOptions {
  readonly zk: ZkClient;
  readonly controller: Controller;
  readonly config: Pick<BrokerConfig, 'brokerId' | 'controlledShutdownMaxRetries' | 'controlledShutdownRetryBackoffMs' | 'controllerRequestTimeoutMs'>;
  readonly logger: Logger;
}

/**
 * Runs the controlled shutdown of this broker. Never throws: a failure is logged and the broker stops anyway.
 * @returns true when the controller answered that nothing is left
 */
export async function controlledShutdown(o: ControlledShutdownOptions): Promise<boolean> {
  const brokers = new BrokerRegistry(o.zk);
  const controllers = new ControllerRegistry(o.zk);
  const me = o.config.brokerId;
  let last: ControlledShutdownResponse | undefined;
  for (let attempt = 0; attempt <= o.config.controlledShutdownMaxRetries; attempt++) {
    if (attempt > 0) await sleep(o.config.controlledShutdownRetryBackoffMs);
    try {
      const brokerEpoch = await brokers.getBrokerEpoch(me);
      if (brokerEpoch === undefined) {
        o.logger.warn({ brokerId: me }, 'controlled shutdown skipped: this broker is not registered');
        return false;
      }
      last = o.controller.active
        ? await o.controller.controlledShutdown(me, brokerEpoch, o.config.controllerRequestTimeoutMs)
        : await askController(o, brokers, controllers, brokerEpoch);
      if (last.errorCode === ErrorCode.None && last.remaining.length === 0) {
        o.logger.info({ brokerId: me, attempt }, 'controlled shutdown: this broker leads no partition any more');
        return true;
      }
      o.logger.warn(
        { brokerId: me, attempt, code: errorCodeName(last.errorCode), remaining: last.remaining.map((p) => `${p.topic}/${p.partition}`) },
        'controlled shutdown: partitions left; asking again',
      );
    } catch (err) {
      o.logger.warn({ brokerId: me, attempt, err }, 'controlled shutdown: could not reach the controller');
    }
  }
  o.logger.error(
    { brokerId: me, remaining: last?.remaining.map((p) => `${p.topic}/${p.partition}`), code: last === undefined ? undefined : errorCodeName(last.errorCode) },
    'controlled shutdown gave up; stopping while still leading these partitions',
  );
  return false;
}

/** One CONTROLLED_SHUTDOWN to the controller named in `/controller`. */
async function askController(
  o: ControlledShutdownOptions,
  brokers: BrokerRegistry,
  controllers: ControllerRegistry,
  brokerEpoch: number,
): Promise<ControlledShutdownResponse> {
  const info = await controllers.readController();
  if (info === undefined) return { errorCode: ErrorCode.NotController, remaining: [] };
  const address = await brokers.getBroker(info.brokerId);
  if (address === undefined) return { errorCode: ErrorCode.NotController, remaining: [] };
  // The controller waits up to controller.request.timeout.ms for the new leaders: give it that and as much again.
  const connection = new BrokerConnection({ host: address.host, port: address.port });
  try {
    const r = await connection.request(encodeControlledShutdownRequest({ brokerId: o.config.brokerId, brokerEpoch }), 2 * o.config.controllerRequestTimeoutMs);
    return decodeControlledShutdownResponse(r.errorCode, r.body);
  } finally {
    connection.close();
  }
}
