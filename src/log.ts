// Structured logs (pino): JSON lines, or `--log-format text` as `time LEVEL msg key=value…`.
import { Writable } from 'node:stream';

import { pino, type Logger } from 'pino';

const LEVEL_NAMES: Record<number, string> = { 10: 'TRACE', 20: 'DEBUG', 30: 'INFO', 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };

/** A stream turning pino's JSON lines into one readable line each. */
function textStream(out: NodeJS.WritableStream): Writable {
  return new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) {
        if (!line) continue;
        const { time, level, msg, pid: _pid, hostname: _host, ...rest } = JSON.parse(line) as Record<string, unknown>;
        const fields = Object.entries(rest).map(([k, v]) => `${k}=${typeof v === 'string' ? JSON.stringify(v) : JSON.stringify(v)}`);
        out.write(`${new Date(Number(time)).toISOString()} ${LEVEL_NAMES[Number(level)] ?? level} ${msg ?? ''}${fields.length ? ` ${fields.join(' ')}` : ''}\n`);
      }
      done();
    },
  });
}

/** The process logger: verbosity 0 = info, >= 2 debug, >= 4 trace (klog-style -v). */
export function createLogger(opts: { format: 'json' | 'text'; verbosity: number }, out: NodeJS.WritableStream = process.stderr): Logger {
  const level = opts.verbosity >= 4 ? 'trace' : opts.verbosity >= 2 ? 'debug' : 'info';
  const base = { base: { pid: process.pid }, level };
  return opts.format === 'text' ? pino(base, textStream(out)) : pino(base, out as unknown as pino.DestinationStream);
}

export type { Logger };
