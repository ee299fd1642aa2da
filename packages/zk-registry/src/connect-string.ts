/**
 * Connect strings and znode paths as ZooKeeper spells them: `host:port[,host:port...][/chroot]`
 * (docs/architecture.md, "ZooKeeper").
 */
import { ZkError } from './errors.js';

/** The parts of a connect string `host:port[,host:port...][/chroot]`. */
export interface ParsedConnectString {
  /** `host:port[,host:port...]`. */
  readonly servers: string;
  /** The chroot path (`/a/b`), or undefined for the root. */
  readonly chroot: string | undefined;
}

/**
 * Splits a connect string into servers and chroot. A trailing `/` is dropped; `/` alone
 * means no chroot. Throws {@link ZkError} for an empty server list, a server that is not
 * `host[:port]` with a port in 1-65535, or a malformed chroot.
 */
export function parseConnectString(connectString: string): ParsedConnectString {
  const slash = connectString.indexOf('/');
  const servers = (slash < 0 ? connectString : connectString.slice(0, slash)).trim();
  let chroot = slash < 0 ? '' : connectString.slice(slash);
  while (chroot.endsWith('/')) chroot = chroot.slice(0, -1);
  const badServer = (s: string): boolean => {
    const m = /^(?:\[[^\]]+\]|[^:\s[\]]+)(?::(\d+))?$/.exec(s.trim());
    return m === null || (m[1] !== undefined && (Number(m[1]) < 1 || Number(m[1]) > 65535));
  };
  if (servers === '' || servers.split(',').some(badServer)) {
    throw new ZkError(`invalid ZooKeeper connect string ${JSON.stringify(connectString)}: expected host:port[,host:port...][/chroot] with ports 1-65535`);
  }
  if (chroot !== '' && chroot.split('/').slice(1).some((c) => c === '' || c === '.' || c === '..')) {
    throw new ZkError(`invalid chroot in ZooKeeper connect string ${JSON.stringify(connectString)}`);
  }
  return { servers, chroot: chroot === '' ? undefined : chroot };
}

/** The parent of a znode path (`/a/b` → `/a`, `/a` → `/`). */
export function parentPath(path: string): string {
  const i = path.lastIndexOf('/');
  return i <= 0 ? '/' : path.slice(0, i);
}

/** `parent` + `/` + `child`, without doubling the root's slash. */
export function joinPath(parent: string, child: string): string {
  return parent === '/' ? `/${child}` : `${parent}/${child}`;
}
