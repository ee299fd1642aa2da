/**
 * The controller election and the controller epoch in ZooKeeper (docs/replication.md §5.1,
 * §3.3): `/controller` (ephemeral, JSON `{"version":1,"brokerId":…,"epoch":…,"timestampMs":…}`)
 * and `/controller-epoch` (persistent, the epoch in decimal).
 *
 * A broker that finds `/controller` missing reads `/controller-epoch` (`e` at version `v`,
 * missing: `e = 0`) and commits one multi: create `/controller` (ephemeral, epoch `e + 1`) and
 * set `/controller-epoch` to `e + 1` at version `v` (or create it as `1`). Exactly one broker
 * wins; the others fail on the create (`NodeExists`) or the version (`BadVersion`). The winner
 * holds a {@link ControllerLease}: its epoch and the version of `/controller-epoch` its write
 * produced, which every later write checks first ({@link fencedOps}), so a controller that was
 * replaced fails every write ({@link ControllerFencedError}).
 */
import { InvalidZkValueError, ZkError, ZkMultiError, ZkSessionExpiredError } from './errors.js';
import { JsonFields } from './json-fields.js';
import type { Logger } from '@klog/logger';
import { checkBrokerId, controllerEpochPath, controllerPath } from './paths.js';
import type { ZkClient, ZkOp, ZkOpResult, ZkWatch } from './zk-client.js';

/** Largest controller epoch: an int32 on the wire (LEADER_AND_ISR, §6.1). */
const maxEpoch = 0x7fffffff;

/** Election multis one {@link ControllerRegistry.elect} tries while `/controller` stays missing. */
const maxElectionAttempts = 10;

/** The value of `/controller`: who is controller, since when, at which epoch. */
export interface ControllerInfo {
  /** Broker id of the controller. */
  readonly brokerId: number;
  /** Its controller epoch (1, 2, …). */
  readonly epoch: number;
  /** When it won, ms since the epoch. */
  readonly timestampMs: number;
}

/**
 * What a broker holds once it won the election: pass it to every fenced write. `epochVersion`
 * is the data version of `/controller-epoch` its election wrote (the `check` at the head of
 * each fenced multi); `sessionId` the ZooKeeper session that holds `/controller`.
 */
export interface ControllerLease {
  readonly brokerId: number;
  readonly epoch: number;
  readonly epochVersion: number;
  readonly sessionId: string;
}

/**
 * The controller is no longer the controller: a fenced multi failed its epoch check (another
 * broker won and bumped the epoch) or its session is gone. Nothing of the multi was applied;
 * the controller resigns (§5.1).
 */
export class ControllerFencedError extends ZkError {
  constructor(
    /** The lease that was fenced. */
    readonly lease: ControllerLease,
    /** `epoch`: the epoch check failed; `session`: the lease's session expired. */
    readonly reason: 'epoch' | 'session',
    cause: ZkError,
  ) {
    super(
      reason === 'epoch'
        ? `controller epoch ${lease.epoch} of broker ${lease.brokerId} is fenced: /controller-epoch is no longer at version ${lease.epochVersion}`
        : `controller epoch ${lease.epoch} of broker ${lease.brokerId} is fenced: its ZooKeeper session ${lease.sessionId} ended`,
      { code: cause.code, path: controllerEpochPath(), cause },
    );
  }
}

/** The JSON of `/controller`, `version` 1. */
export function encodeControllerInfo(info: ControllerInfo): string {
  return JSON.stringify({ version: 1, brokerId: checkBrokerId(info.brokerId), epoch: info.epoch, timestampMs: info.timestampMs });
}

/** Parses the value of `/controller`. Throws {@link InvalidZkValueError}. */
export function parseControllerInfo(text: string, path: string = controllerPath()): ControllerInfo {
  const f: JsonFields = JsonFields.parse('controller', path, text);
  f.version1();
  return { brokerId: f.int('brokerId', 0), epoch: f.int('epoch', 1, maxEpoch), timestampMs: f.int('timestampMs', 0) };
}

/** Parses the value of `/controller-epoch`: a decimal integer 0..2^31-1. Throws {@link InvalidZkValueError}. */
export function parseControllerEpoch(text: string, path: string = controllerEpochPath()): number {
  const epoch = /^\d{1,10}$/.test(text.trim()) ? Number(text.trim()) : NaN;
  if (!(epoch >= 0 && epoch <= maxEpoch)) throw new InvalidZkValueError('controller epoch', path, text, 'must be a decimal integer in 0..2147483647');
  return epoch;
}

/**
 * `ops` with the lease's epoch check at their head (§3.3): `check /controller-epoch
 * <lease.epochVersion>`. Prefer {@link ControllerRegistry.commitFenced}, which also binds the
 * multi to the lease's session and types the failure.
 */
export function fencedOps(lease: ControllerLease, ops: readonly ZkOp[]): ZkOp[] {
  return [{ op: 'check', path: controllerEpochPath(), version: lease.epochVersion }, ...ops];
}

/** Runs the election and the controller's fenced writes (docs/replication.md §5.1, §3.3). */
export class ControllerRegistry {
  private readonly logger: Logger;

  constructor(
    private readonly zk: ZkClient,
    options: { logger?: Logger } = {},
  ) {
    this.logger = options.logger ?? zk.logger;
  }

  /**
   * The election for broker `brokerId` (§5.1). Returns the lease when it won, undefined when
   * `/controller` exists or another broker won the race (go back to watching
   * {@link watchController}), or when the session changed during the attempt. A multi refused
   * while `/controller` is still missing (the epoch moved under it: a winner that is already
   * gone) is tried again with the epoch read anew, since no change of `/controller` is left to
   * wake the watch. An attempt whose multi was applied but whose answer was lost (a retried
   * multi then fails) is recognised by reading `/controller` back: held by this session at the
   * epoch it asked for, it won.
   * @throws InvalidZkValueError when `/controller-epoch` does not parse (never guessed: no
   *   election until an operator fixes it)
   */
  async elect(brokerId: number, nowMs: number = Date.now()): Promise<ControllerLease | undefined> {
    checkBrokerId(brokerId);
    for (let attempt = 0; attempt < maxElectionAttempts; attempt++) {
      if ((await this.zk.exists(controllerPath())) !== undefined) return undefined;
      const outcome = await this.attempt(brokerId, nowMs);
      if (outcome !== 'again') return outcome;
    }
    this.logger.warn({ brokerId, attempts: maxElectionAttempts }, 'controller election kept losing the epoch race with no controller left; giving up this round');
    return undefined;
  }

  /** One election multi: the lease, undefined (lost to a live controller, or the session changed), or `again`. */
  private async attempt(brokerId: number, nowMs: number): Promise<ControllerLease | undefined | 'again'> {
    const sessionId = this.zk.sessionId;
    const current = await this.readControllerEpoch();
    const epoch = (current?.epoch ?? 0) + 1;
    if (epoch > maxEpoch) throw new ZkError(`controller epoch ${current?.epoch} cannot grow further`, { path: controllerEpochPath() });
    const ops: ZkOp[] = [
      { op: 'create', path: controllerPath(), data: encodeControllerInfo({ brokerId, epoch, timestampMs: nowMs }), mode: 'ephemeral' },
      current === undefined
        ? { op: 'create', path: controllerEpochPath(), data: String(epoch) }
        : { op: 'setData', path: controllerEpochPath(), data: String(epoch), version: current.version },
    ];
    let results: ZkOpResult[];
    try {
      results = await this.zk.multi(ops, { sessionId });
    } catch (error) {
      if (error instanceof ZkSessionExpiredError) return undefined;
      if (!(error instanceof ZkMultiError)) throw error;
      const lease = await this.ownElection(brokerId, epoch, sessionId);
      if (lease !== undefined) return lease;
      this.logger.debug({ brokerId, epoch, reason: error.reason, path: error.path }, 'controller election lost');
      return error.index === 1 ? 'again' : undefined;
    }
    const second = results[1]!;
    const epochVersion = second.op === 'setData' ? second.stat.version : 0;
    this.logger.info({ brokerId, epoch, epochVersion }, 'elected controller');
    return { brokerId, epoch, epochVersion, sessionId };
  }

  /**
   * Who is controller; undefined when nobody is.
   * @throws InvalidZkValueError when `/controller` does not parse
   */
  async readController(): Promise<ControllerInfo | undefined> {
    const node = await this.zk.getData(controllerPath());
    return node === undefined ? undefined : parseControllerInfo(node.data.toString('utf8'));
  }

  /**
   * The controller epoch and the data version of `/controller-epoch`; undefined before the first
   * election.
   * @throws InvalidZkValueError when the value does not parse
   */
  async readControllerEpoch(): Promise<{ readonly epoch: number; readonly version: number } | undefined> {
    const node = await this.zk.getData(controllerEpochPath());
    return node === undefined ? undefined : { epoch: parseControllerEpoch(node.data.toString('utf8')), version: node.stat.version };
  }

  /**
   * Calls back with the controller now and whenever `/controller` changes, until closed:
   * `present` false when the node is missing (then try {@link elect}); `info` undefined when it is
   * missing or does not parse (logged: someone holds it, so do not elect).
   */
  watchController(callback: (info: ControllerInfo | undefined, present: boolean) => void | Promise<void>): ZkWatch {
    return this.zk.watchData(controllerPath(), (data) => {
      if (data === undefined) return callback(undefined, false);
      try {
        return callback(parseControllerInfo(data.toString('utf8')), true);
      } catch (error) {
        if (!(error instanceof InvalidZkValueError)) throw error;
        this.logger.error({ err: error }, 'unreadable /controller');
        return callback(undefined, true);
      }
    });
  }

  /**
   * Commits `ops` as one multi fenced by the lease (§3.3): the epoch check first, in the lease's
   * session only. Returns the results of `ops` (the check's left out).
   * @throws ControllerFencedError when the epoch check failed or the session ended (resign);
   *   ZkMultiError when one of `ops` failed, with `index` into `ops` (e.g. `BadVersion` of a
   *   partition state: read it again and decide again)
   */
  async commitFenced(lease: ControllerLease, ops: readonly ZkOp[]): Promise<ZkOpResult[]> {
    try {
      return (await this.zk.multi(fencedOps(lease, ops), { sessionId: lease.sessionId })).slice(1);
    } catch (error) {
      if (error instanceof ZkSessionExpiredError) throw new ControllerFencedError(lease, 'session', error);
      if (!(error instanceof ZkMultiError)) throw error;
      if (error.index === 0) throw new ControllerFencedError(lease, 'epoch', error);
      throw new ZkMultiError(error.index - 1, error.op, error.reason, error.error);
    }
  }

  /**
   * Removes `/controller` if the lease's session holds it, as a controller that shuts down does
   * after its controlled shutdown (§5.1), so that the next one is elected at once. Returns
   * whether it was removed (false when another session holds it, or the lease's session ended).
   */
  async resign(lease: ControllerLease): Promise<boolean> {
    if (this.zk.sessionId !== lease.sessionId) return false;
    const removed = await this.zk.removeOwnEphemeral(controllerPath());
    if (removed) this.logger.info({ brokerId: lease.brokerId, epoch: lease.epoch }, 'resigned as controller');
    return removed;
  }

  /** The lease of an election whose multi was applied though its answer was lost; undefined when it lost. */
  private async ownElection(brokerId: number, epoch: number, sessionId: string): Promise<ControllerLease | undefined> {
    const node = await this.zk.getData(controllerPath());
    if (node === undefined || node.stat.ephemeralOwner !== sessionId) return undefined;
    let info: ControllerInfo;
    try {
      info = parseControllerInfo(node.data.toString('utf8'));
    } catch {
      return undefined;
    }
    if (info.brokerId !== brokerId || info.epoch !== epoch) return undefined;
    const current = await this.readControllerEpoch();
    if (current?.epoch !== epoch) return undefined;
    return { brokerId, epoch, epochVersion: current.version, sessionId };
  }
}
