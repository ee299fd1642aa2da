/**
 * The three-node clusters of the replication phase (README.md, "Replication"), each node a
 * child process in its own process group on 127.0.0.1, in its own temp data dir, stopped as
 * servers.mjs stops a single broker:
 *   - klog: three brokers (ids 0, 1, 2) over ZooKeeper, under a chroot of their own; the
 *     ZooKeeper given (default 127.0.0.1:2181) or, when none answers there, one started with
 *     scripts/zookeeper.sh on a free port and stopped with the cluster;
 *   - NATS JetStream: three nats-servers routed to each other (one cluster name, server names
 *     `klogbench-<client port>`, so that a stream's leader names its own port).
 * Each start resolves with `{ name, version, ports, dataDir, logFile, pgids, stop() }` once
 * every node accepts TCP connections.
 */
import { execFile, execFileSync } from 'node:child_process';
import { connect } from 'node:net';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { debVersion, freePort, launch, stopChild, track, waitForPort } from './servers.mjs';

const run = promisify(execFile);

/** Sends a ZooKeeper four-letter word to host:port; resolves with the answer ('' when nothing answers within 3 s). */
function fourLetterWord(hostPort, word) {
  const [host, port] = hostPort.split(':');
  return new Promise((resolve) => {
    let out = '';
    const s = connect({ host, port: Number(port) });
    const timer = setTimeout(() => (s.destroy(), resolve(out)), 3000);
    s.once('connect', () => s.end(word));
    s.on('data', (d) => (out += d));
    s.once('error', () => (clearTimeout(timer), resolve('')));
    s.once('close', () => (clearTimeout(timer), resolve(out)));
  });
}

/**
 * A ZooKeeper for the klog cluster: `zookeeper` (host:port, no chroot) if it answers `ruok`,
 * else one started by scripts/zookeeper.sh on a free loopback port with its data under `work`.
 * Resolves with `{ connect, started, stop() }`; `stop` stops only a ZooKeeper started here.
 * Throws when neither answers (the error says which).
 */
export async function zookeeperFor(work, { repoRoot, zookeeper }) {
  if ((await fourLetterWord(zookeeper, 'ruok')) === 'imok') return { connect: zookeeper, started: false, stop: async () => {} };
  const script = join(repoRoot, 'scripts/zookeeper.sh');
  const env = { ...process.env, KLOG_ZK_PORT: String(await freePort()), KLOG_ZK_DIR: join(work, 'zookeeper') };
  try {
    const { stdout } = await run('bash', [script, 'start'], { env, timeout: 120000 });
    const connectString = stdout.trim().split('\n').pop();
    // Stopped with the cluster; on an early exit (a signal, a crash) by its pid.
    const pid = Number(readFileSync(join(env.KLOG_ZK_DIR, 'zookeeper.pid'), 'utf8').trim());
    const onExit = () => {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    };
    process.once('exit', onExit);
    const stop = async () => {
      process.removeListener('exit', onExit);
      await run('bash', [script, 'stop'], { env, timeout: 60000 }).catch(onExit);
    };
    return { connect: connectString, started: true, stop };
  } catch (e) {
    throw new Error(`no ZooKeeper answers at ${zookeeper} and scripts/zookeeper.sh start failed: ${String(e.stderr ?? e.message).trim().split('\n').slice(-3).join(' | ')}`);
  }
}

/**
 * Three klog brokers (ids 0-2) of this checkout over ZooKeeper `zk.connect` + `/chroot`,
 * default settings otherwise (group commit; replica.fetch.wait.max.ms 500), plus `extraArgs`.
 * Resolves once all three listen; the controller is elected by then or soon after (topic
 * creation waits for it).
 */
export async function startKlogCluster(work, { repoRoot, zk, chroot, extraArgs = [] }) {
  const bin = join(repoRoot, 'node_modules/.bin/klog-broker');
  const zookeeper = `${zk.connect}${chroot}`;
  const nodes = [];
  try {
    for (let id = 0; id < 3; id++) {
      const dataDir = join(work, `broker-${id}`);
      mkdirSync(dataDir, { recursive: true });
      const port = await freePort();
      const logFile = join(work, `broker-${id}.log`);
      const args = ['--zookeeper', zookeeper, '--broker-id', String(id), '--host', '127.0.0.1', '--port', String(port), '--log-dir', dataDir, '--num-partitions', '1', '--log-format', 'json', ...extraArgs];
      nodes.push({ id, port, dataDir, logFile, child: track(launch(bin, args, { cwd: work, logFile })) });
    }
    for (const n of nodes) await waitForPort(n.port, n.child, 30000, n.logFile);
  } catch (e) {
    for (const n of nodes) await stopChild(n.child);
    throw e;
  }
  let version = null;
  try {
    version = `git ${execFileSync('git', ['-C', repoRoot, 'describe', '--always', '--dirty'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()}`;
  } catch {
    /* not a git checkout */
  }
  return {
    name: 'klog',
    version,
    zookeeper,
    ports: nodes.map((n) => n.port),
    brokerList: nodes.map((n) => `127.0.0.1:${n.port}`).join(','),
    dataDir: work,
    logFile: nodes[0].logFile,
    logFiles: nodes.map((n) => n.logFile),
    pids: nodes.map((n) => n.child.pid),
    pgids: nodes.map((n) => n.child.pid),
    stop: async () => {
      for (const n of nodes) await stopChild(n.child);
    },
  };
}

/**
 * Three nats-servers with JetStream (file store under `work`), client and route ports on
 * 127.0.0.1, routed to each other as cluster `klogbench`, server names `klogbench-<client
 * port>`. JetStream's meta leader is elected after the start; the client's setup waits for it.
 */
export async function startNatsCluster(work) {
  const nodes = [];
  for (let i = 0; i < 3; i++) nodes.push({ i, port: await freePort(), routePort: await freePort() });
  const routes = nodes.map((n) => `nats://127.0.0.1:${n.routePort}`).join(',');
  try {
    for (const n of nodes) {
      n.dataDir = join(work, `nats-${n.i}`);
      mkdirSync(n.dataDir, { recursive: true });
      n.logFile = join(work, `nats-${n.i}.log`);
      const args = ['-a', '127.0.0.1', '-p', String(n.port), '-js', '-sd', n.dataDir, '--server_name', `klogbench-${n.port}`, '--cluster_name', 'klogbench', '--cluster', `nats://127.0.0.1:${n.routePort}`, '--routes', routes];
      n.child = track(launch('nats-server', args, { cwd: work, logFile: n.logFile }));
    }
    for (const n of nodes) await waitForPort(n.port, n.child, 30000, n.logFile);
  } catch (e) {
    for (const n of nodes) if (n.child) await stopChild(n.child);
    throw e;
  }
  return {
    name: 'NATS JetStream',
    version: debVersion('nats-server'),
    ports: nodes.map((n) => n.port),
    port: nodes[0].port,
    dataDir: work,
    logFile: nodes[0].logFile,
    logFiles: nodes.map((n) => n.logFile),
    pids: nodes.map((n) => n.child.pid),
    pgids: nodes.map((n) => n.child.pid),
    stop: async () => {
      for (const n of nodes) await stopChild(n.child);
    },
  };
}
