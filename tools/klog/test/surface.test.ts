/**
 * The command-line surface of every klog command as a user types it: `--version`, every default
 * in `--help` and examples there, one exit-code convention (0 ok, 1 failure, 2 usage error, see
 * the README), and the broker's logs: `--log-level`, JSON when piped, pretty on a real terminal
 * (a pseudo-terminal from script(1)); the Node flags the long-running commands start with.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const bins: Record<string, string> = {
  klog: join(root, 'tools/klog/dist/main.js'),
  'klog-broker': join(root, 'apps/broker/dist/main.js'),
  'klog-mirror-maker': join(root, 'apps/mirror-maker/dist/main.js'),
  'klog-audit': join(root, 'apps/audit/dist/main.js'),
};
const version = (JSON.parse(readFileSync(join(root, 'tools/klog/package.json'), 'utf8')) as { version: string }).version;

function run(bin: string, args: string[]): { code: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, [bins[bin]!, ...args], { encoding: 'utf8', timeout: 20_000, stdin: 'ignore' } as never);
  return { code: r.status, stdout: String(r.stdout), stderr: String(r.stderr) };
}

describe('every command', () => {
  it.each(Object.keys(bins))('%s --version prints the klog version and exits 0', (bin) => {
    const r = run(bin, ['--version']);
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe(version);
  });

  it.each(Object.keys(bins))('%s: an unknown option is a usage error: one line, exit 2', (bin) => {
    const r = run(bin, ['--no-such-option']);
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^error: (unknown option '--no-such-option'|required option)/);
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });

  it.each(Object.keys(bins))('%s --help shows examples', (bin) => {
    const r = run(bin, ['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\nExamples:\n {2}\S/);
  });

  it.each(['produce', 'consume', 'offsets', 'topics', 'groups', 'dump-log', 'load', 'perf', 'perf produce', 'perf consume'])('klog %s --help shows examples', (command) => {
    const r = run('klog', [...command.split(' '), '--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\nExamples:\n {2}\S/);
    expect(r.stdout).toMatch(/\n {2}(\S+ \| )?klog /);
  });

  it('klog-broker --help shows every default', () => {
    const help = run('klog-broker', ['--help']).stdout.replace(/\s+/g, ' ');
    for (const d of [
      'port, default 9092',
      'broker.id, default 0',
      'host, default 127.0.0.1',
      'num.partitions, default 1',
      'segment.bytes, default 1073741824',
      'flush.messages, default 500',
      'flush.ms, default 1000',
      'retention.hours, default 168',
      'retention.bytes, default -1',
      'retention.check.interval.ms, default 300000',
      'max.message.bytes, default 1000000',
      'max.request.bytes, default 104857600',
      'read.path, default auto',
      'zookeeper.session.timeout.ms, default 6000',
      'default: "info")',
      'default: "auto")',
    ]) {
      expect(help).toContain(d);
    }
  });

  it('klog: options that do not go together are a usage error (exit 2); a failure at run time exits 1', () => {
    const both = run('klog', ['consume', '--broker', '127.0.0.1:1', '--broker-list', '127.0.0.1:1', '--topic', 't']);
    expect(both.code).toBe(2);
    expect(both.stderr).toMatch(/give one of --broker and --broker-list/);
    const neither = run('klog', ['produce', '--topic', 't']);
    expect(neither.code).toBe(2);
    expect(neither.stderr).toMatch(/^klog produce: error: give exactly one of --broker-list and --zookeeper$/m);
    const unreachable = run('klog', ['offsets', '--broker-list', '127.0.0.1:1', '--topic', 't']);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr.trim().split('\n')).toHaveLength(1);
  });
});

describe('klog-broker logs', () => {
  /** Starts a broker with `args`, on a pseudo-terminal when `terminal`, until it logged that it listens; returns what it wrote. */
  function brokerOutput(args: string[], terminal: boolean): Promise<string> {
    const work = mkdtempSync(join(tmpdir(), 'klog-broker-logs-'));
    const argv = [bins['klog-broker']!, '--port', '0', '--log-dir', join(work, 'logs'), ...args];
    const child = terminal
      ? spawn('script', ['-qec', [process.execPath, ...argv].map((a) => `'${a}'`).join(' '), '/dev/null'], { stdio: ['ignore', 'pipe', 'pipe'] })
      : spawn(process.execPath, argv, { stdio: ['ignore', 'pipe', 'pipe'] });
    return new Promise((resolve, reject) => {
      let out = '';
      const done = (): void => {
        clearTimeout(timer);
        child.kill('SIGTERM');
        child.on('close', () => {
          rmSync(work, { recursive: true, force: true });
          resolve(out);
        });
      };
      const timer = setTimeout(done, 8000);
      child.stdout.on('data', (b: Buffer) => {
        out += b.toString();
        if (/broker listening/.test(out)) setTimeout(done, 200);
      });
      child.on('error', reject);
    });
  }

  it('piped: JSON lines; --log-format pretty: readable lines; --log-level warn: no info lines', async () => {
    const json = await brokerOutput([], false);
    const listening = json.split('\n').find((l) => l.includes('broker listening'))!;
    expect(JSON.parse(listening)).toMatchObject({ name: 'klog-broker', level: 30, msg: 'broker listening' });
    const pretty = await brokerOutput(['--log-format', 'pretty'], false);
    expect(pretty).toMatch(/^\[[\d:.]+\] INFO \(klog-broker\): broker listening$/m);
    const quiet = await brokerOutput(['--log-level', 'warn'], false);
    expect(quiet).not.toMatch(/broker listening/);
  });

  it('on a terminal: pretty and coloured by default', async () => {
    const out = await brokerOutput([], true);
    expect(out).toMatch(/\x1b\[32mINFO\x1b\[39m \(klog-broker\): \x1b\[36mbroker listening/);
    expect(out).not.toMatch(/"msg":/);
  });
});

describe('the Node flags of the commands (docs/design.md §10)', () => {
  /** A TCP server that accepts and never answers: a command given it waits. */
  async function silentServer(): Promise<{ server: Server; port: number; sockets: Socket[] }> {
    const sockets: Socket[] = [];
    const server = createServer((s) => void sockets.push(s));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return { server, port: (server.address() as { port: number }).port, sockets };
  }

  /** The argv of process `pid` once it runs `script` (after env(1) has exec'd Node), from /proc. */
  async function argvRunning(pid: number, script: string): Promise<string[]> {
    for (let i = 0; i < 200; i++) {
      const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter((a) => a !== '');
      if (!argv[0]?.endsWith('env') && argv.some((a) => a.endsWith(script))) return argv;
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    throw new Error(`process ${pid} never ran ${script}`);
  }

  it.skipIf(process.platform !== 'linux').each([
    ['klog', 'tools/klog/bin/klog.js', (port: number) => ['consume', '--broker', `127.0.0.1:${port}`, '--topic', 't']],
    ['klog-mirror-maker', 'apps/mirror-maker/bin/klog-mirror-maker.js', (port: number) => ['--source', `127.0.0.1:${port}/a`, '--target', `127.0.0.1:${port}/b`, '--group', 'g', '--whitelist', '.*']],
  ])('%s runs Node with --initial-old-space-size=64, as the command its package links', async (_name, file, args) => {
    const { server, port, sockets } = await silentServer();
    const bin = join(root, file);
    const child = spawn(bin, args(port), { stdio: 'ignore' });
    try {
      const argv = await argvRunning(child.pid!, file.split('/').pop()!);
      expect(argv.slice(1, argv.findIndex((a) => a.endsWith(file.split('/').pop()!)))).toEqual(['--initial-old-space-size=64']);
    } finally {
      child.kill('SIGKILL');
      for (const s of sockets) s.destroy();
      server.close();
    }
  });
});
