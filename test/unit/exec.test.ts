import { describe, expect, it } from 'vitest';

import { spawnExec } from '../../src/kernel/exec.js';

describe('spawnExec', () => {
  it('pipes input, collects stdout and stderr, reports the exit code', async () => {
    expect(await spawnExec('sh', ['-c', 'cat; echo oops >&2; exit 3'], { input: 'hello\n' })).toEqual({ code: 3, signal: null, stdout: 'hello\n', stderr: 'oops\n' });
  });

  it('passes args as they are (no shell) and the given environment only', async () => {
    const r = await spawnExec('sh', ['-c', 'printf "%s|" "$0" "$1" "$FOO" "$HOME"', 'a b', '$x'], { env: { FOO: 'bar', PATH: process.env.PATH } });
    expect(r.stdout).toBe('a b|$x|bar||');
  });

  it('reports the signal that ended the command, and kills it after timeoutMs', async () => {
    expect(await spawnExec('sh', ['-c', 'kill -TERM $$'])).toMatchObject({ code: null, signal: 'SIGTERM' });
    const t = Date.now();
    expect(await spawnExec('sleep', ['30'], { timeoutMs: 100 })).toMatchObject({ code: null, signal: 'SIGKILL' });
    expect(Date.now() - t).toBeLessThan(10_000);
  });

  it('large output and input in both directions; a command that stops reading is no error', async () => {
    const big = 'x'.repeat(3 << 20);
    const r = await spawnExec('cat', [], { input: big });
    expect(r.stdout.length).toBe(big.length);
    expect(await spawnExec('head', ['-c', '2'], { input: big })).toMatchObject({ code: 0, stdout: 'xx' });
  });

  it('the command starts with default dispositions of the standard signals and an empty mask (Node ignores SIGPIPE)', async () => {
    const status = (await spawnExec('cat', ['/proc/self/status'])).stdout;
    // bit n-1 is signal n; 32 and up are glibc's own real-time signals, which it keeps as they are
    const bits = (name: string) => BigInt(`0x${new RegExp(`^${name}:\\s+(\\w+)$`, 'm').exec(status)![1]}`) & 0x7fffffffn;
    expect(bits('SigIgn')).toBe(0n);
    expect(bits('SigBlk')).toBe(0n);
  });

  it('rejects with the errno code when the command cannot be started', async () => {
    await expect(spawnExec('kip-no-such-command', [])).rejects.toMatchObject({ code: 'ENOENT' });
  });

  it('leaks no file descriptors', async () => {
    const { readdirSync } = await import('node:fs');
    const before = readdirSync('/proc/self/fd').length;
    for (let i = 0; i < 20; i++) await spawnExec('true', [], { input: 'x' });
    await new Promise((r) => setTimeout(r, 50));
    expect(readdirSync('/proc/self/fd').length).toBeLessThanOrEqual(before);
  });
});
