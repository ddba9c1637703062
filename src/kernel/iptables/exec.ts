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

/** The real {@link Exec}, over child_process.spawn with piped stdio. */
export const spawnExec: Exec = (file, args, opts = {}) =>
  new Promise((resolve, reject) => {
    const child = spawn(file, args, {
      stdio: ['pipe', 'pipe', 'pipe'],
      env: opts.env,
      timeout: opts.timeoutMs,
      killSignal: 'SIGKILL',
    });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    // A command that exits before reading all its input makes the write fail with EPIPE; its
    // exit status says what went wrong.
    child.stdin.on('error', () => {});
    child.on('error', reject);
    child.on('close', (code, signal) =>
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') }),
    );
    child.stdin.end(opts.input ?? '');
  });
