import { describe, expect, it } from 'vitest';

import { createLogger } from '../../src/log-json.js';
import { GROWTH, MemoryKeeper, QUIET_GROWTH, QUIET_MS } from '../../src/memory.js';
import { native } from '../../src/native/binding.js';

function keeper(intervalMs = 30_000) {
  const calls: string[] = [];
  const logs: Array<Record<string, unknown>> = [];
  const deferred: Array<() => void> = [];
  const timers: Array<{ fn: () => void; at: number }> = [];
  let now = 0;
  let fail = false;
  let rss = 100;
  let askedAt = 0;
  let reads = 0;
  const k = new MemoryKeeper({
    logger: createLogger({ format: 'json', verbosity: 2 }, { write: (l: string) => (logs.push(JSON.parse(l)), true) } as never),
    intervalMs,
    release: (full) => {
      calls.push(full ? 'full' : 'incremental');
      if (fail) throw new Error('boom');
      rss = full ? 100 : rss - 5; // what each returns, in this test
    },
    now: () => now,
    rss: () => (reads++, rss * 2 ** 20),
    quietFor: () => now - askedAt,
    defer: (fn) => void deferred.push(fn),
    later: (fn, ms) => void timers.push({ fn, at: now + ms }),
  });
  const flush = () => deferred.splice(0).forEach((fn) => fn());
  return {
    k, calls, logs, flush, timers,
    /** Moves the clock, firing the timers that come due, then runs what they deferred. */
    advance: (ms: number) => {
      now += ms;
      for (const t of timers.splice(0).sort((a, b) => a.at - b.at)) {
        if (t.at <= now) t.fn();
        else timers.push(t);
      }
      flush();
    },
    change: () => (askedAt = now),
    failNext: () => (fail = true),
    grow: (mib: number) => (rss += mib),
    reads: () => reads,
  };
}

describe('MemoryKeeper', () => {
  it('reads RSS once per sync (each read opens and reads /proc/self/stat)', () => {
    const t = keeper();
    t.k.afterSync();
    t.flush(); // the first release
    for (const mib of [0, QUIET_GROWTH * 100 - 100 + 1, GROWTH * 100]) {
      t.grow(mib);
      t.advance(1_000);
      t.change();
      const before = t.reads();
      t.k.afterSync();
      expect(t.reads() - before).toBe(1);
    }
  });

  it('after a verification: no release while changes come (the next sync looks), a full one once quiet; at once when already quiet', () => {
    const t = keeper();
    t.k.afterSync();
    t.flush(); // the first release
    t.calls.length = 0;
    t.grow(50);
    t.advance(1_000);
    t.change();
    t.advance(500);
    t.k.afterVerification(); // a change 0.5 s ago: a release now could land in the next sync
    t.flush();
    expect(t.calls).toEqual([]);
    t.advance(QUIET_MS); // then no change: the armed check releases
    expect(t.calls).toEqual(['full']);
    t.grow(50);
    t.k.afterVerification(); // quiet for QUIET_MS already: at once (deferred past the caller)
    t.flush();
    expect(t.calls).toEqual(['full', 'full']);
  });

  it('runs one release after the first sync, deferred past it, and logs it', () => {
    const t = keeper();
    t.grow(50);
    t.change();
    t.k.afterSync();
    expect(t.calls).toEqual([]);
    t.flush();
    expect(t.calls).toEqual(['full']); // busy or not
    expect(t.logs.find((l) => l.msg === 'memory released after the first sync')).toMatchObject({ rssMiB: 150, afterMiB: 100 });
  });

  it('later: a full release only after QUIET_MS without a change and only when RSS grew by over a twentieth; meanwhile, over a tenth, an incremental one right after a sync, at most once per interval', () => {
    expect([QUIET_GROWTH, GROWTH]).toEqual([1.05, 1.1]);
    const t = keeper(30_000);
    t.k.afterSync();
    t.flush();
    t.advance(60_000);
    t.grow(4); // under a twentieth over the last release
    t.k.afterSync();
    t.flush();
    expect(t.calls).toEqual(['full']);
    t.grow(50);
    t.change(); // changes are coming: a blocking GC now could delay the next one
    t.k.afterSync();
    t.k.afterSync(); // one release deferred, not two
    t.flush();
    expect(t.calls).toEqual(['full', 'incremental']);
    expect(t.logs.at(-1)).toMatchObject({ msg: 'memory release started', full: false, rssMiB: 154, afterMiB: 149 });
    expect(t.timers.map((x) => x.at)).toEqual([60_000 + QUIET_MS]);
    const churn = (seconds: number) => {
      for (let i = 0; i < seconds / 2; i++) {
        t.advance(2_000);
        t.change(); // a change every 2 s, and its sync: never quiet
        t.k.afterSync();
        t.flush();
      }
    };
    churn(20);
    expect(t.calls).toEqual(['full', 'incremental']); // none within the interval
    churn(20);
    expect(t.calls).toEqual(['full', 'incremental', 'incremental']); // the interval has passed
    expect(t.timers).toHaveLength(1); // one quiet check armed, not one per sync
    t.advance(QUIET_MS); // quiet at last
    expect(t.calls).toEqual(['full', 'incremental', 'incremental', 'full']);
    expect(t.logs.at(-1)).toMatchObject({ msg: 'memory released', full: true, afterMiB: 100 });
    expect(t.timers).toEqual([]);
    t.grow(6);
    t.advance(1_000); // quiet, grown again by over a twentieth (an idle verification's reads): released at once
    t.k.afterVerification();
    t.flush();
    expect(t.calls).toEqual(['full', 'incremental', 'incremental', 'full', 'full']);
    t.grow(7);
    t.change(); // changes again, RSS up by less than a tenth: no incremental release, a full one once quiet
    t.k.afterSync();
    t.flush();
    expect(t.calls).toEqual(['full', 'incremental', 'incremental', 'full', 'full']);
    t.advance(QUIET_MS);
    expect(t.calls).toEqual(['full', 'incremental', 'incremental', 'full', 'full', 'full']);
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
    expect(() => native.releaseMemory(false)).not.toThrow(); // the incremental one
  });
});
