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
