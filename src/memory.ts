// Gives memory back after bursts of work. The initial lists and the first sync leave V8's heap
// holding pages only garbage used, and glibc's heap the freed buffers of large netlink batches;
// neither is returned to the kernel on its own, so RSS would stay at its start-up peak. A full
// release (a blocking memory-reducing GC, then malloc_trim) runs after the first sync, and later,
// whenever RSS has grown by more than QUIET_GROWTH over its value after the last full release,
// once no change has been asked for during QUIET_MS (its GC blocks the event loop, and a change
// arriving during it would wait). Until then, if RSS grew by more than GROWTH, an incremental
// release (V8 marks in steps) runs right after a sync, at most once per interval: without it
// RSS climbs under steady churn. Figures: docs/decisions.md.
import type { Logger } from './log.js';
import { native } from './native/binding.js';

/** What `releaseMemory` does: full = blocking compaction, otherwise incremental. */
export type ReleaseFn = (full: boolean) => void;

export interface MemoryKeeperOptions {
  logger: Logger;
  /** Minimum time between two incremental releases (the daemon uses its sync period). */
  intervalMs: number;
  /** Milliseconds since the last change was asked for (the daemon asks its runner); default: never quiet. */
  quietFor?: () => number;
  release?: ReleaseFn;
  now?: () => number;
  rss?: () => number;
  /** Runs `fn` right after the sync that called afterSync() (tests run it by hand). */
  defer?: (fn: () => void) => void;
  /** Runs `fn` in `ms` without keeping the process alive (tests drive it by hand). */
  later?: (fn: () => void, ms: number) => void;
}

const MiB = (b: number): number => Math.round(b / 2 ** 20);

/** RSS growth over the last full release that makes an incremental release worth it while changes come. */
export const GROWTH = 1.1;

/** RSS growth over the last full release that makes a full release worth it once quiet. */
export const QUIET_GROWTH = 1.05;

/** Time without a change asked for before a full release may block the event loop. */
export const QUIET_MS = 5_000;

type Kind = 'first' | 'full' | 'incremental';

export class MemoryKeeper {
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #release: ReleaseFn;
  readonly #now: () => number;
  readonly #rss: () => number;
  readonly #defer: (fn: () => void) => void;
  readonly #later: (fn: () => void, ms: number) => void;
  readonly #quietFor: () => number;
  #released = false;
  #lastIncremental = -Infinity;
  /** RSS right after the last full release. */
  #baseline = 0;
  /** A release is deferred; a quiet check is armed. */
  #deferred = false;
  #armed = false;

  constructor(opts: MemoryKeeperOptions) {
    this.#logger = opts.logger;
    this.#intervalMs = opts.intervalMs;
    this.#release = opts.release ?? ((full) => native.releaseMemory(full));
    this.#now = opts.now ?? Date.now;
    this.#rss = opts.rss ?? (() => process.memoryUsage.rss());
    this.#defer = opts.defer ?? ((fn) => void setImmediate(fn));
    this.#later = opts.later ?? ((fn, ms) => void setTimeout(fn, ms).unref());
    this.#quietFor = opts.quietFor ?? (() => 0);
  }

  /** Call after each successful sync (and after each periodic verification). */
  afterSync(): void {
    if (this.#deferred) return;
    if (!this.#released) return this.#schedule('first');
    // One read of RSS per sync.
    const rss = this.#rss();
    if (!this.#grown(QUIET_GROWTH, rss)) return;
    if (this.#quietFor() >= QUIET_MS) return this.#schedule('full');
    if (this.#grown(GROWTH, rss) && this.#now() - this.#lastIncremental >= this.#intervalMs) this.#schedule('incremental');
    this.#arm();
  }

  /**
   * Call when the periodic verification is done. While changes come (no QUIET_MS without one),
   * memory is not looked at now: a release would land wherever the verification happened to end,
   * e.g. in the middle of the next sync; the next sync's afterSync() looks right after itself
   * instead, and a full release once it is quiet is armed here. Otherwise (quiet, or before the
   * first release) as afterSync().
   */
  afterVerification(): void {
    if (!this.#released || this.#quietFor() >= QUIET_MS) return this.afterSync();
    if (!this.#deferred && this.#grown(QUIET_GROWTH)) this.#arm();
  }

  #grown(factor: number, rss = this.#rss()): boolean {
    return rss > this.#baseline * factor;
  }

  #schedule(kind: Kind): void {
    this.#deferred = true;
    this.#defer(() => {
      this.#deferred = false;
      this.#run(kind);
    });
  }

  /** Checks again once it could be quiet: a full release then, if RSS is still up. */
  #arm(): void {
    if (this.#armed) return;
    this.#armed = true;
    this.#later(
      () => {
        this.#armed = false;
        if (!this.#grown(QUIET_GROWTH) || this.#deferred) return;
        if (this.#quietFor() >= QUIET_MS) this.#schedule('full');
        else this.#arm();
      },
      Math.max(1, QUIET_MS - this.#quietFor()),
    );
  }

  #run(kind: Kind): void {
    const full = kind !== 'incremental';
    const before = this.#rss();
    const t0 = this.#now();
    try {
      this.#release(full);
    } catch (e) {
      this.#logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'releasing memory failed');
    }
    const t1 = this.#now();
    const after = this.#rss();
    if (full) {
      this.#released = true;
      this.#baseline = after;
    } else this.#lastIncremental = t1;
    const fields = { rssMiB: MiB(before), afterMiB: MiB(after), durationMs: t1 - t0 };
    if (kind === 'first') this.#logger.info(fields, 'memory released after the first sync');
    else this.#logger.debug({ ...fields, full }, full ? 'memory released' : 'memory release started');
  }
}
