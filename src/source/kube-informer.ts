// One resource listed and watched over plain HTTP (kube-http.ts), made to survive:
// - lists are paged (`limit` + `continue`); a list taking longer than listTimeoutMs is aborted
//   and retried;
// - watches ask for bookmarks and resume from the last resourceVersion seen (events and
//   bookmarks move it), so a watch the server closes costs one request, not a relist;
// - 410 Gone (HTTP status, watch ERROR event, expired continue token) relists at once; a relist
//   delivers only objects whose resourceVersion changed, and deletes those no longer listed;
// - any other failure is retried after a jittered exponential backoff bounded by maxMs.
// - resume(): a restarted daemon starts with the keys its predecessor had delivered and watches
//   from the resourceVersion it had reached, without a list (source/resume.ts); `listed` fires once
//   the watch has answered and its backlog has arrived (no event for RESUME_QUIET_MS, or at most
//   RESUME_MAX_MS). A 410 relists as above (the relist delivers every object again and deletes the
//   keys no longer listed); so does a first watch that fails otherwise (e.g. a resourceVersion the
//   server never had), ends, or has not caught up within listTimeoutMs.
// The cache is one resourceVersion per key: the objects themselves live only in the receiver.
import type { Logger } from '../log.js';
import { ApiError, describeError, isGone, readLines, type KubeHttp } from './kube-http.js';

/** Retry delays after a failed list or watch. */
export interface Backoff {
  initialMs: number;
  maxMs: number;
}

/** A decoded object as the API server sent it (only metadata is looked at here). */
export type RawObject = { metadata?: { name?: unknown; namespace?: unknown; resourceVersion?: unknown } } & Record<string, unknown>;

/** What an Informer reports. `listed` fires after each complete list was delivered. */
export interface InformerEvents {
  upsert(key: string, obj: RawObject): void;
  remove(key: string): void;
  listed(): void;
  failed(err: unknown): void;
}

/** Options of an Informer. */
export interface InformerOptions {
  /** The resource's collection path, e.g. `/api/v1/services`. */
  path: string;
  fieldSelector?: string;
  backoff: Backoff;
  /** A list (all its pages) taking longer than this is aborted and retried. */
  listTimeoutMs: number;
  /** Objects per list page (default 500). */
  pageSize?: number;
  /** The server ends a watch after about this long (default 5–10 min, random, as client-go). */
  watchTimeoutSeconds?: number;
  logger?: Logger | undefined;
  /**
   * Awaited after a list's (or watch's) response has arrived and before its body is read: what
   * the events need (the validation's modules) loads while the first request is under way.
   */
  beforeDecode?: () => Promise<unknown>;
}

/** A watch silent (no event, no bookmark) for its timeout plus this long is presumed dead. */
const WATCH_GRACE_MS = 60_000;

/**
 * A resumed watch counts as caught up (`listed`) this long after its last event (or its answer),
 * and at the latest RESUME_MAX_MS after its answer: an API server sends what happened since the
 * resourceVersion at once, then nothing until the next change.
 */
export const RESUME_QUIET_MS = 100;
export const RESUME_MAX_MS = 1_000;

/** `namespace/name` (cluster-scoped: `name`) of a raw object; '' without a name. */
export function rawKey(o: RawObject): string {
  const name = typeof o.metadata?.name === 'string' ? o.metadata.name : '';
  const ns = typeof o.metadata?.namespace === 'string' ? o.metadata.namespace : '';
  return ns ? [ns, name].join('/') : name; // one flat string (a template literal is a tree of parts), held per object
}

function versionOf(o: RawObject): string {
  return typeof o.metadata?.resourceVersion === 'string' ? o.metadata.resourceVersion : '';
}

/** List+watch of one resource that restarts itself after errors; see the file comment. */
export class Informer {
  readonly #http: KubeHttp;
  readonly #opts: InformerOptions;
  readonly #events: InformerEvents;
  /** resourceVersion of every object delivered and not deleted since. */
  readonly #known = new Map<string, string>();
  /** Where the next watch starts; '' = list first. */
  #rv = '';
  #failures = 0;
  #abort: AbortController | undefined;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #stopped = false;
  /** Resumed (resume()) and not yet caught up: the first watch stands in for the list. */
  #resuming = false;
  /** What a resumed watch waits for before it delivers anything (the receiver's restore). */
  #restored: Promise<unknown> = Promise.resolve();

  constructor(http: KubeHttp, opts: InformerOptions, events: InformerEvents) {
    this.#http = http;
    this.#opts = opts;
    this.#events = events;
  }

  /** The resourceVersion the next watch resumes from ('' before the first list). */
  get resourceVersion(): string {
    return this.#rv;
  }

  /** Objects currently cached (keys with their resourceVersion). */
  get size(): number {
    return this.#known.size;
  }

  /**
   * Before start(): the keys already delivered (by a daemon before this one) and the
   * resourceVersion they are current at; start() then watches from there instead of listing.
   * The watch's events wait for `restored` (the receiver taking back what those keys were); if it
   * rejects, the watch relists instead.
   */
  resume(resourceVersion: string, keys: Iterable<string>, restored: Promise<unknown> = Promise.resolve()): void {
    if (this.#loop || !resourceVersion) return;
    for (const key of keys) this.#known.set(key, '');
    this.#rv = resourceVersion;
    this.#resuming = true;
    this.#restored = restored;
  }

  /** Lists, then watches, until stop(); never rejects (failures go through `failed`). */
  start(): void {
    this.#loop ??= this.#run();
  }

  /** Stops for good: no more events, no open requests, no timers. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#abort?.abort(new Error('stopped'));
    this.#wake?.();
    await this.#loop;
  }

  async #run(): Promise<void> {
    while (!this.#stopped) {
      try {
        if (!this.#rv) await this.#list();
        else await this.#watch();
      } catch (err) {
        if (this.#stopped) break;
        if (isGone(err) || this.#resuming) {
          const msg = isGone(err) ? 'kubernetes: resourceVersion expired; relisting' : 'kubernetes: resuming the watch failed; relisting';
          this.#opts.logger?.info({ path: this.#opts.path, resourceVersion: this.#rv, err: describeError(err) }, msg);
          this.#rv = '';
          this.#resuming = false;
          continue;
        }
        this.#events.failed(err);
        await this.#backoff(err);
      }
    }
  }

  async #backoff(err: unknown): Promise<void> {
    const { initialMs, maxMs } = this.#opts.backoff;
    const delay = Math.min(maxMs, initialMs * 2 ** this.#failures) * (0.8 + 0.4 * Math.random());
    this.#failures++;
    this.#opts.logger?.warn({ path: this.#opts.path, err: describeError(err), attempt: this.#failures, retryInMs: Math.round(delay) }, 'kubernetes: list/watch failed; retrying');
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, delay);
      this.#wake = () => (clearTimeout(timer), resolve());
    });
    this.#wake = undefined;
  }

  #query(extra: Record<string, string>): string {
    const q = new URLSearchParams(extra);
    if (this.#opts.fieldSelector) q.set('fieldSelector', this.#opts.fieldSelector);
    return `${this.#opts.path}?${q.toString()}`;
  }

  async #list(): Promise<void> {
    const { listTimeoutMs, pageSize = 500 } = this.#opts;
    const abort = (this.#abort = new AbortController());
    const timer = setTimeout(() => abort.abort(new Error(`list timed out after ${listTimeoutMs} ms`)), listTimeoutMs);
    const seen = new Set<string>();
    let rv = '';
    try {
      let token = '';
      // Each item is handled as soon as its text has arrived (KubeHttp.getList).
      const onItem = (value: unknown): void => {
        if (this.#stopped || typeof value !== 'object' || value === null) return;
        const item = value as RawObject;
        const key = rawKey(item);
        seen.add(key);
        const version = versionOf(item);
        if (version && this.#known.get(key) === version) return;
        this.#known.set(key, version);
        this.#events.upsert(key, item);
      };
      do {
        const page = await this.#http.getList(this.#query({ limit: String(pageSize), ...(token ? { continue: token } : {}) }), abort.signal, onItem, this.#opts.beforeDecode);
        if (this.#stopped) return;
        if (!page.hasItems) throw new Error(`${this.#opts.path}: list response has no items`);
        const meta = page.members.metadata as { resourceVersion?: unknown; continue?: unknown } | undefined;
        token = typeof meta?.continue === 'string' ? meta.continue : '';
        rv = typeof meta?.resourceVersion === 'string' ? meta.resourceVersion : rv;
      } while (token);
    } catch (err) {
      throw abort.signal.aborted && !this.#stopped ? abort.signal.reason : err;
    } finally {
      clearTimeout(timer);
    }
    for (const key of this.#known.keys()) {
      if (seen.has(key)) continue;
      this.#known.delete(key);
      this.#events.remove(key);
    }
    if (!rv) throw new Error(`${this.#opts.path}: list response has no resourceVersion`);
    this.#rv = rv;
    this.#failures = 0;
    this.#events.listed();
  }

  async #watch(): Promise<void> {
    const timeoutSeconds = this.#opts.watchTimeoutSeconds ?? Math.round(300 * (1 + Math.random()));
    const abort = (this.#abort = new AbortController());
    const idle = timeoutSeconds * 1000 + WATCH_GRACE_MS;
    let timer = setTimeout(() => abort.abort(new Error(`watch silent for ${idle} ms`)), idle);
    const started = Date.now();
    let events = 0;
    let caughtUp: { refresh(): void; cancel(): void } | undefined;
    // A resumed watch stands in for the list: it has the list's time to answer and catch up.
    const resumed = this.#resuming;
    const deadline = resumed ? setTimeout(() => abort.abort(new Error(`resumed watch not caught up after ${this.#opts.listTimeoutMs} ms`)), this.#opts.listTimeoutMs) : undefined;
    try {
      const res = await this.#http.get(
        this.#query({ watch: 'true', allowWatchBookmarks: 'true', resourceVersion: this.#rv, timeoutSeconds: String(timeoutSeconds) }),
        abort.signal,
      );
      await this.#opts.beforeDecode?.(); // a resumed watch is the first answer: nothing was listed
      if (resumed) await this.#restored;
      caughtUp = resumed ? this.#whenCaughtUp(() => clearTimeout(deadline)) : undefined;
      await readLines(res, (e) => {
        if (this.#stopped) return;
        timer.refresh();
        events++;
        this.#onEvent(e as { type?: unknown; object?: RawObject });
        caughtUp?.refresh();
      });
    } catch (err) {
      throw abort.signal.aborted && !this.#stopped ? abort.signal.reason : err;
    } finally {
      clearTimeout(timer);
      clearTimeout(deadline);
      caughtUp?.cancel();
    }
    if (this.#resuming && !this.#stopped) throw new Error('resumed watch ended before it caught up');
    if (events > 0 || Date.now() - started > 1000) this.#failures = 0;
    // A watch the server ends at once, again and again, must not spin.
    else await this.#backoff(new Error('watch ended at once without events'));
  }

  /**
   * A resumed watch has answered: `listed` once no event came for RESUME_QUIET_MS (refresh() per
   * event), at the latest RESUME_MAX_MS from now; then `onDone`. A watch that ends, fails or
   * does not answer first relists (#watch, #run).
   */
  #whenCaughtUp(onDone: () => void): { refresh(): void; cancel(): void } {
    const done = (): void => {
      clearTimeout(quiet);
      clearTimeout(cap);
      onDone();
      if (!this.#resuming || this.#stopped) return;
      this.#resuming = false;
      this.#failures = 0;
      this.#events.listed();
    };
    const quiet = setTimeout(done, RESUME_QUIET_MS);
    const cap = setTimeout(done, RESUME_MAX_MS);
    return { refresh: () => void quiet.refresh(), cancel: () => (clearTimeout(quiet), clearTimeout(cap)) };
  }

  #onEvent(e: { type?: unknown; object?: RawObject }): void {
    const obj = e.object;
    if (typeof obj !== 'object' || obj === null) throw new Error(`${this.#opts.path}: watch event ${String(e.type)} without an object`);
    const version = versionOf(obj);
    switch (e.type) {
      case 'ADDED':
      case 'MODIFIED': {
        const key = rawKey(obj);
        this.#known.set(key, version);
        this.#events.upsert(key, obj);
        break;
      }
      case 'DELETED': {
        const key = rawKey(obj);
        if (this.#known.delete(key)) this.#events.remove(key);
        break;
      }
      case 'BOOKMARK':
        this.#opts.logger?.debug({ path: this.#opts.path, resourceVersion: version }, 'kubernetes: bookmark');
        break;
      case 'ERROR': {
        const s = obj as { code?: unknown; message?: unknown };
        throw new ApiError(typeof s.code === 'number' ? s.code : 0, typeof s.message === 'string' ? s.message : 'watch error');
      }
      default:
        throw new Error(`${this.#opts.path}: unknown watch event type ${JSON.stringify(e.type)}`);
    }
    if (version) this.#rv = version;
  }
}
