// External commands (iptables-save/-restore, conntrack, modprobe) run without a shell.
import { Socket } from 'node:net';

import { native } from '../native/binding.js';

/** Outcome of one external command. */
export interface ExecResult {
  /** Exit status, or null when killed by a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Options of one external command. */
export interface ExecOptions {
  /** Written to the command's stdin, then stdin is closed. */
  input?: string;
  env?: NodeJS.ProcessEnv;
  /** Kill the command (SIGKILL) after this long. */
  timeoutMs?: number;
  /**
   * Added to the daemon's nice value for the command, as `nice -n` (default 0). Background probes
   * take {@link BACKGROUND_NICE}: on a node with a CPU or two they do not take it from the list
   * decode and the first writes, which do not wait for them.
   */
  nice?: number;
}

/** The nice increment of commands whose result is not waited for yet (the start-up's iptables probes). */
export const BACKGROUND_NICE = 10;

/**
 * Runs a command without a shell. Resolves with its exit status whatever it is; rejects only
 * when it could not be started (e.g. `code: 'ENOENT'`). Injectable for tests.
 */
export type Exec = (file: string, args: readonly string[], opts?: ExecOptions) => Promise<ExecResult>;

/**
 * The real {@link Exec}: the addon's posix_spawn on a thread of its own (no copy of the daemon's
 * page tables, unlike child_process's fork, and no wait on the JS thread for the exec; see
 * native/process.cc), stdio piped through net.Sockets. Resolves once the command has exited and
 * its output ended, as child_process's 'close'.
 */
export const spawnExec: Exec = async (file, args, opts = {}) => {
  const env = opts.env && Object.entries(opts.env).flatMap(([k, v]) => (v === undefined ? [] : [`${k}=${v}`]));
  const p = await native.spawn(file, args, env ?? null, opts.nice ?? 0);
  const stdin = new Socket({ fd: p.stdin, readable: false, writable: true });
  const collect = (fd: number): Promise<string> =>
    new Promise((resolve) => {
      const chunks: Buffer[] = [];
      const s = new Socket({ fd, readable: true, writable: false });
      s.on('data', (b: Buffer) => chunks.push(b));
      s.on('error', () => {}); // a read error ends the output like EOF; the exit status tells
      s.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
    });
  const output = Promise.all([collect(p.stdout), collect(p.stderr)]);
  // A command that exits before reading all its input makes the write fail with EPIPE; its
  // exit status says what went wrong.
  stdin.on('error', () => {});
  stdin.end(opts.input ?? '');
  const timer = opts.timeoutMs === undefined ? undefined : setTimeout(() => kill(p.pid), opts.timeoutMs);
  try {
    const [{ code, signal }, [stdout, stderr]] = await Promise.all([p.exited, output]);
    return { code, signal, stdout, stderr };
  } finally {
    clearTimeout(timer);
  }
};

function kill(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch {
    // already gone
  }
}
