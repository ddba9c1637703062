// Gives memory back after bursts of work. Decoding the initial lists and the first sync leave
// V8's heap holding tens of MiB of pages that only garbage used, and glibc's heap the freed
// buffers of the large netlink batches: neither is returned to the kernel on its own while the
// daemon idles, so RSS would stay at its start-up peak. After the first sync the keeper runs one
// blocking memory-reducing GC (V8 compacts and unmaps its free pages; tens to hundreds of ms,
// once). Later, at most once per interval, when RSS has grown by more than a tenth over what it
// was after the last full release: the same blocking release if the daemon is idle (no sync
// asked for), else an incremental one (V8 marks in steps; the call holds the loop briefly). Each
// ends with malloc_trim.
import type { Logger } from './log.js';
import { native } from './native/binding.js';

/** What `releaseMemory` does: full = blocking compaction, otherwise incremental. */
export type ReleaseFn = (full: boolean) => void;

export interface MemoryKeeperOptions {
  logger: Logger;
  /** Minimum time between two releases after the first (the daemon uses its sync period). */
  intervalMs: number;
  /** True when no sync is waiting (a blocking release then delays nothing); default: always busy. */
  idle?: () => boolean;
  release?: ReleaseFn;
  now?: () => number;
  rss?: () => number;
  /** How the release is deferred past the sync that triggered it (tests run it at once). */
  defer?: (fn: () => void) => void;
}

const MiB = (b: number): number => Math.round(b / 2 ** 20);

/** RSS growth over the last full release that makes a release worth it. */
export const GROWTH = 1.1;

export class MemoryKeeper {
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #release: ReleaseFn;
  readonly #now: () => number;
  readonly #rss: () => number;
  readonly #defer: (fn: () => void) => void;
  readonly #idle: () => boolean;
  #last: number | null = null;
  /** RSS right after the last full release. */
  #baseline = 0;
  #pending = false;

  constructor(opts: MemoryKeeperOptions) {
    this.#logger = opts.logger;
    this.#intervalMs = opts.intervalMs;
    this.#release = opts.release ?? ((full) => native.releaseMemory(full));
    this.#now = opts.now ?? Date.now;
    this.#rss = opts.rss ?? (() => process.memoryUsage.rss());
    this.#defer = opts.defer ?? ((fn) => void setImmediate(fn));
    this.#idle = opts.idle ?? (() => false);
  }

  /** Call after each successful sync. */
  afterSync(): void {
    if (this.#pending) return;
    const first = this.#last === null;
    if (!first && (this.#now() - this.#last! < this.#intervalMs || this.#rss() <= this.#baseline * GROWTH)) return;
    this.#pending = true;
    this.#defer(() => this.#run(first));
  }

  #run(first: boolean): void {
    this.#pending = false;
    const full = first || this.#idle();
    const before = this.#rss();
    const t0 = this.#now();
    try {
      this.#release(full);
    } catch (e) {
      this.#logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'releasing memory failed');
    }
    this.#last = this.#now();
    const after = this.#rss();
    if (full) this.#baseline = after;
    const fields = { rssMiB: MiB(before), afterMiB: MiB(after), durationMs: this.#last - t0 };
    if (first) this.#logger.info(fields, 'memory released after the first sync');
    else this.#logger.debug({ ...fields, full }, full ? 'memory released' : 'memory release started');
  }
}
