// The log formats: the exact text line shapes (one line per event, ms rounded, zero counts left
// out, errors with their object) and pino's JSON lines.
import { describe, expect, it } from 'vitest';

import { createLogger } from '../../src/log-json.js';
import { formatTextLine, openLogger, TextLogger } from '../../src/log.js';

const T = new Date('2026-11-23T11:35:16.123Z');

function capture(format: 'json' | 'text', verbosity = 0): { lines: string[]; logger: ReturnType<typeof createLogger> } {
  const lines: string[] = [];
  const logger = createLogger({ format, verbosity }, { write: (l: string) => (lines.push(l), true) } as never, () => T);
  return { lines, logger };
}

describe('text log format', () => {
  it('writes a sync report as one line: ms rounded, zero op counts and phases left out', () => {
    const { lines, logger } = capture('text');
    logger.info(
      {
        full: false, durationMs: 2209.9645440000004, changedServices: 3,
        ops: { addService: 0, updateService: 0, deleteService: 0, addDestination: 2, updateDestination: 0, deleteDestination: 1 },
        errors: 0, phases: { prepare: 0, read: 1, plan: 0, apply: 2203 },
      },
      'synced',
    );
    expect(lines).toEqual([
      '2026-11-23T11:35:16.123Z INFO synced full=false durationMs=2210 changedServices=3 ops.addDestination=2 ops.deleteDestination=1 errors=0 phases.read=1 phases.apply=2203\n',
    ]);
  });

  it('leaves out an object whose counts are all zero', () => {
    expect(formatTextLine(T, 'info', [{ ops: { addService: 0 }, durationMs: 0.4 }, 'synced'])).toBe('2026-11-23T11:35:16.123Z INFO synced durationMs=0\n');
  });

  it('names the object of an error, strings quoted', () => {
    const { lines, logger } = capture('text');
    logger.error({ object: 'Service demo/web', reason: 'unknown scheduler "fancy"' }, 'cannot program object');
    expect(lines).toEqual(['2026-11-23T11:35:16.123Z ERROR cannot program object object="Service demo/web" reason="unknown scheduler \\"fancy\\""\n']);
  });

  it('takes an Error as err, arrays and booleans as JSON, fractions to 3 decimals', () => {
    expect(formatTextLine(T, 'warn', [new Error('boom'), 'sync failed'])).toBe('2026-11-23T11:35:16.123Z WARN sync failed err="boom"\n');
    expect(formatTextLine(T, 'info', [{ rules: ['-A a', '-A b'], ok: true, ratio: 1 / 3, gone: undefined, none: null }, 'x'])).toBe(
      '2026-11-23T11:35:16.123Z INFO x rules=["-A a","-A b"] ok=true ratio=0.333 none=null\n',
    );
  });

  it('writes a call\'s own fields only; a field named as a child\'s binding keeps its place with the call\'s value', () => {
    const fields = Object.assign(Object.create({ inherited: 1 }), { own: 2, nested: Object.assign(Object.create({ up: 3 }), { n: 4 }) });
    expect(formatTextLine(T, 'info', [fields, 'x'])).toBe('2026-11-23T11:35:16.123Z INFO x own=2 nested.n=4\n');
    expect(formatTextLine(T, 'info', [{ b: 'call', c: 1 }, 'x'], { a: 0, b: 'bound' })).toBe('2026-11-23T11:35:16.123Z INFO x a=0 b="call" c=1\n');
  });

  it('writes a bare message, printf arguments and a child logger\'s fields', () => {
    const { lines, logger } = capture('text');
    logger.info('sources synced');
    logger.info('%d services on %s', 3, 'node-1');
    logger.child({ component: 'events' }).warn({ status: 403 }, 'cannot record event');
    expect(lines).toEqual([
      '2026-11-23T11:35:16.123Z INFO sources synced\n',
      '2026-11-23T11:35:16.123Z INFO 3 services on node-1\n',
      '2026-11-23T11:35:16.123Z WARN cannot record event component="events" status=403\n',
    ]);
  });

  it('honours the verbosity: debug at -v 2, trace at -v 4', () => {
    const quiet = capture('text', 0);
    quiet.logger.debug('hidden');
    expect(quiet.lines).toEqual([]);
    const loud = capture('text', 4);
    loud.logger.debug('d');
    loud.logger.trace('t');
    expect(loud.lines).toEqual(['2026-11-23T11:35:16.123Z DEBUG d\n', '2026-11-23T11:35:16.123Z TRACE t\n']);
  });
});

describe('json log format', () => {
  it('writes pino JSON lines with the fields as given', () => {
    const { lines, logger } = capture('json');
    logger.info({ durationMs: 2209.5, ops: { addService: 0 } }, 'synced');
    expect(lines).toHaveLength(1);
    expect(JSON.parse(lines[0]!)).toMatchObject({ level: 30, msg: 'synced', durationMs: 2209.5, ops: { addService: 0 }, pid: process.pid });
  });
});

describe('openLogger (the daemon\'s)', () => {
  const sink = (lines: string[]) => ({ write: (l: string) => (lines.push(l), true) }) as never;

  it('writes text lines without pino, at the verbosity\'s level', async () => {
    const lines: string[] = [];
    const logger = await openLogger({ format: 'text', verbosity: 2 }, sink(lines));
    expect(logger).toBeInstanceOf(TextLogger);
    expect(logger.level).toBe('debug');
    logger.trace('hidden');
    logger.child({ a: 1 }).child({ b: 'x' }).debug({ c: true }, 'shown %d', 7);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^\S+Z DEBUG shown 7 a=1 b="x" c=true\n$/);
  });

  it('writes pino JSON lines for --logging-format json', async () => {
    const lines: string[] = [];
    const logger = await openLogger({ format: 'json', verbosity: 0 }, sink(lines));
    logger.info({ n: 1 }, 'hello');
    logger.debug('hidden');
    expect(lines.map((l) => JSON.parse(l))).toMatchObject([{ level: 30, msg: 'hello', n: 1 }]);
  });
});
