/**
 * The part of node-zookeeper-client 1.1 that klog uses (the package ships no types).
 * Internal to @klog/zk-registry: nothing here appears in the package's public types.
 */
declare module 'node-zookeeper-client' {
  import type { EventEmitter } from 'node:events';
  import type { Socket } from 'node:net';

  namespace zookeeper {
    /** A ZooKeeper error as the library reports it; `code` is ZooKeeper's error code. */
    interface Exception extends Error {
      code: number;
      path?: string;
      getCode(): number;
      getName(): string;
    }

    /** Stat of a znode; int64 fields come as 8-byte big-endian buffers. */
    interface Stat {
      czxid: Buffer;
      mzxid: Buffer;
      ctime: Buffer;
      mtime: Buffer;
      version: number;
      cversion: number;
      aversion: number;
      ephemeralOwner: Buffer;
      dataLength: number;
      numChildren: number;
      pzxid: Buffer;
    }

    interface WatchEvent {
      type: number;
      name: string;
      path: string;
      getType(): number;
      getName(): string;
      getPath(): string;
    }

    interface State {
      name: string;
      code: number;
      getName(): string;
      getCode(): number;
    }

    type Watcher = (event: WatchEvent) => void;
    type Callback<T> = (error: Exception | null, result: T) => void;

    interface ClientOptions {
      sessionTimeout?: number;
      spinDelay?: number;
      retries?: number;
      sessionId?: Buffer;
      sessionPassword?: Buffer;
    }

    /**
     * The connection manager is private to the library; klog tunes its reconnect delay and
     * guards its frame parser (see `guardFrameParser` in zk-client.ts).
     */
    interface ConnectionManager extends EventEmitter {
      spinDelay: number;
      socket?: Socket;
      /** Bytes of a response frame not parsed yet. */
      pendingBuffer: Buffer | null;
      /** The socket 'data' handler; bound when each socket is created. */
      onSocketData(buffer: Buffer): void;
    }

    interface Client extends EventEmitter {
      connectionManager: ConnectionManager;
      connect(): void;
      close(): void;
      getState(): State;
      getSessionId(): Buffer;
      getSessionPassword(): Buffer;
      getSessionTimeout(): number;
      create(path: string, data: Buffer | undefined, mode: number, callback: Callback<string>): void;
      remove(path: string, version: number, callback: (error: Exception | null) => void): void;
      setData(path: string, data: Buffer, version: number, callback: Callback<Stat>): void;
      getData(path: string, callback: (error: Exception | null, data: Buffer | undefined, stat: Stat) => void): void;
      getData(
        path: string,
        watcher: Watcher,
        callback: (error: Exception | null, data: Buffer | undefined, stat: Stat) => void,
      ): void;
      exists(path: string, callback: Callback<Stat | null>): void;
      exists(path: string, watcher: Watcher, callback: Callback<Stat | null>): void;
      getChildren(path: string, callback: (error: Exception | null, children: string[], stat: Stat) => void): void;
      getChildren(
        path: string,
        watcher: Watcher,
        callback: (error: Exception | null, children: string[], stat: Stat) => void,
      ): void;
    }
  }

  interface ZooKeeperModule {
    createClient(connectionString: string, options?: zookeeper.ClientOptions): zookeeper.Client;
    CreateMode: { PERSISTENT: number; EPHEMERAL: number; PERSISTENT_SEQUENTIAL: number; EPHEMERAL_SEQUENTIAL: number };
    Exception: {
      OK: number;
      CONNECTION_LOSS: number;
      OPERATION_TIMEOUT: number;
      NO_NODE: number;
      NODE_EXISTS: number;
      NOT_EMPTY: number;
      BAD_VERSION: number;
      SESSION_EXPIRED: number;
      NO_CHILDREN_FOR_EPHEMERALS: number;
    };
    Event: { NODE_CREATED: number; NODE_DELETED: number; NODE_DATA_CHANGED: number; NODE_CHILDREN_CHANGED: number };
    State: {
      DISCONNECTED: zookeeper.State;
      SYNC_CONNECTED: zookeeper.State;
      AUTH_FAILED: zookeeper.State;
      CONNECTED_READ_ONLY: zookeeper.State;
      EXPIRED: zookeeper.State;
    };
  }

  const zookeeper: ZooKeeperModule;
  export default zookeeper;
  export type Client = zookeeper.Client;
  export type Stat = zookeeper.Stat;
  export type Exception = zookeeper.Exception;
  export type WatchEvent = zookeeper.WatchEvent;
  export type State = zookeeper.State;
}
