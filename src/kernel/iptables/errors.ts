import type { Table } from './types.js';

/** Machine-readable kind of an {@link IptablesError}. */
export type IptablesErrorCode =
  | 'ERESTORE' // iptables-restore rejected the input; nothing of that table was changed
  | 'ESAVE' // iptables-save failed
  | 'ECHECK' // `iptables -C` failed for a reason other than "rule absent"
  | 'EPARSE' // iptables-save output we could not parse
  | 'EINVAL' // a caller-supplied chain, rule or token that cannot be rendered safely
  | 'EEXEC'; // the binary could not be started (missing, timed out, killed)

/** Fields of an {@link IptablesError} besides its code and message. */
export interface IptablesErrorDetails {
  op: string;
  table?: Table;
  line?: number;
  lineText?: string;
  exitCode?: number;
  stderr?: string;
  cause?: unknown;
}

/** The one error type of the iptables driver, shaped like Node's SystemError. */
export class IptablesError extends Error {
  override readonly name = 'IptablesError';
  readonly code: IptablesErrorCode;
  /** What failed, e.g. `iptables-nft-restore` or `render`. */
  readonly op: string;
  readonly table?: Table;
  /** 1-based line of the restore input that failed (when iptables reported one). */
  readonly line?: number;
  /** The text of that line of our input. */
  readonly lineText?: string;
  readonly exitCode?: number;
  /** The tool's own message, as printed. */
  readonly stderr?: string;

  constructor(code: IptablesErrorCode, message: string, details: IptablesErrorDetails) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause });
    this.code = code;
    this.op = details.op;
    this.table = details.table;
    this.line = details.line;
    this.lineText = details.lineText;
    this.exitCode = details.exitCode;
    this.stderr = details.stderr;
  }
}

/**
 * Builds the error for a failed iptables-restore of `input` into `table`.
 * The line number is only extracted for reporting (`line N failed`, `Error occurred at line: N`,
 * `line N: ...`); nothing decides on the message text.
 */
export function restoreError(op: string, table: Table, input: string, exitCode: number, stderr: string): IptablesError {
  const m = /\bline:? (\d+)\b/.exec(stderr);
  const line = m ? Number(m[1]) : undefined;
  const lineText = line === undefined ? undefined : input.split('\n')[line - 1];
  const detail = stderr
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '' && !l.startsWith('Try `'))
    .join('; ');
  const where = line === undefined ? '' : ` at line ${line}${lineText === undefined ? '' : ` (${lineText})`}`;
  return new IptablesError('ERESTORE', `${op}: table ${table} failed${where}: ${detail || `exit code ${exitCode}`}`, {
    op,
    table,
    line,
    lineText,
    exitCode,
    stderr,
  });
}
