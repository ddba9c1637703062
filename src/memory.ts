// Gives memory back after bursts of work. Decoding the initial lists and the first sync leave
// V8's heap holding tens of MiB of pages that only garbage used, and glibc's heap the freed
// buffers of the large netlink batches: neither is returned to the kernel on its own while the
// daemon idles, so RSS would stay at its start-up peak. After the first sync the keeper runs one
// blocking memory-reducing GC (V8 compacts and unmaps its free pages; tens to hundreds of ms, once)
// and then, at most once per interval and only after syncs that did work, an incremental one that
// never blocks the event loop. Both end with malloc_trim.
import type { Logger } from './log.js';
import { native } from './native/binding.js';

/** What `releaseMemory` does: full = blocking compaction, otherwise incremental. */
export type ReleaseFn = (full: boolean) => void;

export interface MemoryKeeperOptions {
  logger: Logger;
  /** Minimum time between two incremental releases (the daemon uses its sync period). */
  intervalMs: number;
  release?: ReleaseFn;
  now?: () => number;
  rss?: () => number;
  /** How the release is deferred past the sync that triggered it (tests run it at once). */
  defer?: (fn: () => void) => void;
}

const MiB = (b: number): number => Math.round(b / 2 ** 20);

export class MemoryKeeper {
  readonly #logger: Logger;
  readonly #intervalMs: number;
  readonly #release: ReleaseFn;
  readonly #now: () => number;
  readonly #rss: () => number;
  readonly #defer: (fn: () => void) => void;
  #last: number | null = null;
  #pending = false;

  constructor(opts: MemoryKeeperOptions) {
    this.#logger = opts.logger;
    this.#intervalMs = opts.intervalMs;
    this.#release = opts.release ?? ((full) => native.releaseMemory(full));
    this.#now = opts.now ?? Date.now;
    this.#rss = opts.rss ?? (() => process.memoryUsage.rss());
    this.#defer = opts.defer ?? ((fn) => void setImmediate(fn));
  }

  /** Call after each sync; `didWork` when it changed or read more than a no-op. */
  afterSync(didWork = true): void {
    if (this.#pending) return;
    const first = this.#last === null;
    if (!first && (!didWork || this.#now() - this.#last! < this.#intervalMs)) return;
    this.#pending = true;
    this.#defer(() => this.#run(first));
  }

  #run(full: boolean): void {
    this.#pending = false;
    const before = this.#rss();
    const t0 = this.#now();
    try {
      this.#release(full);
    } catch (e) {
      this.#logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'releasing memory failed');
    }
    this.#last = this.#now();
    if (full) {
      this.#logger.info({ rssMiB: MiB(before), afterMiB: MiB(this.#rss()), durationMs: this.#last - t0 }, 'memory released after the first sync');
    } else {
      this.#logger.debug({ rssMiB: MiB(before), afterMiB: MiB(this.#rss()), durationMs: this.#last - t0 }, 'memory release started');
    }
  }
}
