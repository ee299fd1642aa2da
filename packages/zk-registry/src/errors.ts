import type { ZkMultiFailure, ZkOp } from './zk-types.js';

/**
 * Errors of the ZooKeeper layer. Every error is a {@link ZkError}; those that come from a
 * ZooKeeper reply carry ZooKeeper's error code and the path concerned.
 */

/** ZooKeeper's own error codes that klog tells apart (`KeeperException.Code`). */
export const ZkErrorCode = {
  connectionLoss: -4,
  operationTimeout: -7,
  noNode: -101,
  badVersion: -103,
  noChildrenForEphemerals: -108,
  nodeExists: -110,
  notEmpty: -111,
  sessionExpired: -112,
} as const;

/** Base class of every error thrown by @klog/zk-registry. */
export class ZkError extends Error {
  /** ZooKeeper's error code when the error is a ZooKeeper reply (see {@link ZkErrorCode}). */
  readonly code: number | undefined;
  /** The znode path concerned, when there is one (relative to the chroot). */
  readonly path: string | undefined;

  constructor(message: string, options: { code?: number; path?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = options.code;
    this.path = options.path;
  }

  /**
   * Whether the same request may succeed if tried again (the `retriable` flag of @klog/retry):
   * true for a lost connection or an operation timeout, and for the subclasses that say so.
   */
  get retriable(): boolean {
    return this.code === ZkErrorCode.connectionLoss || this.code === ZkErrorCode.operationTimeout;
  }
}

/** No ZooKeeper server of the connect string answered within the connect timeout. */
export class ZkConnectError extends ZkError {
  override get retriable(): boolean {
    return true;
  }
}

/** The node does not exist (ZooKeeper `NONODE`). */
export class ZkNoNodeError extends ZkError {}

/** The node already exists (ZooKeeper `NODEEXISTS`). */
export class ZkNodeExistsError extends ZkError {}

/** A conditional write saw another version (ZooKeeper `BADVERSION`). */
export class ZkBadVersionError extends ZkError {}

/**
 * The session ended while the operation ran and the operation cannot be carried over to a
 * new session (e.g. creating an ephemeral node that belongs to the old session).
 */
export class ZkSessionExpiredError extends ZkError {}

/** The operation did not complete within the client's operation timeout (connection lost too long). */
export class ZkTimeoutError extends ZkError {
  override get retriable(): boolean {
    return true;
  }
}

/** The client was closed. */
export class ZkClosedError extends ZkError {}

/** A name that would become a path component is not valid (empty, `.`, `..`, contains `/`, ...). */
export class InvalidNameError extends ZkError {
  constructor(
    /** What the name names: `topic`, `group`, `consumer id`, `broker id`, `partition`. */
    readonly kind: string,
    /** The rejected value. */
    readonly value: string,
    reason: string,
  ) {
    super(`invalid ${kind} ${JSON.stringify(value)}: ${reason}`);
  }
}

/**
 * A live broker already holds this broker id in `/brokers/ids/<id>` (docs/design.md §4): two brokers
 * must not share an id. Thrown at registration; the holder's registration value is given.
 */
export class BrokerIdInUseError extends ZkError {
  constructor(
    /** The broker id asked for. */
    readonly brokerId: number,
    /** The value of the existing registration, `<creatorId>:<host>:<port>`, if it could be read. */
    readonly holder: string | undefined,
    path: string,
  ) {
    super(
      `broker id ${brokerId} is already registered by a live broker` +
        (holder === undefined ? '' : ` (${holder})`) +
        `; choose another broker id or stop that broker`,
      { code: ZkErrorCode.nodeExists, path },
    );
  }
}

/**
 * A {@link ZkClient.multi} was refused: nothing of it was applied (docs/replication.md §3.3).
 * `index` and `op` name the op that failed, `reason` says why (`code` is ZooKeeper's code,
 * `path` the op's path), and `error` is the same failure as the single-op error class
 * ({@link ZkBadVersionError}, {@link ZkNodeExistsError}, {@link ZkNoNodeError}, ...).
 */
export class ZkMultiError extends ZkError {
  constructor(
    /** Index of the failed op in the ops given. */
    readonly index: number,
    /** The failed op. */
    readonly op: ZkOp,
    /** Why it failed. */
    readonly reason: ZkMultiFailure,
    /** The failure as the single-op error class. */
    readonly error: ZkError,
  ) {
    super(`ZooKeeper multi refused: op ${index} (${op.op} ${op.path}) failed with ${reason}${error.code === undefined ? '' : ` [${error.code}]`}`, {
      code: error.code,
      path: op.path,
      cause: error,
    });
  }
}

/**
 * The name of a paper topic is taken by a replicated topic: `/brokers/topics/<topic>` holds a
 * topic definition (docs/replication.md §3, "One namespace for topic names"). Thrown by
 * {@link BrokerRegistry.registerTopic}: a broker must not register (nor serve) a paper topic of
 * that name.
 */
export class TopicIsReplicatedError extends ZkError {
  constructor(
    /** The topic. */
    readonly topic: string,
    path: string,
  ) {
    super(`topic ${topic} is a replicated topic: it cannot be created or registered as a paper topic`, { path });
  }
}

/**
 * `/brokers/topics/<topic>` exists already: a replicated topic cannot be created with that name
 * (docs/replication.md §3, §15.1). `kind` tells a replicated topic (with its partition count,
 * when its definition reads) from a paper topic.
 */
export class TopicExistsError extends ZkError {
  constructor(
    /** The topic. */
    readonly topic: string,
    /** What holds the name. */
    readonly kind: 'replicated' | 'paper',
    /** Partition count of the existing replicated topic, when its definition could be read. */
    readonly partitions: number | undefined,
    path: string,
  ) {
    const what = kind === 'paper' ? 'a paper topic' : partitions === undefined ? 'replicated' : `replicated, ${partitions} partition${partitions === 1 ? '' : 's'}`;
    super(`topic ${topic} already exists (${what})`, { code: ZkErrorCode.nodeExists, path });
  }
}

/**
 * A znode holds a value that does not parse as what its path says it is (a topic definition, a
 * partition state, the controller, the controller epoch, an admin request:
 * docs/replication.md §3.1). Readers never guess: they log it and treat the thing as absent or
 * offline, as their docstrings say.
 */
export class InvalidZkValueError extends ZkError {
  constructor(
    /** What the value should be, e.g. `partition state`. */
    readonly kind: string,
    path: string,
    /** The value as read (UTF-8). */
    readonly value: string,
    /** What is wrong with it. */
    readonly reason: string,
  ) {
    super(`invalid ${kind} at ${path}: ${reason}`, { path });
  }
}
