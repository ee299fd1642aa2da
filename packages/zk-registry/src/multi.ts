/**
 * The multi recipe of klog's ZooKeeper client (docs/replication.md §3.3): several ops committed
 * as one ZooKeeper transaction, all applied or none, with the failure typed by op
 * ({@link ZkMultiError}). {@link ZkClient.multi} and {@link ZkClient.putIf} both run through
 * {@link commitMulti}; only zk-adapter.ts touches the library's transaction.
 */
import { ZkErrorCode, ZkMultiError } from './errors.js';
import { commitTransaction, type TransactionOp, type TransactionOpResult } from './zk-adapter.js';
import type { Invoke } from './zk-session.js';
import { rawCode, toBuffer, toStat, toZkError, type ZkMultiFailure, type ZkOp, type ZkOpResult } from './zk-types.js';

/** Runs one request with the client's retries (`SessionManager.request`). */
export type MultiRequest = <T>(what: string, path: string, invoke: Invoke<T>, retryOnExpiry: boolean, sessionId?: string) => Promise<T>;

/** ZooKeeper's error code by name, as {@link ZkMultiError.reason} gives it. */
export function multiFailure(code: number | undefined): ZkMultiFailure {
  switch (code) {
    case ZkErrorCode.badVersion:
      return 'BadVersion';
    case ZkErrorCode.nodeExists:
      return 'NodeExists';
    case ZkErrorCode.noNode:
      return 'NoNode';
    case ZkErrorCode.notEmpty:
      return 'NotEmpty';
    case ZkErrorCode.noChildrenForEphemerals:
      return 'NoChildrenForEphemerals';
    default:
      return 'Other';
  }
}

function toTransactionOp(o: ZkOp): TransactionOp {
  switch (o.op) {
    case 'create':
      return { op: 'create', path: o.path, data: toBuffer(o.data), ephemeral: o.mode === 'ephemeral' };
    case 'setData':
      return { op: 'setData', path: o.path, data: toBuffer(o.data), version: o.version };
    case 'remove':
      return { op: 'remove', path: o.path, version: o.version };
    case 'check':
      return { op: 'check', path: o.path, version: o.version };
  }
}

function toResult(o: ZkOp, raw: TransactionOpResult | undefined): ZkOpResult {
  if (o.op === 'setData') {
    if (raw?.stat === undefined) throw new Error('node-zookeeper-client gave no stat for a setData of a multi (see zk-adapter.ts)');
    return { op: 'setData', path: o.path, stat: toStat(raw.stat) };
  }
  return { op: o.op, path: o.path };
}

/**
 * Commits `ops` as one multi (see {@link ZkClient.multi} for the contract). A multi with an
 * ephemeral create, or with `sessionId`, is never carried over to another session.
 */
export async function commitMulti(request: MultiRequest, ops: readonly ZkOp[], sessionId?: string): Promise<ZkOpResult[]> {
  if (ops.length === 0) return [];
  const raw = ops.map(toTransactionOp);
  const retryOnExpiry = sessionId === undefined && !ops.some((o) => o.op === 'create' && o.mode === 'ephemeral');
  const label = ops.length === 1 ? ops[0]!.path : `${ops[0]!.path} (+${ops.length - 1})`;
  const outcome = await request<{ results: readonly TransactionOpResult[] } | { failed: number; error: unknown }>(
    'multi',
    label,
    (client, done) =>
      commitTransaction(client, raw, (error, failedOp, results) => {
        if (!error) done(null, { results: results ?? [] });
        else if (failedOp === undefined) done(error); // no answer (a lost connection): retried by the request
        else done(null, { failed: failedOp, error });
      }),
    retryOnExpiry,
    sessionId,
  );
  if ('failed' in outcome) {
    const op = ops[outcome.failed]!;
    const error = toZkError(outcome.error, `multi ${op.op}`, op.path);
    throw new ZkMultiError(outcome.failed, op, multiFailure(rawCode(error)), error);
  }
  return ops.map((o, i) => toResult(o, outcome.results[i]));
}
