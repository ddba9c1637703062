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
  const k = new MemoryKeeper({
    logger: createLogger({ format: 'json', verbosity: 2 }, { write: (l: string) => (logs.push(JSON.parse(l)), true) } as never),
    intervalMs,
    release: (full) => {
      calls.push(full);
      if (fail) throw new Error('boom');
    },
    now: () => now,
    rss: () => 100 * 2 ** 20,
    defer: (fn) => void deferred.push(fn),
  });
  const flush = () => deferred.splice(0).forEach((fn) => fn());
  return { k, calls, logs, flush, advance: (ms: number) => (now += ms), failNext: () => (fail = true) };
}

describe('MemoryKeeper', () => {
  it('runs one full release after the first sync, deferred past it, and logs it', () => {
    const t = keeper();
    t.k.afterSync(false);
    expect(t.calls).toEqual([]);
    t.flush();
    expect(t.calls).toEqual([true]);
    expect(t.logs.find((l) => l.msg === 'memory released after the first sync')).toMatchObject({ rssMiB: 100, afterMiB: 100 });
  });

  it('then releases incrementally at most once per interval, and only after syncs that did work', () => {
    const t = keeper(30_000);
    t.k.afterSync();
    t.flush();
    t.advance(10_000);
    t.k.afterSync(true);
    t.flush();
    expect(t.calls).toEqual([true]); // within the interval
    t.advance(25_000);
    t.k.afterSync(false);
    t.flush();
    expect(t.calls).toEqual([true]); // a periodic sync without changes
    t.k.afterSync(true);
    t.k.afterSync(true); // one pending release, not two
    t.flush();
    expect(t.calls).toEqual([true, false]);
    t.advance(1_000);
    t.k.afterSync(true);
    t.flush();
    expect(t.calls).toEqual([true, false]);
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
