import { describe, expect, it } from 'vitest';

import { createLogger } from '../../src/log.js';
import { MemoryKeeper, QUIET_MS } from '../../src/memory.js';
import { native } from '../../src/native/binding.js';

function keeper(intervalMs = 30_000) {
  let calls = 0;
  const logs: Array<Record<string, unknown>> = [];
  const deferred: Array<() => void> = [];
  const timers: Array<{ fn: () => void; at: number }> = [];
  let now = 0;
  let fail = false;
  let rss = 100;
  let askedAt = 0;
  const k = new MemoryKeeper({
    logger: createLogger({ format: 'json', verbosity: 2 }, { write: (l: string) => (logs.push(JSON.parse(l)), true) } as never),
    intervalMs,
    release: () => {
      calls++;
      if (fail) throw new Error('boom');
      rss = 100; // what a release returns to, in this test
    },
    now: () => now,
    rss: () => rss * 2 ** 20,
    quietFor: () => now - askedAt,
    defer: (fn) => void deferred.push(fn),
    later: (fn, ms) => void timers.push({ fn, at: now + ms }),
  });
  const flush = () => deferred.splice(0).forEach((fn) => fn());
  return {
    k, logs, flush,
    calls: () => calls,
    timers,
    /** Moves the clock, firing the timers that come due. */
    advance: (ms: number) => {
      now += ms;
      for (const t of timers.splice(0).sort((a, b) => a.at - b.at)) {
        if (t.at <= now) t.fn();
        else timers.push(t);
      }
    },
    change: () => (askedAt = now),
    failNext: () => (fail = true),
    grow: (mib: number) => (rss += mib),
  };
}

describe('MemoryKeeper', () => {
  it('runs one release after the first sync, deferred past it, and logs it', () => {
    const t = keeper();
    t.grow(50);
    t.k.afterSync();
    expect(t.calls()).toBe(0);
    t.flush();
    expect(t.calls()).toBe(1);
    expect(t.logs.find((l) => l.msg === 'memory released after the first sync')).toMatchObject({ rssMiB: 150, afterMiB: 100 });
  });

  it('later: at most once per interval, only when RSS grew by over a tenth, and only after QUIET_MS without a change', () => {
    const t = keeper(30_000);
    t.k.afterSync();
    t.flush();
    t.grow(50);
    t.advance(10_000);
    t.k.afterSync();
    t.flush();
    expect(t.calls()).toBe(1); // within the interval
    t.advance(25_000);
    t.change(); // a change asked for just now: a blocking release would delay the next one
    t.k.afterSync();
    t.k.afterSync(); // one wait, not two
    t.flush();
    expect(t.calls()).toBe(1);
    expect(t.timers.map((x) => x.at)).toEqual([35_000 + QUIET_MS]);
    t.advance(QUIET_MS - 1_000);
    t.change(); // changes keep coming: the check after QUIET_MS waits again
    t.advance(1_000);
    t.flush();
    expect(t.calls()).toBe(1);
    t.advance(QUIET_MS); // quiet at last
    t.flush();
    expect(t.calls()).toBe(2);
    expect(t.logs.at(-1)).toMatchObject({ msg: 'memory released', rssMiB: 150, afterMiB: 100 });
    expect(t.timers).toEqual([]);
    t.advance(60_000);
    t.grow(9); // under a tenth over the last release
    t.k.afterSync();
    t.flush();
    expect(t.calls()).toBe(2);
    t.grow(2);
    t.k.afterSync(); // quiet for over a minute: at once
    t.flush();
    expect(t.calls()).toBe(3);
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
    native.releaseMemory();
    expect(junk).toBeNull();
    expect(process.memoryUsage().heapTotal).toBeLessThan(held - 20 * 2 ** 20);
  });
});
