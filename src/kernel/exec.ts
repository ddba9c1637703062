// External commands (iptables-save/-restore, conntrack, modprobe) run without a shell.
import { spawn } from 'node:child_process';

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
}

/**
 * Runs a command without a shell. Resolves with its exit status whatever it is; rejects only
 * when it could not be started (e.g. `code: 'ENOENT'`). Injectable for tests.
 */
export type Exec = (file: string, args: readonly string[], opts?: ExecOptions) => Promise<ExecResult>;

/** The real {@link Exec}: child_process.spawn; resolves once the command has exited and its output ended ('close'). */
export const spawnExec: Exec = (file, args, opts = {}) =>
  new Promise((resolve, reject) => {
    const child = spawn(file, args, { env: opts.env ?? process.env, stdio: 'pipe', ...(opts.timeoutMs === undefined ? {} : { timeout: opts.timeoutMs, killSignal: 'SIGKILL' }) });
    const stdout: Buffer[] = [];
    const stderr: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => stdout.push(b));
    child.stderr.on('data', (b: Buffer) => stderr.push(b));
    // A command that exits before reading all its input makes the write fail with EPIPE; its
    // exit status says what went wrong.
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout: Buffer.concat(stdout).toString('utf8'), stderr: Buffer.concat(stderr).toString('utf8') }));
  });
