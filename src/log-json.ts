// pino's JSON lines (`--logging-format json`), and createLogger: either format at once, for
// callers that cannot await openLogger (log.ts) and do not mind loading pino.
import { pino } from 'pino';

import { levelOf, TextLogger, type Logger, type LoggerOptions } from './log.js';

/** A logger of either format; `now` is the text lines' clock. */
export function createLogger(opts: LoggerOptions, out: NodeJS.WritableStream = process.stderr, now: () => Date = () => new Date()): Logger {
  const level = levelOf(opts.verbosity);
  if (opts.format === 'text') return new TextLogger(level, out, now);
  return pino({ base: { pid: process.pid }, level }, out as unknown as pino.DestinationStream);
}
