// A bounded-frequency runner, after kubernetes pkg/proxy/runner/bounded_frequency_runner.go:
// run() asks for a sync; syncs start at least minInterval apart, a periodic sync starts every
// maxInterval on its own schedule (syncs asked for in between do not postpone it, and are not
// periodic), a failed sync is retried after retryInterval (doubled per consecutive failure),
// bursts of requests coalesce into one sync, and the sync never runs concurrently with itself.
// A sync that verified everything on its own (SyncResult.verified) moves the periodic schedule
// to a full maxInterval after its end, so a long first sync is not followed at once by another
// whole read.
//
// minInterval is counted from the start of the previous sync, as kube-proxy's token-bucket
// runner did before 1.33 (today's counts it from the end): a change then waits at most
// minInterval plus the sync that writes it, not plus two syncs. The rate of syncs is bounded
// the same way. A sync that ran longer than minInterval is followed by a pause of a tenth of
// it (END_GAP), so slow syncs never run back to back. A periodic sync that served no request
// (nothing had changed) holds the next one back by that pause only: a change arriving just after
// it would otherwise wait up to minInterval for nothing (at most one more sync per maxInterval).

/** Time and timers, injectable so tests can use a fake clock. Times are milliseconds. */
export interface RunnerClock {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/**
 * The real clock: monotonic time and Node's timers (looked up at call time, so fake timers apply).
 * A wait of 0 is a setImmediate, not a timer: a change after a quiet spell starts its sync in the
 * same turn of the event loop (a 0 ms timer fires after at least 1 ms; 1.7 ms in UML).
 */
export const systemClock: RunnerClock = {
  now: () => performance.now(),
  setTimeout: (callback, ms) => (ms > 0 ? setTimeout(callback, ms) : { immediate: setImmediate(callback) }),
  clearTimeout: (handle) => {
    if (typeof handle === 'object' && handle !== null && 'immediate' in handle) clearImmediate((handle as { immediate: NodeJS.Immediate }).immediate);
    else clearTimeout(handle as ReturnType<typeof setTimeout>);
  },
};

/** Options of a BoundedFrequencyRunner; intervals are milliseconds. */
export interface RunnerOptions {
  /** Shortest time from the start of one sync to the start of the next (kube-proxy's minSyncPeriod); see the file comment. */
  minIntervalMs: number;
  /** Period of the periodic syncs (syncPeriod), counted from start() and then from each periodic sync's start; Infinity = none. */
  maxIntervalMs: number;
  /** After a failed sync, run again this soon (still no sooner than minIntervalMs); doubled per consecutive failure, up to maxIntervalMs. */
  retryIntervalMs: number;
  clock?: RunnerClock;
  /** Called with whatever a failed sync threw or rejected with. */
  onError?: (err: unknown) => void;
}

/** What the runner tells the sync function. */
export interface SyncInfo {
  /** This is the periodic sync (maxInterval came round), possibly serving requests too. */
  periodic: boolean;
}

/** What a sync may tell the runner. */
export interface SyncResult {
  /**
   * This sync read and verified the whole state, as the periodic one does (the IPVS proxier's
   * first sync adopts the kernel that way): the next periodic sync is maxInterval after its end.
   */
  verified?: boolean;
}

// Node's timers overflow past 2^31-1 ms (and then fire at once); longer waits are re-armed.
const MAX_TIMER_MS = 2 ** 31 - 1;

/** The least pause after a sync, as a fraction of minInterval (see the file comment). */
export const END_GAP = 0.1;

/** Runs an async sync function at a bounded frequency; see the file comment. Call start() to begin. */
export class BoundedFrequencyRunner {
  readonly #sync: (info: SyncInfo) => Promise<SyncResult | void> | SyncResult | void;
  readonly #min: number;
  readonly #max: number;
  readonly #retry: number;
  readonly #clock: RunnerClock;
  readonly #onError: (err: unknown) => void;

  #started = false;
  #stopped = false;
  #requested = false;
  #askedAt = -Infinity;
  #inFlight: Promise<void> | undefined;
  #notBefore = -Infinity; // max(last start + minInterval (unless it served nothing), last end + minInterval * END_GAP)
  #periodicAt = Infinity; // start() + maxInterval, then the last periodic sync's start (or a verified sync's end) + maxInterval
  #retryAt = Infinity;
  #failures = 0;
  #timer: unknown;
  #timerAt = Infinity;

  /** Throws a RangeError if an interval is negative or maxIntervalMs < minIntervalMs. */
  constructor(sync: (info: SyncInfo) => Promise<SyncResult | void> | SyncResult | void, options: RunnerOptions) {
    const { minIntervalMs, maxIntervalMs, retryIntervalMs } = options;
    for (const [name, v] of Object.entries({ minIntervalMs, maxIntervalMs, retryIntervalMs })) {
      if (!(v >= 0)) throw new RangeError(`${name} must be >= 0, got ${v}`);
    }
    if (maxIntervalMs < minIntervalMs) throw new RangeError(`maxIntervalMs (${maxIntervalMs}) must be >= minIntervalMs (${minIntervalMs})`);
    this.#sync = sync;
    this.#min = minIntervalMs;
    this.#max = maxIntervalMs;
    this.#retry = retryIntervalMs;
    this.#clock = options.clock ?? systemClock;
    this.#onError = options.onError ?? (() => {});
  }

  /** Starts the loop: a run() made before now takes effect at once; the first periodic sync is maxInterval away. */
  start(): void {
    if (this.#started || this.#stopped) return;
    this.#started = true;
    this.#periodicAt = this.#clock.now() + this.#max;
    this.#schedule();
  }

  /**
   * Asks for a sync as soon as the min interval allows; requests made before it starts coalesce
   * into one sync. Only the first request of a burst reads the clock (a syscall in UML, and the
   * initial replay makes one request per object): the sync that serves them all is armed by then.
   */
  run(): void {
    if (this.#stopped || this.#requested) return;
    this.#requested = true;
    this.#askedAt = this.#clock.now();
    this.#schedule(this.#askedAt);
  }

  /** Asks for a sync no later than `ms` from now (still respecting the min interval), e.g. after a partial failure. */
  retryAfter(ms: number): void {
    if (this.#stopped) return;
    this.#retryAt = Math.min(this.#retryAt, this.#clock.now() + Math.max(0, ms));
    this.#schedule();
  }

  /**
   * Milliseconds since a sync was last asked for by run(), counted from the start of the sync that
   * served the request (later requests of a burst are not timed); 0 while one asked for (or a
   * retry) has not started.
   */
  quietFor(): number {
    if (this.#requested || this.#retryAt !== Infinity) return 0;
    return this.#clock.now() - this.#askedAt;
  }

  /**
   * Milliseconds until the next sync may start (the min interval after the last one); 0 while one
   * runs; below 0 when one could start at once (if asked for). Background work (the periodic
   * verification) uses it to stay out of the syncs' way.
   */
  nextSyncIn(): number {
    if (this.#inFlight !== undefined) return 0;
    const left = this.#notBefore - this.#clock.now();
    return left > 0 ? left : -1;
  }

  /** Stops the loop; resolves once a sync in flight has finished. No sync starts afterwards. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#disarm();
    await this.#inFlight;
  }

  /** When the next sync is due, ignoring the min interval. */
  #dueAt(): number {
    return Math.min(this.#requested ? -Infinity : Infinity, this.#periodicAt, this.#retryAt);
  }

  /** The retry interval after the current run of failures: doubled each time, capped at maxInterval. */
  #backoff(): number {
    const factor = 2 ** Math.min(30, this.#failures - 1);
    return Math.max(this.#retry, Math.min(this.#retry * factor, this.#max));
  }

  /** Arms the timer for the next sync; `now`: the clock's time, if the caller has just read it (a syscall in UML). */
  #schedule(now?: number): void {
    if (!this.#started || this.#stopped || this.#inFlight !== undefined) return; // a finishing sync reschedules
    const due = this.#dueAt();
    if (due === Infinity) return this.#disarm();
    const at = Math.max(due, this.#notBefore);
    if (this.#timer !== undefined && this.#timerAt === at) return;
    this.#disarm();
    const delay = Math.min(MAX_TIMER_MS, Math.max(0, at - (now ?? this.#clock.now())));
    this.#timerAt = at;
    this.#timer = this.#clock.setTimeout(() => this.#fire(), delay);
  }

  #disarm(): void {
    if (this.#timer !== undefined) this.#clock.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.#timerAt = Infinity;
  }

  #fire(): void {
    this.#timer = undefined;
    this.#timerAt = Infinity;
    if (this.#stopped || this.#inFlight !== undefined) return;
    const now = this.#clock.now();
    if (Math.max(this.#dueAt(), this.#notBefore) > now) return this.#schedule(now); // a capped long wait
    this.#inFlight = this.#execute(now);
  }

  async #execute(start: number): Promise<void> {
    const asked = this.#requested;
    const retrying = this.#retryAt <= start;
    this.#requested = false;
    this.#retryAt = Infinity; // this sync serves any pending retry; retryAfter() during it still counts
    if (asked) this.#askedAt = start;
    const periodic = start >= this.#periodicAt;
    if (periodic) this.#periodicAt = start + this.#max;
    let failed = false;
    let result: SyncResult | void = undefined;
    try {
      // Called from a microtask, so a sync that throws synchronously still settles after #inFlight is set.
      result = await Promise.resolve().then(() => this.#sync({ periodic }));
    } catch (err) {
      failed = true;
      try {
        this.#onError(err);
      } catch {
        // a throwing error handler must not wedge the loop
      }
    }
    const end = this.#clock.now();
    const servedNothing = periodic && !asked && !retrying; // see the file comment
    this.#notBefore = Math.max(servedNothing ? -Infinity : start + this.#min, end + this.#min * END_GAP);
    if (result?.verified) this.#periodicAt = Math.max(this.#periodicAt, end + this.#max);
    this.#failures = failed ? this.#failures + 1 : 0;
    if (failed) this.#retryAt = Math.min(this.#retryAt, end + this.#backoff());
    this.#inFlight = undefined;
    this.#schedule(end);
  }
}
