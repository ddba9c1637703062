// Logs: `--logging-format text` (the default, as kube-proxy's klog text) writes one line per
// event, `time LEVEL msg key=value…`, formatted straight from the call's arguments (no JSON round
// trip) by TextLogger; `--logging-format json` writes pino's JSON lines (log-json.ts). Text mode
// never loads pino: its import is a fifth of the daemon's start-up before its first API request
// inside UML (about 0.33 s), and text lines need nothing from it but levels.
import { format as formatMsg } from 'node:util';

/** A log call, as pino's: `(fields, msg, ...printf args)`, `(err, msg)` or `(msg, ...printf args)`. */
export interface LogFn {
  (fields: object, msg?: string, ...args: unknown[]): void;
  (msg: string, ...args: unknown[]): void;
}

/** The logger every module takes: pino's Logger has this shape, and so has TextLogger. */
export interface Logger {
  readonly level: string;
  trace: LogFn;
  debug: LogFn;
  info: LogFn;
  warn: LogFn;
  error: LogFn;
  fatal: LogFn;
  /** A logger whose lines carry `bindings` too. */
  child(bindings: Record<string, unknown>): Logger;
}

/** The logger's options: `--logging-format`, `-v`. */
export interface LoggerOptions {
  format: LogFormat;
  verbosity: number;
}

/** The log formats: `text` (default) and `json`. */
export type LogFormat = 'json' | 'text';

const LEVEL_NAMES: Record<string, string> = { trace: 'TRACE', debug: 'DEBUG', info: 'INFO', warn: 'WARN', error: 'ERROR', fatal: 'FATAL' };

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Error) && !(v instanceof Date);
}

/** A number as a person reads it: milliseconds (`…Ms` keys) whole, other fractions to 3 decimals. */
function formatNumber(key: string, v: number): string {
  if (Number.isInteger(v) || !Number.isFinite(v)) return String(v);
  return String(key.endsWith('Ms') || key.endsWith('ms') ? Math.round(v) : Math.round(v * 1000) / 1000);
}

function formatValue(key: string, v: unknown): string {
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') return formatNumber(key, v);
  if (v instanceof Error) return JSON.stringify(v.message);
  if (v instanceof Date) return JSON.stringify(v.toISOString());
  if (typeof v === 'bigint') return String(v);
  return JSON.stringify(v) ?? String(v);
}

/**
 * `line` with ` key=value` appended for each own field. A nested object is flattened
 * (`ops.addService=3`) and its zero counts left out (an object of zeros disappears); undefined
 * values are left out. Written for the line of every sync: no arrays of entries, and a key string
 * only for what is written (bench/HISTORY.md: "one change's garbage, thread by thread").
 */
function appendFields(line: string, fields: Record<string, unknown>, prefix: string): string {
  for (const k in fields) {
    if (!Object.hasOwn(fields, k)) continue;
    const v = fields[k];
    if (v === undefined || (prefix !== '' && v === 0)) continue;
    if (isPlainObject(v)) line = appendFields(line, v, `${prefix}${k}.`);
    else {
      const key = prefix === '' ? k : prefix + k;
      line += ` ${key}=${formatValue(key, v)}`;
    }
  }
  return line;
}

/** Whether `o` has an own enumerable field (no key array made, unlike Object.keys). */
function hasOwnField(o: Record<string, unknown>): boolean {
  for (const k in o) if (Object.hasOwn(o, k)) return true;
  return false;
}

/** One text line (with its newline) for a log call; `bindings` are a child logger's fields. */
export function formatTextLine(time: Date, level: string, args: readonly unknown[], bindings: Record<string, unknown> = {}): string {
  let fields: Record<string, unknown> = bindings;
  let rest = args;
  const first = args[0];
  if (first instanceof Error) {
    fields = { ...bindings, err: first.message };
    rest = args.slice(1);
  } else if (typeof first === 'object' && first !== null) {
    fields = hasOwnField(bindings) ? { ...bindings, ...(first as Record<string, unknown>) } : (first as Record<string, unknown>);
    rest = args.slice(1);
  }
  const msg = rest.length === 0 ? (first instanceof Error ? first.message : '') : rest.length === 1 ? String(rest[0]) : formatMsg(...(rest as [unknown, ...unknown[]]));
  return `${appendFields(`${time.toISOString()} ${LEVEL_NAMES[level] ?? level.toUpperCase()} ${msg}`, fields, '')}\n`;
}

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;

/** klog-style verbosity to a level: 0 = info, >= 2 debug, >= 4 trace. */
export function levelOf(verbosity: number): 'trace' | 'debug' | 'info' {
  return verbosity >= 4 ? 'trace' : verbosity >= 2 ? 'debug' : 'info';
}

/** Text lines (formatTextLine) for the calls at `level` and above; a call below it costs nothing. */
export class TextLogger implements Logger {
  declare trace: LogFn;
  declare debug: LogFn;
  declare info: LogFn;
  declare warn: LogFn;
  declare error: LogFn;
  declare fatal: LogFn;

  constructor(
    readonly level: string,
    private readonly out: NodeJS.WritableStream,
    private readonly now: () => Date,
    private readonly bindings: Record<string, unknown> = {},
  ) {
    const from = LEVELS.indexOf(level as (typeof LEVELS)[number]);
    for (const [i, name] of LEVELS.entries()) {
      this[name] = i < from ? () => undefined : (...args: unknown[]) => void out.write(formatTextLine(now(), name, args, bindings));
    }
  }

  child(bindings: Record<string, unknown>): Logger {
    return new TextLogger(this.level, this.out, this.now, { ...this.bindings, ...bindings });
  }
}

/** The process logger: text lines without pino, or pino's JSON lines (pino loaded for it only). */
export async function openLogger(opts: LoggerOptions, out: NodeJS.WritableStream = process.stderr): Promise<Logger> {
  if (opts.format === 'text') return new TextLogger(levelOf(opts.verbosity), out, () => new Date());
  return (await import('./log-json.js')).createLogger(opts, out);
}
