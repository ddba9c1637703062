// Logs (pino): `--logging-format text` (the default, as kube-proxy's klog text) writes one line per
// event, `time LEVEL msg key=value…`, formatted straight from the call's arguments (no JSON round
// trip); `--logging-format json` writes pino's JSON lines.
import { format as formatMsg } from 'node:util';

import { pino, type Logger } from 'pino';

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
 * Appends ` key=value` for each field. A nested object is flattened (`ops.addService=3`) and its
 * zero counts left out (an object of zeros disappears); undefined values are left out.
 */
function appendFields(parts: string[], fields: Record<string, unknown>, prefix: string): void {
  for (const [k, v] of Object.entries(fields)) {
    if (v === undefined) continue;
    const key = prefix + k;
    if (isPlainObject(v)) appendFields(parts, v, `${key}.`);
    else if (prefix !== '' && v === 0) continue;
    else parts.push(`${key}=${formatValue(key, v)}`);
  }
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
    fields = { ...bindings, ...(first as Record<string, unknown>) };
    rest = args.slice(1);
  }
  const msg = rest.length === 0 ? (first instanceof Error ? first.message : '') : rest.length === 1 ? String(rest[0]) : formatMsg(...(rest as [unknown, ...unknown[]]));
  const parts = [`${time.toISOString()} ${LEVEL_NAMES[level] ?? level.toUpperCase()} ${msg}`];
  appendFields(parts, fields, '');
  return `${parts.join(' ')}\n`;
}

/** The process logger: verbosity 0 = info, >= 2 debug, >= 4 trace (klog-style -v). */
export function createLogger(opts: { format: LogFormat; verbosity: number }, out: NodeJS.WritableStream = process.stderr, now: () => Date = () => new Date()): Logger {
  const level = opts.verbosity >= 4 ? 'trace' : opts.verbosity >= 2 ? 'debug' : 'info';
  if (opts.format === 'json') return pino({ base: { pid: process.pid }, level }, out as unknown as pino.DestinationStream);
  // NOTE: pino calls logMethod only for enabled levels; text mode writes the line itself and
  // never asks pino to serialize, so a line costs one string build.
  return pino({
    base: null,
    level,
    hooks: {
      logMethod(args, _method, lvl) {
        const bindings = this.bindings();
        out.write(formatTextLine(now(), pino.levels.labels[lvl] ?? String(lvl), args, bindings));
      },
    },
  }, { write: () => undefined } as unknown as pino.DestinationStream);
}

export type { Logger };
