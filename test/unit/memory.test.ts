import { describe, expect, it } from 'vitest';

import { createLogger } from '../../src/log.js';
import { MemoryKeeper } from '../../src/memory.js';
import { native } from '../../src/native/binding.js';

function keeper(intervalMs = 30_000) {
  const calls: boolean[] = [];
  const logs: Array<Record<string, unknown>> = [];
  const deferred: Array<() => void> = [];
  let now = 0;
  let fail = false;
  let rss = 100;
  let idle = false;
  const k = new MemoryKeeper({
    logger: createLogger({ format: 'json', verbosity: 2 }, { write: (l: string) => (logs.push(JSON.parse(l)), true) } as never),
    intervalMs,
    release: (full) => {
      calls.push(full);
      if (fail) throw new Error('boom');
      if (full) rss = 100; // what a full release returns to, in this test
    },
    now: () => now,
    rss: () => rss * 2 ** 20,
    idle: () => idle,
    defer: (fn) => void deferred.push(fn),
  });
  const flush = () => deferred.splice(0).forEach((fn) => fn());
  return {
    k, calls, logs, flush,
    advance: (ms: number) => (now += ms),
    failNext: () => (fail = true),
    grow: (mib: number) => (rss += mib),
    setIdle: (v: boolean) => (idle = v),
  };
}

describe('MemoryKeeper', () => {
  it('runs one full release after the first sync, deferred past it, and logs it', () => {
    const t = keeper();
    t.grow(50);
    t.k.afterSync();
    expect(t.calls).toEqual([]);
    t.flush();
    expect(t.calls).toEqual([true]);
    expect(t.logs.find((l) => l.msg === 'memory released after the first sync')).toMatchObject({ rssMiB: 150, afterMiB: 100 });
  });

  it('later: at most once per interval, only when RSS grew by over a tenth; blocking when idle, incremental when syncs wait', () => {
    const t = keeper(30_000);
    t.k.afterSync();
    t.flush();
    t.grow(50);
    t.advance(10_000);
    t.k.afterSync();
    t.flush();
    expect(t.calls).toEqual([true]); // within the interval
    t.advance(25_000);
    t.k.afterSync();
    t.k.afterSync(); // one pending release, not two
    t.flush();
    expect(t.calls).toEqual([true, false]); // busy: incremental
    expect(t.logs.at(-1)).toMatchObject({ msg: 'memory release started', full: false });
    t.advance(30_000);
    t.setIdle(true);
    t.k.afterSync();
    t.flush();
    expect(t.calls).toEqual([true, false, true]); // idle: blocking, back to the baseline
    expect(t.logs.at(-1)).toMatchObject({ msg: 'memory released', full: true, rssMiB: 150, afterMiB: 100 });
    t.advance(60_000);
    t.grow(9); // under a tenth over the baseline
    t.k.afterSync();
    t.flush();
    expect(t.calls).toEqual([true, false, true]);
  });

  it('a failing release is logged, never thrown', () => {
    const t = keeper();
    t.failNext();
    t.k.afterSync();
    expect(() => t.flush()).not.toThrow();
    expect(t.logs.find((l) => l.msg === 'releasing memory failed')).toMatchObject({ err: 'boom' });
  });

  it('the addon returns a burst of garbage to the kernel', () => {
    let junk: object[] | null = Array.from({ length: 400_000 }, (_, i) => ({ i, s: `x${i}` }));
    const held = process.memoryUsage().heapTotal;
    junk = null;
    native.releaseMemory(true);
    expect(junk).toBeNull();
    expect(process.memoryUsage().heapTotal).toBeLessThan(held - 20 * 2 ** 20);
    expect(() => native.releaseMemory(false)).not.toThrow();
  });
});
