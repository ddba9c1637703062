import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { BoundedFrequencyRunner, END_GAP, type RunnerClock, type RunnerOptions } from '../../src/proxy/runner.js';

// Fake timers drive a clock built on the (faked) globals, so every test is deterministic.
const fakeClock: RunnerClock = {
  now: () => Date.now(),
  setTimeout: (cb, ms) => setTimeout(cb, ms),
  clearTimeout: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

const MIN = 1_000;
const MAX = 30_000;
const RETRY = 5_000;

/** A runner whose sync records its start times; `impl` decides what each sync does. */
function harness(impl: () => Promise<void> | void = () => {}, opts: Partial<RunnerOptions> = {}) {
  const starts: number[] = [];
  const errors: unknown[] = [];
  let active = 0;
  let maxActive = 0;
  const sync = vi.fn(async () => {
    starts.push(Date.now());
    active++;
    maxActive = Math.max(maxActive, active);
    try {
      await impl();
    } finally {
      active--;
    }
  });
  const runner = new BoundedFrequencyRunner(sync, {
    minIntervalMs: MIN, maxIntervalMs: MAX, retryIntervalMs: RETRY, clock: fakeClock,
    onError: (e) => errors.push(e), ...opts,
  });
  return { runner, sync, starts, errors, maxActive: () => maxActive };
}

/** A promise resolved by hand, to hold a sync in flight. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const advance = (ms: number) => vi.advanceTimersByTimeAsync(ms);

beforeEach(() => {
  vi.useFakeTimers({ now: 0 });
});
afterEach(() => {
  vi.useRealTimers();
});

describe('BoundedFrequencyRunner', () => {
  it('coalesces a burst of run() calls into one sync', async () => {
    const h = harness();
    h.runner.start();
    for (let i = 0; i < 50; i++) h.runner.run();
    await advance(0);
    expect(h.starts).toEqual([0]);
    await advance(MAX - 1);
    expect(h.sync).toHaveBeenCalledTimes(1);
    await h.runner.stop();
  });

  it('reads the clock once per burst of run() calls, not once per call', async () => {
    const now = vi.fn(() => Date.now());
    const h = harness(() => {}, { clock: { ...fakeClock, now } });
    h.runner.start();
    now.mockClear();
    for (let i = 0; i < 1_000; i++) h.runner.run();
    expect(now.mock.calls.length).toBeLessThanOrEqual(2);
    await advance(0);
    expect(h.starts).toEqual([0]);
    await h.runner.stop();
  });

  it('quietFor counts from the start of the sync that served the last burst of requests', async () => {
    const h = harness();
    h.runner.start();
    h.runner.run();
    await advance(0); // first sync at 0; the next may start at MIN
    await advance(100);
    h.runner.run(); // asked at 100, served at MIN
    await advance(200);
    h.runner.run(); // same burst, not timed
    expect(h.runner.quietFor()).toBe(0);
    await advance(MIN); // now 1,300
    expect(h.starts).toEqual([0, MIN]);
    expect(h.runner.quietFor()).toBe(300);
    await h.runner.stop();
  });

  it('quietFor: 0 while a request (or retry) waits, then the time since the last request', async () => {
    const seen: number[] = [];
    const h = harness(() => void seen.push(h.runner.quietFor()));
    h.runner.start();
    expect(h.runner.quietFor()).toBe(Infinity); // never asked
    h.runner.run();
    expect(h.runner.quietFor()).toBe(0);
    await advance(0);
    expect(seen).toEqual([0]); // asked at 0, running at 0
    await advance(700);
    expect(h.runner.quietFor()).toBe(700);
    h.runner.retryAfter(5_000);
    expect(h.runner.quietFor()).toBe(0);
    await advance(5_000);
    expect(h.runner.quietFor()).toBe(5_700);
    await h.runner.stop();
  });

  it('nextSyncIn: 0 while a sync runs, then the time left of the min interval, below 0 once it has passed', async () => {
    const gate = deferred();
    const seen: number[] = [];
    const h = harness(() => {
      seen.push(h.runner.nextSyncIn());
      return gate.promise;
    });
    h.runner.start();
    expect(h.runner.nextSyncIn()).toBeLessThan(0);
    h.runner.run();
    await advance(0);
    await advance(200);
    expect(h.runner.nextSyncIn()).toBe(0);
    gate.resolve();
    await advance(0);
    expect(seen).toEqual([0]);
    expect(h.runner.nextSyncIn()).toBe(MIN - 200);
    await advance(MIN - 200);
    expect(h.runner.nextSyncIn()).toBeLessThan(0);
    await h.runner.stop();
  });

  it('spaces syncs at least minInterval apart, coalescing requests meanwhile', async () => {
    const h = harness();
    h.runner.start();
    h.runner.run();
    await advance(0);
    await advance(100);
    h.runner.run();
    await advance(200);
    h.runner.run();
    h.runner.run();
    await advance(MIN - 301);
    expect(h.starts).toEqual([0]);
    await advance(1);
    expect(h.starts).toEqual([0, MIN]);
    await advance(MIN * 3);
    expect(h.starts).toEqual([0, MIN]);
    await h.runner.stop();
  });

  /** The first sync takes `syncMs` and a change arrives `askAt` ms into it: the first two starts. */
  async function twoSyncs(syncMs: number, askAt: number): Promise<number[]> {
    const gate = deferred();
    let calls = 0;
    const h = harness(() => (calls++ === 0 ? gate.promise : undefined));
    h.runner.start();
    h.runner.run();
    await advance(0);
    await advance(askAt);
    h.runner.run();
    await advance(syncMs - askAt);
    gate.resolve();
    while (h.starts.length < 2) await advance(1);
    expect(h.maxActive()).toBe(1);
    await h.runner.stop();
    return h.starts;
  }

  it('measures minInterval from the start of a sync: a change waits for at most minInterval plus the sync that writes it', async () => {
    expect(await twoSyncs(400, 300)).toEqual([0, MIN]); // not 400 + MIN
  });

  it('after a sync slower than minInterval, pauses a tenth of minInterval before the next', async () => {
    expect(await twoSyncs(3_000, 0)).toEqual([0, 3_000 + MIN * END_GAP]);
  });

  it('runs a periodic sync every maxInterval on its own schedule: requested syncs neither postpone it nor count as periodic', async () => {
    const periodic: boolean[] = [];
    const starts: number[] = [];
    const sync2 = new BoundedFrequencyRunner((info) => void (starts.push(Date.now()), periodic.push(info.periodic)), {
      minIntervalMs: MIN, maxIntervalMs: MAX, retryIntervalMs: RETRY, clock: fakeClock,
    });
    sync2.start();
    await advance(MAX - 1);
    expect(starts).toEqual([]);
    await advance(1);
    expect(starts).toEqual([MAX]);
    await advance(10_000);
    sync2.run(); // a requested sync does not push the next periodic one back
    await advance(0);
    await advance(MAX - 10_001);
    expect(starts).toEqual([MAX, MAX + 10_000]);
    await advance(1);
    expect(starts).toEqual([MAX, MAX + 10_000, 2 * MAX]);
    expect(periodic).toEqual([true, false, true]);
    await sync2.stop();
  });

  it('a periodic sync that served no request holds the next one back by END_GAP only; one that served a request by minInterval', async () => {
    const seen: Array<[number, boolean]> = [];
    const runner = new BoundedFrequencyRunner((info) => void seen.push([Date.now(), info.periodic]), {
      minIntervalMs: MIN, maxIntervalMs: MAX, retryIntervalMs: RETRY, clock: fakeClock,
    });
    runner.start();
    await advance(MAX + 200); // the periodic sync ran at MAX with nothing asked for
    runner.run(); // a change 200 ms after it starts at once, not at MAX + MIN
    await advance(0);
    expect(seen).toEqual([[MAX, true], [MAX + 200, false]]);
    runner.run(); // that one served a request: the next waits the min interval
    await advance(MIN - 1);
    expect(seen).toHaveLength(2);
    await advance(1);
    expect(seen).toEqual([[MAX, true], [MAX + 200, false], [MAX + 200 + MIN, false]]);
    // A periodic sync that also served a request keeps the min interval.
    await advance(MAX - 700 - MIN); // to 2 * MAX - 500
    runner.run();
    await advance(0);
    runner.run(); // waits for the min interval, past the periodic sync's time: served by it
    await advance(MIN);
    expect(seen.slice(-2)).toEqual([[2 * MAX - 500, false], [2 * MAX + 500, true]]);
    runner.run();
    await advance(MIN - 1);
    expect(seen.at(-1)).toEqual([2 * MAX + 500, true]);
    await advance(1);
    expect(seen.at(-1)).toEqual([2 * MAX + 500 + MIN, false]);
    await runner.stop();
  });

  it('a sync that verified everything moves the next periodic sync to a full maxInterval after its end', async () => {
    const seen: Array<[number, boolean]> = [];
    let first = true;
    const runner = new BoundedFrequencyRunner(async (info) => {
      seen.push([Date.now(), info.periodic]);
      if (!first) return;
      first = false;
      await new Promise((r) => setTimeout(r, 20_000)); // a long first sync that adopts the kernel
      return { verified: true };
    }, { minIntervalMs: MIN, maxIntervalMs: MAX, retryIntervalMs: RETRY, clock: fakeClock });
    runner.start();
    runner.run();
    await advance(MAX + 1); // without the result, the periodic sync would start at MAX, 10 s after the first one ended
    expect(seen).toEqual([[0, false]]);
    await advance(20_000 + MAX - (MAX + 1) - 1);
    expect(seen).toEqual([[0, false]]);
    await advance(1);
    expect(seen).toEqual([[0, false], [20_000 + MAX, true]]);
    await advance(MAX); // then every maxInterval from that periodic sync's start, as before
    expect(seen).toEqual([[0, false], [20_000 + MAX, true], [20_000 + 2 * MAX, true]]);
    await runner.stop();
  });

  it('a sync that does not say it verified everything leaves the periodic schedule as it was', async () => {
    const seen: number[] = [];
    const runner = new BoundedFrequencyRunner((info) => {
      if (info.periodic) seen.push(Date.now());
      else return { verified: false };
    }, { minIntervalMs: MIN, maxIntervalMs: MAX, retryIntervalMs: RETRY, clock: fakeClock });
    runner.start();
    runner.run();
    await advance(MAX);
    expect(seen).toEqual([MAX]);
    await runner.stop();
  });

  it('under steady requests the periodic sync still happens on schedule (kube-proxy churn)', async () => {
    const seen: Array<[number, boolean]> = [];
    const runner = new BoundedFrequencyRunner((info) => void seen.push([Date.now(), info.periodic]), {
      minIntervalMs: MIN, maxIntervalMs: MAX, retryIntervalMs: RETRY, clock: fakeClock,
    });
    runner.start();
    for (let t = 0; t < 3 * MAX; t += 100) {
      runner.run();
      await advance(100);
    }
    const periodicAt = seen.filter(([, p]) => p).map(([t]) => t);
    expect(periodicAt).toEqual([MAX, 2 * MAX, 3 * MAX]);
    expect(periodicAt[0]).toBeLessThanOrEqual(MAX + MIN);
    expect(periodicAt[1]! - periodicAt[0]!).toBeLessThanOrEqual(MAX + MIN);
    expect(seen.length).toBeGreaterThan(10); // and the requests were served all along
    await runner.stop();
  });

  it('retries a failed sync after retryInterval, doubling it per consecutive failure, and stops retrying on success', async () => {
    const boom = new Error('EBUSY');
    let calls = 0;
    const h = harness(() => {
      if (calls++ < 2) throw boom;
    });
    h.runner.start();
    h.runner.run();
    await advance(0);
    expect(h.errors).toEqual([boom]);
    await advance(RETRY - 1);
    expect(h.starts).toEqual([0]);
    await advance(1);
    expect(h.starts).toEqual([0, RETRY]);
    expect(h.errors).toEqual([boom, boom]);
    await advance(2 * RETRY - 1); // the second failure in a row waits twice as long
    expect(h.starts).toEqual([0, RETRY]);
    await advance(1);
    expect(h.starts).toEqual([0, RETRY, 3 * RETRY]);
    await advance(MAX - 3 * RETRY - 1); // succeeded: next is the periodic sync, on its own schedule
    expect(h.starts).toHaveLength(3);
    await advance(1);
    expect(h.starts).toEqual([0, RETRY, 3 * RETRY, MAX]);
    await h.runner.stop();
  });

  it('retries no sooner than minInterval and treats a rejected promise as a failure', async () => {
    const h = harness(() => Promise.reject(new Error('no')), { retryIntervalMs: 10, minIntervalMs: 2_000 });
    h.runner.start();
    h.runner.run();
    await advance(0);
    await advance(1_999);
    expect(h.starts).toEqual([0]);
    await advance(1);
    expect(h.starts).toEqual([0, 2_000]);
    expect(h.errors).toHaveLength(2);
    await h.runner.stop();
  });

  it('retryAfter() asks for a sync within the given time, even when called by the sync itself', async () => {
    let runner!: BoundedFrequencyRunner;
    let calls = 0;
    const h = harness(() => {
      if (calls++ === 0) runner.retryAfter(2_500); // e.g. a partial failure
    });
    runner = h.runner;
    h.runner.start();
    h.runner.run();
    await advance(0);
    await advance(2_499);
    expect(h.starts).toEqual([0]);
    await advance(1);
    expect(h.starts).toEqual([0, 2_500]);
    h.runner.retryAfter(0); // still bounded by minInterval
    await advance(MIN - 1);
    expect(h.starts).toHaveLength(2);
    await advance(1);
    expect(h.starts).toEqual([0, 2_500, 2_500 + MIN]);
    await h.runner.stop();
  });

  it('never runs the sync concurrently with itself', async () => {
    const gates: Array<() => void> = [];
    const h = harness(() => new Promise<void>((r) => gates.push(r)), { minIntervalMs: 0, maxIntervalMs: 100, retryIntervalMs: 0 });
    h.runner.start();
    for (let t = 0; t < 1_000; t += 10) {
      h.runner.run();
      h.runner.retryAfter(0);
      await advance(10);
    }
    expect(h.sync).toHaveBeenCalledTimes(1);
    gates.shift()!();
    await advance(0);
    expect(h.sync).toHaveBeenCalledTimes(2); // the requests made meanwhile became one sync
    gates.shift()!();
    await advance(0);
    expect(h.maxActive()).toBe(1);
    await h.runner.stop();
  });

  it('holds requests made before start() until start()', async () => {
    const h = harness();
    h.runner.run();
    h.runner.run();
    await advance(MAX * 2);
    expect(h.sync).not.toHaveBeenCalled();
    h.runner.start();
    await advance(0);
    expect(h.starts).toEqual([MAX * 2]);
    await h.runner.stop();
  });

  it('stop() waits for the sync in flight, then nothing else runs and no timer is left', async () => {
    const gate = deferred();
    const h = harness(() => gate.promise);
    h.runner.start();
    h.runner.run();
    await advance(0);
    h.runner.run();
    let stopped = false;
    const stopping = h.runner.stop().then(() => (stopped = true));
    await advance(0);
    expect(stopped).toBe(false);
    gate.resolve();
    await stopping;
    expect(stopped).toBe(true);
    expect(vi.getTimerCount()).toBe(0);
    h.runner.run();
    h.runner.retryAfter(0);
    h.runner.start();
    await advance(MAX * 3);
    expect(h.sync).toHaveBeenCalledTimes(1);
  });

  it('stop() cancels a pending sync and the periodic timer', async () => {
    const h = harness();
    h.runner.start();
    h.runner.run();
    await advance(0);
    h.runner.run(); // pending behind the min interval
    await h.runner.stop();
    expect(vi.getTimerCount()).toBe(0);
    await advance(MAX * 2);
    expect(h.sync).toHaveBeenCalledTimes(1);
  });

  it('keeps running after the error handler itself throws', async () => {
    let calls = 0;
    const sync = vi.fn(() => {
      if (calls++ === 0) throw new Error('first');
    });
    const runner = new BoundedFrequencyRunner(sync, {
      minIntervalMs: 0, maxIntervalMs: MAX, retryIntervalMs: 100, clock: fakeClock,
      onError: () => {
        throw new Error('handler');
      },
    });
    runner.start();
    runner.run();
    await advance(100);
    expect(sync).toHaveBeenCalledTimes(2);
    await runner.stop();
  });

  it('with maxInterval = Infinity, arms no timer while idle', async () => {
    const h = harness(undefined, { maxIntervalMs: Infinity });
    h.runner.start();
    expect(vi.getTimerCount()).toBe(0);
    h.runner.run();
    await advance(0);
    expect(h.sync).toHaveBeenCalledTimes(1);
    expect(vi.getTimerCount()).toBe(0);
    await h.runner.stop();
  });

  it('re-arms waits longer than a Node timer can hold', async () => {
    const day = 86_400_000;
    const h = harness(undefined, { maxIntervalMs: 30 * day });
    h.runner.start();
    await advance(25 * day);
    expect(h.sync).not.toHaveBeenCalled();
    await advance(5 * day);
    expect(h.starts).toEqual([30 * day]);
    await h.runner.stop();
  });

  it('rejects inconsistent intervals', () => {
    const sync = () => {};
    expect(() => new BoundedFrequencyRunner(sync, { minIntervalMs: 10, maxIntervalMs: 5, retryIntervalMs: 1 })).toThrow(/maxIntervalMs \(5\) must be >= minIntervalMs \(10\)/);
    expect(() => new BoundedFrequencyRunner(sync, { minIntervalMs: -1, maxIntervalMs: 5, retryIntervalMs: 1 })).toThrow(/minIntervalMs must be >= 0/);
    expect(() => new BoundedFrequencyRunner(sync, { minIntervalMs: 0, maxIntervalMs: 5, retryIntervalMs: Number.NaN })).toThrow(/retryIntervalMs/);
  });

  it('works on the system clock', async () => {
    vi.useRealTimers();
    const sync = vi.fn();
    const runner = new BoundedFrequencyRunner(sync, { minIntervalMs: 0, maxIntervalMs: 60_000, retryIntervalMs: 0 });
    runner.start();
    runner.run();
    await new Promise((r) => setTimeout(r, 20));
    expect(sync).toHaveBeenCalledTimes(1);
    await runner.stop();
  });

  it('on the system clock, a sync that may start at once starts in the same turn of the event loop (no 1 ms timer)', async () => {
    vi.useRealTimers();
    const sync = vi.fn();
    const runner = new BoundedFrequencyRunner(sync, { minIntervalMs: 1_000, maxIntervalMs: 60_000, retryIntervalMs: 0 });
    runner.start();
    runner.run();
    await new Promise((r) => setImmediate(r)); // queued after the runner's own
    expect(sync).toHaveBeenCalledTimes(1);
    runner.run(); // within the min interval: a timer, cancelled by stop()
    await runner.stop();
    await new Promise((r) => setTimeout(r, 20));
    expect(sync).toHaveBeenCalledTimes(1);
  });

  it('on the system clock, stop() cancels a sync that was to start at once', async () => {
    vi.useRealTimers();
    const sync = vi.fn();
    const runner = new BoundedFrequencyRunner(sync, { minIntervalMs: 0, maxIntervalMs: 60_000, retryIntervalMs: 0 });
    runner.start();
    runner.run();
    await runner.stop();
    await new Promise((r) => setTimeout(r, 20));
    expect(sync).not.toHaveBeenCalled();
  });
});
