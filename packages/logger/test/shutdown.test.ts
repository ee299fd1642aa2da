import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const shutdownModule = fileURLToPath(new URL('../dist/shutdown.js', import.meta.url));

/**
 * Runs a process whose close takes 200 ms and resolves (or rejects), sends it `signals` (the
 * later ones while it closes), and returns its exit code and the entries it logged.
 */
async function shutDown(signals: NodeJS.Signals[], closeFails: boolean): Promise<{ code: number | null; entries: Array<Record<string, unknown>> }> {
  const code = `
    const log = (level) => (obj, msg) => process.stdout.write(JSON.stringify({ level, ...obj, err: obj.err && String(obj.err), msg }) + '\\n');
    const logger = { debug: log('debug'), info: log('info'), warn: log('warn'), error: log('error') };
    let closes = 0;
    import(${JSON.stringify(shutdownModule)}).then(({ closeOnSignals }) => {
      closeOnSignals(logger, () => new Promise((resolve, reject) => {
        closes++;
        logger.info({ closes }, 'closing');
        setTimeout(() => (${closeFails} ? reject(new Error('disk gone')) : resolve()), 200);
      }), 'finishing');
      process.stdout.write('ready\\n');
      setInterval(() => {}, 1000);
    });`;
  const child = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  await new Promise<void>((resolve) => {
    child.stdout.on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('ready\n')) resolve();
    });
  });
  for (const signal of signals) {
    child.kill(signal);
    await new Promise((r) => setTimeout(r, 20));
  }
  const exit = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
  const entries = out
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
  return { code: exit, entries };
}

describe('closeOnSignals', () => {
  it('closes once on SIGTERM, ignores a SIGINT that comes while it closes, and exits 0', async () => {
    const { code, entries } = await shutDown(['SIGTERM', 'SIGINT'], false);
    expect(code).toBe(0);
    expect(entries).toEqual([
      { level: 'info', signal: 'SIGTERM', msg: 'finishing' },
      { level: 'info', closes: 1, msg: 'closing' },
    ]);
  });

  it('exits 1 with the error logged when closing fails', async () => {
    const { code, entries } = await shutDown(['SIGINT'], true);
    expect(code).toBe(1);
    expect(entries.at(-1)).toEqual({ level: 'error', err: 'Error: disk gone', msg: 'shutdown failed' });
  });
});
