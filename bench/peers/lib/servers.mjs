/**
 * Starts each broker of the side-by-side run on 127.0.0.1 only, in its own temp data dir,
 * as a child process in its own process group, and stops it again (SIGTERM to the group,
 * then SIGKILL after a grace period). Every start returns
 * `{ name, version, port, dataDir, stop() }` once the broker accepts TCP connections.
 */
import { spawn, execFileSync } from 'node:child_process';
import { createServer, connect } from 'node:net';
import { mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** A free TCP port on 127.0.0.1 (bound once and released). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function canConnect(port) {
  return new Promise((resolve) => {
    const s = connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** Waits until 127.0.0.1:port accepts connections or the child exits; throws after timeoutMs. */
export async function waitForPort(port, child, timeoutMs, logFile) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null || child.signalCode !== null) {
      throw new Error(`exited (${child.exitCode ?? child.signalCode}) before listening; see ${logFile}:\n${tail(logFile)}`);
    }
    if (await canConnect(port)) return;
    await sleep(100);
  }
  throw new Error(`not listening on 127.0.0.1:${port} after ${timeoutMs} ms; see ${logFile}:\n${tail(logFile)}`);
}

function tail(file, lines = 15) {
  try {
    return readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

/** Spawns `cmd args` in its own process group with stdout+stderr to logFile. */
export function launch(cmd, args, { env, cwd, logFile }) {
  const fd = openSync(logFile, 'a');
  const child = spawn(cmd, args, { env: { ...process.env, ...env }, cwd, detached: true, stdio: ['ignore', fd, fd] });
  child.on('error', () => {});
  return child;
}

/** Every process group started here, so that a crash or signal still stops them. */
const groups = new Set();

/** Sends `sig` to the process group of `child`. */
function signalGroup(child, sig) {
  try {
    process.kill(-child.pid, sig);
  } catch {
    /* already gone */
  }
}

function exited(child) {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
  return new Promise((r) => child.once('exit', () => r()));
}

/** Stops a child: SIGTERM to its group, SIGKILL after graceMs. */
export async function stopChild(child, graceMs = 15000) {
  if (!child) return;
  signalGroup(child, 'SIGTERM');
  const done = await Promise.race([exited(child).then(() => true), sleep(graceMs).then(() => false)]);
  if (!done) {
    signalGroup(child, 'SIGKILL');
    await Promise.race([exited(child), sleep(2000)]);
  }
  // Leftovers of the group (helpers that outlive the leader).
  signalGroup(child, 'SIGKILL');
  groups.delete(child);
}

/** Kills every process group still running (for exit paths). */
export function killAll() {
  for (const child of groups) signalGroup(child, 'SIGKILL');
  groups.clear();
}

/** Registers a started child so that {@link killAll} stops its process group on exit. */
export function track(child) {
  groups.add(child);
  return child;
}

/** The installed version of a Debian package, or null. */
export function debVersion(pkg) {
  try {
    return execFileSync('dpkg-query', ['-W', '-f=${Version}', pkg], { encoding: 'utf8' }).trim();
  } catch {
    return null;
  }
}

/** Whether a Debian package is installed (`dpkg-query`). */
export function debInstalled(pkg) {
  try {
    return /install ok installed/.test(execFileSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }));
  } catch {
    return false;
  }
}

// ---------------------------------------------------------------------------------------------

/**
 * klog: this repo's standalone broker with its default flush settings (flush every 500
 * messages or 1000 ms), one partition per topic.
 */
export async function startKlog(work, { repoRoot }) {
  const dataDir = join(work, 'logs');
  mkdirSync(dataDir, { recursive: true });
  const logFile = join(work, 'broker.log');
  const port = await freePort();
  const bin = join(repoRoot, 'node_modules/.bin/klog-broker');
  const child = track(launch(bin, ['--host', '127.0.0.1', '--port', String(port), '--log-dir', dataDir, '--num-partitions', '1'], { logFile, cwd: work }));
  await waitForPort(port, child, 30000, logFile);
  let version = null;
  try {
    version = `git ${execFileSync('git', ['-C', repoRoot, 'describe', '--always', '--dirty'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()}`;
  } catch {
    /* not a git checkout */
  }
  return { name: 'klog', version, port, dataDir, logFile, pgids: [child.pid], stop: () => stopChild(child) };
}

/**
 * RabbitMQ (Debian rabbitmq-server): its own epmd on a free loopback port, node
 * klogbench@localhost, AMQP and Erlang distribution on 127.0.0.1, no plugins, mnesia and
 * logs in the temp dir, HOME (for the Erlang cookie) in the temp dir.
 */
export async function startRabbitmq(work) {
  const dataDir = join(work, 'mnesia');
  const home = join(work, 'home');
  for (const d of [dataDir, home, join(work, 'log')]) mkdirSync(d, { recursive: true });
  const [port, distPort, epmdPort] = [await freePort(), await freePort(), await freePort()];
  writeFileSync(join(work, 'rabbitmq.conf'), `listeners.tcp.default = 127.0.0.1:${port}\nloopback_users = none\n`);
  writeFileSync(join(work, 'enabled_plugins'), '[].\n');
  writeFileSync(join(work, 'rabbitmq-env.conf'), '');
  const env = {
    HOME: home,
    ERL_EPMD_PORT: String(epmdPort),
    ERL_EPMD_ADDRESS: '127.0.0.1',
    RABBITMQ_NODENAME: 'klogbench@localhost',
    RABBITMQ_CONF_ENV_FILE: join(work, 'rabbitmq-env.conf'),
    RABBITMQ_CONFIG_FILE: join(work, 'rabbitmq'),
    RABBITMQ_ENABLED_PLUGINS_FILE: join(work, 'enabled_plugins'),
    RABBITMQ_MNESIA_BASE: dataDir,
    RABBITMQ_LOG_BASE: join(work, 'log'),
    RABBITMQ_DIST_PORT: String(distPort),
    RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS: '-kernel inet_dist_use_interface {127,0,0,1}',
  };
  const logFile = join(work, 'broker.log');
  const epmd = track(launch('epmd', ['-address', '127.0.0.1', '-port', String(epmdPort)], { env, cwd: work, logFile: join(work, 'epmd.log') }));
  await waitForPort(epmdPort, epmd, 10000, join(work, 'epmd.log'));
  const child = track(launch('/usr/lib/rabbitmq/bin/rabbitmq-server', [], { env, cwd: work, logFile }));
  try {
    await waitForPort(port, child, 90000, logFile);
  } catch (e) {
    await stopChild(child);
    await stopChild(epmd);
    throw e;
  }
  return {
    name: 'RabbitMQ',
    version: debVersion('rabbitmq-server'),
    port,
    dataDir,
    logFile,
    pgids: [child.pid, epmd.pid],
    stop: async () => {
      await stopChild(child, 30000);
      await stopChild(epmd);
    },
  };
}

/**
 * ActiveMQ (Debian activemq): the JVM started as Debian's /usr/bin/activemq does (its
 * activemq-options: -Xms512M -Xmx512M, UseDedicatedTaskRunner=true), with a broker config of
 * only a STOMP connector on 127.0.0.1, JMX off, KahaDB in the temp dir syncing its journal
 * every second (asynchronous flush, like the other brokers) instead of on every write.
 *
 * Memory: the broker's memory limit (<systemUsage>) is a quarter of the heap, 128 MB. Debian's
 * activemq.xml sets none, so it would be 1 GB, which the broker cuts to 70 % of the heap
 * (358 MB). A queue's cursor keeps the messages sent to it in memory, besides storing them,
 * until its share of that limit reaches 70 % or the limit is used up; a 200-byte message counts
 * about 1.4 KB there but holds about 2 KB of heap. With 358 MB, the 1,000,000 unconsumed
 * messages of bench50 keep about 190,000 of them (some 370 MB of heap), then bench1 caches more
 * until the 512 MB heap is full and the batches-of-1 phase dies (with heap and backlog scaled
 * down: back-to-back full GCs, then OutOfMemoryError, an ERROR frame and the connection
 * closed). With 128 MB at most about 100,000 messages
 * are cached (some 210 MB of heap); the others are read back from KahaDB. Store and temp limits
 * are the broker's defaults (100 GB and 50 GB, cut to the free disk space).
 */
export async function startActivemq(work) {
  const base = work;
  const conf = join(work, 'conf');
  const dataDir = join(work, 'data');
  mkdirSync(conf, { recursive: true });
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  writeFileSync(
    join(conf, 'activemq.xml'),
    `<beans xmlns="http://www.springframework.org/schema/beans"
  xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"
  xsi:schemaLocation="http://www.springframework.org/schema/beans http://www.springframework.org/schema/beans/spring-beans-2.0.xsd
  http://activemq.apache.org/schema/core http://activemq.apache.org/schema/core/activemq-core.xsd">
  <broker xmlns="http://activemq.apache.org/schema/core" brokerName="klogbench" useJmx="false"
          persistent="true" advisorySupport="false" schedulerSupport="false" dataDirectory="${dataDir}">
    <systemUsage>
      <systemUsage>
        <memoryUsage><memoryUsage percentOfJvmHeap="25"/></memoryUsage>
        <storeUsage><storeUsage limit="100 gb"/></storeUsage>
        <tempUsage><tempUsage limit="50 gb"/></tempUsage>
      </systemUsage>
    </systemUsage>
    <persistenceAdapter>
      <kahaDB directory="${join(dataDir, 'kahadb')}" journalDiskSyncStrategy="periodic" journalDiskSyncInterval="1000"/>
    </persistenceAdapter>
    <transportConnectors>
      <transportConnector name="stomp" uri="stomp://127.0.0.1:${port}"/>
    </transportConnectors>
  </broker>
</beans>
`,
  );
  // Debian's activemq logs through log4j 1.2 and ships no configuration for it: without this
  // one the broker's warnings and errors (flow control, exceptions) are lost.
  writeFileSync(
    join(conf, 'log4j.properties'),
    `log4j.rootLogger=INFO, out
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d{ISO8601} %-5p [%t] %c{1} - %m%n
`,
  );
  const logFile = join(work, 'broker.log');
  const args = [
    '-Xms512M',
    '-Xmx512M',
    '-Dorg.apache.activemq.UseDedicatedTaskRunner=true',
    '--add-reads=java.xml=java.logging',
    '--add-opens', 'java.base/java.security=ALL-UNNAMED',
    '--add-opens', 'java.base/java.net=ALL-UNNAMED',
    '--add-opens', 'java.base/java.lang=ALL-UNNAMED',
    '--add-opens', 'java.base/java.util=ALL-UNNAMED',
    '--add-opens', 'java.naming/javax.naming.spi=ALL-UNNAMED',
    '--add-opens', 'java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED',
    '--add-opens', 'java.base/java.util.concurrent=ALL-UNNAMED',
    '--add-opens', 'java.base/java.util.concurrent.atomic=ALL-UNNAMED',
    `-Dlog4j.configuration=file:${join(conf, 'log4j.properties')}`,
    `-Dactivemq.classpath=${conf}`,
    '-Dactivemq.home=/usr/share/activemq',
    `-Dactivemq.base=${base}`,
    `-Dactivemq.conf=${conf}`,
    `-Dactivemq.data=${dataDir}`,
    '-jar', '/usr/share/activemq/bin/activemq.jar',
    'start', `xbean:file:${join(conf, 'activemq.xml')}`,
  ];
  const child = track(launch('java', args, { cwd: work, logFile }));
  await waitForPort(port, child, 90000, logFile);
  return { name: 'ActiveMQ', version: debVersion('activemq'), port, dataDir: join(dataDir, 'kahadb'), logFile, pgids: [child.pid], stop: () => stopChild(child, 30000) };
}

/** NATS (Debian nats-server) with JetStream, file store in the temp dir, client port on 127.0.0.1, no monitoring port. */
export async function startNats(work) {
  const dataDir = join(work, 'jetstream');
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const logFile = join(work, 'broker.log');
  const child = track(launch('nats-server', ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dataDir, '-n', 'klogbench'], { cwd: work, logFile }));
  await waitForPort(port, child, 30000, logFile);
  return { name: 'NATS JetStream', version: debVersion('nats-server'), port, dataDir, logFile, pgids: [child.pid], stop: () => stopChild(child) };
}

/**
 * Redis (Debian redis-server): appendonly yes, appendfsync everysec, on 127.0.0.1, data in
 * the temp dir; no RDB snapshots and no automatic AOF rewrite, so that the AOF is the only
 * copy and its size is the data's.
 */
export async function startRedis(work) {
  const dataDir = join(work, 'data');
  mkdirSync(dataDir, { recursive: true });
  const port = await freePort();
  const logFile = join(work, 'broker.log');
  const args = [
    '--bind', '127.0.0.1',
    '--port', String(port),
    '--protected-mode', 'yes',
    '--daemonize', 'no',
    '--dir', dataDir,
    '--appendonly', 'yes',
    '--appendfsync', 'everysec',
    '--save', '',
    '--auto-aof-rewrite-percentage', '0',
    '--logfile', '',
  ];
  const child = track(launch('redis-server', args, { cwd: work, logFile }));
  await waitForPort(port, child, 30000, logFile);
  return { name: 'Redis Streams', version: debVersion('redis-server'), port, dataDir, logFile, pgids: [child.pid], stop: () => stopChild(child) };
}

/**
 * The TCP listening addresses of every process in the given process groups (from `ss -ltnpH`),
 * as `{ pid, address }`; used to check that a broker listens on loopback only.
 */
export function listeningAddresses(pgids) {
  const pids = new Set();
  const ps = execFileSync('ps', ['-eo', 'pid=,pgid=,ppid='], { encoding: 'utf8' });
  const rows = ps.trim().split('\n').map((l) => l.trim().split(/\s+/).map(Number));
  for (const [pid, pgid] of rows) if (pgids.includes(pgid)) pids.add(pid);
  // Children in groups of their own (erl_child_setup) are found through their parents.
  for (let grew = true; grew; ) {
    grew = false;
    for (const [pid, , ppid] of rows) if (pids.has(ppid) && !pids.has(pid)) (pids.add(pid), (grew = true));
  }
  const out = [];
  const ss = execFileSync('ss', ['-ltnpH'], { encoding: 'utf8' });
  for (const line of ss.split('\n')) {
    const cols = line.trim().split(/\s+/);
    if (cols.length < 6) continue;
    for (const m of line.matchAll(/pid=(\d+)/g)) if (pids.has(Number(m[1]))) out.push({ pid: Number(m[1]), address: cols[3] });
  }
  return out;
}

/** Whether a listening address (as ss prints it) is on loopback. */
export function isLoopback(address) {
  const host = address.replace(/:\d+$/, '').replace(/^\[|\]$/g, '').replace(/%.*$/, '');
  return host === '::1' || host.startsWith('127.') || host.startsWith('::ffff:127.');
}
