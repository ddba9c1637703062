// Gives memory back after bursts of work. Decoding the initial lists and the first sync leave
// V8's heap holding tens of MiB of pages that only garbage used, and glibc's heap the freed
// buffers of the large netlink batches: neither is returned to the kernel on its own while the
// daemon idles, so RSS would stay at its start-up peak. After the first sync the keeper runs one
// blocking memory-reducing GC (V8 compacts and unmaps its free pages) and malloc_trim: tens of
// ms on a node, up to a second in UML at 3,000 Services. Later, at most once per interval and
// only when RSS has grown by more than a tenth over its value after the last release, the same
// release, but only once no change has been asked for during QUIET_MS: the release blocks the
// event loop, and a change that arrived during it would wait. Under steady churn RSS therefore
// stays where V8's own GCs keep it, and comes back within QUIET_MS after the churn stops.
import type { Logger } from './log.js';
import { native } from './native/binding.js';

export interface MemoryKeeperOptions {
  logger: Logger;
  /** Minimum time between two releases after the first (the daemon uses its sync period). */
  intervalMs: number;
  /** Milliseconds since the last change was asked for (the daemon asks its runner); default: never quiet. */
  quietFor?: () => number;
  release?: () => void;
  now?: () => number;
  rss?: () => number;
  /** How the first release is deferred past the sync that triggered it (tests run it at once). */
  defer?: (fn: () => void) => void;
  /** Runs `fn` in `ms` without keeping the process alive (tests drive it by hand). */
  later?: (fn: () => void, ms: number) => void;
}

const MiB = (b: number): number => Math.round(b / 2 ** 20);

/** RSS growth over the last release that makes a release worth it. */
export const GROWTH = 1.1;

/** Time without a change asked for before a later release may block the event loop. */
export const QUIET_MS = 5_000;

export class MemoryKeeper {
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #release: () => void;
  readonly #now: () => number;
  readonly #rss: () => number;
  readonly #defer: (fn: () => void) => void;
  readonly #later: (fn: () => void, ms: number) => void;
  readonly #quietFor: () => number;
  #last: number | null = null;
  /** RSS right after the last release. */
  #baseline = 0;
  /** A release (or a wait for quiet) is scheduled. */
  #pending = false;

  constructor(opts: MemoryKeeperOptions) {
    this.#logger = opts.logger;
    this.#intervalMs = opts.intervalMs;
    this.#release = opts.release ?? (() => native.releaseMemory());
    this.#now = opts.now ?? Date.now;
    this.#rss = opts.rss ?? (() => process.memoryUsage.rss());
    this.#defer = opts.defer ?? ((fn) => void setImmediate(fn));
    this.#later = opts.later ?? ((fn, ms) => void setTimeout(fn, ms).unref());
    this.#quietFor = opts.quietFor ?? (() => 0);
  }

  /** Call after each successful sync. */
  afterSync(): void {
    if (this.#pending) return;
    if (this.#last === null) {
      this.#pending = true;
      this.#defer(() => this.#run(true));
      return;
    }
    this.#check();
  }

  /** A later release: due (interval passed, RSS grew) and quiet, or checked again once it could be quiet. */
  #check(): void {
    if (this.#now() - this.#last! < this.#intervalMs || this.#rss() <= this.#baseline * GROWTH) return;
    const quiet = this.#quietFor();
    this.#pending = true;
    if (quiet >= QUIET_MS) this.#defer(() => this.#run(false));
    else
      this.#later(() => {
        this.#pending = false;
        this.#check();
      }, QUIET_MS - quiet);
  }

  #run(first: boolean): void {
    this.#pending = false;
    const before = this.#rss();
    const t0 = this.#now();
    try {
      this.#release();
    } catch (e) {
      this.#logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'releasing memory failed');
    }
    this.#last = this.#now();
    const after = this.#rss();
    this.#baseline = after;
    const fields = { rssMiB: MiB(before), afterMiB: MiB(after), durationMs: this.#last - t0 };
    if (first) this.#logger.info(fields, 'memory released after the first sync');
    else this.#logger.debug(fields, 'memory released');
  }
}
