import { execFileSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const pinoModule = fileURLToPath(new URL('../dist/pino.js', import.meta.url));

/** Runs a process that logs one entry with createLogger(format) on stderr (fd 2), and returns what it wrote there. */
function logOnce(format: string, terminal: boolean): string {
  const code = `import(${JSON.stringify(pinoModule)}).then(({ createLogger }) => createLogger({ name: 'klog-test', level: 'info', format: ${JSON.stringify(format)}, fd: 2 }).info({ port: 9092 }, 'broker listening'))`;
  if (!terminal) return stderrOf(code);
  // script(1) runs the process on a pseudo-terminal: stderr is a real terminal there.
  return execFileSync('script', ['-qec', `${process.execPath} -e '${code.replace(/'/g, `'\\''`)}'`, '/dev/null'], { encoding: 'utf8' });
}

function stderrOf(code: string): string {
  return execFileSync('sh', ['-c', `${process.execPath} -e '${code.replace(/'/g, `'\\''`)}' 2>&1 1>/dev/null`], { encoding: 'utf8' });
}

describe('createLogger', () => {
  it('writes JSON lines when stderr is not a terminal (auto) or when asked (json)', () => {
    for (const format of ['auto', 'json']) {
      const entry = JSON.parse(stderrOf(`import(${JSON.stringify(pinoModule)}).then(({ createLogger }) => createLogger({ name: 'klog-test', level: 'info', format: '${format}', fd: 2 }).info({ port: 9092 }, 'broker listening'))`).trim()) as Record<string, unknown>;
      expect(entry).toMatchObject({ name: 'klog-test', level: 30, port: 9092, msg: 'broker listening' });
    }
  });

  it('is pretty on a terminal (auto), JSON there when asked, and pretty through a pipe when asked', () => {
    const pretty = logOnce('auto', true).replace(/\u001b\[[0-9;]*m/g, '');
    expect(pretty).toMatch(/INFO/);
    expect(pretty).toMatch(/broker listening/);
    expect(pretty).toMatch(/port: 9092/);
    expect(pretty).not.toMatch(/"msg"/);
    expect(JSON.parse(logOnce('json', true).trim())).toMatchObject({ msg: 'broker listening' });
    const piped = stderrOf(`import(${JSON.stringify(pinoModule)}).then(({ createLogger }) => createLogger({ name: 'klog-test', level: 'info', format: 'pretty', fd: 2 }).info({ port: 9092 }, 'broker listening'))`);
    expect(piped).toMatch(/INFO.*broker listening/);
    // Not a terminal: no colour codes.
    expect(piped).not.toMatch(/\u001b\[/);
  });
});
