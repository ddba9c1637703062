// One resource list+watched by client-node's informer (ListWatch), made to survive: a watch
// that ends is resumed by ListWatch itself, 410 Gone relists (ListWatch), and any other error
// (list or watch failed or a list timed out, API server down) restarts the informer after a
// jittered exponential backoff, bounded by maxMs, forever until stop(). stop() aborts every
// request it started.
import { ListWatch, Watch, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';

import type { Logger } from '../log.js';

/** Retry delays after a failed list or watch. */
export interface Backoff {
  initialMs: number;
  maxMs: number;
}

/** What a ResilientInformer reports. `listed` fires after each list's objects were delivered. */
export interface InformerEvents {
  upsert(obj: KubernetesObject): void;
  remove(obj: KubernetesObject): void;
  listed(): void;
  failed(err: unknown): void;
}

/** Options of a ResilientInformer. */
export interface InformerOptions {
  /** The resource's collection path, e.g. `/api/v1/services`. */
  path: string;
  /** Lists the resource; the signal aborts the request (timeout, stop). */
  list: (signal: AbortSignal) => Promise<KubernetesListObject<KubernetesObject>>;
  fieldSelector?: string;
  backoff: Backoff;
  /** A list taking longer than this is aborted and retried. */
  listTimeoutMs: number;
  logger?: Logger | undefined;
}

/** A Watch that remembers its requests, so stop() can abort one still waiting for headers. */
class StoppableWatch extends Watch {
  stopped = false;
  readonly #open = new Set<AbortController>();

  override async watch(
    path: string,
    params: Record<string, string | number | boolean | undefined>,
    callback: (phase: string, apiObj: any, watchObj?: any) => void,
    done: (err: any) => void,
  ): Promise<AbortController> {
    if (this.stopped) return aborted();
    let finished = false; // done may be called before super.watch returns (e.g. HTTP 410)
    let controller: AbortController | undefined;
    controller = await super.watch(path, params, callback, (err) => {
      finished = true;
      if (controller) this.#open.delete(controller);
      done(err);
    });
    if (this.stopped) controller.abort();
    else if (!finished) this.#open.add(controller);
    return controller;
  }

  stop(): void {
    this.stopped = true;
    for (const c of this.#open) c.abort();
    this.#open.clear();
  }
}

/** One line for a failed request: `HTTP 403: <Status message>` or the error's first line. */
export function describeError(err: unknown): string {
  const e = (err ?? {}) as { code?: unknown; statusCode?: unknown; body?: unknown; message?: unknown };
  const status = typeof e.code === 'number' ? e.code : typeof e.statusCode === 'number' ? e.statusCode : undefined;
  if (status !== undefined) {
    let detail = '';
    try {
      const body = typeof e.body === 'string' ? JSON.parse(e.body) : e.body;
      detail = typeof body?.message === 'string' ? `: ${body.message}` : '';
    } catch {
      // not JSON: the status is enough
    }
    return `HTTP ${status}${detail}`;
  }
  return String(e.message ?? err).split('\n')[0]!;
}

function aborted(): AbortController {
  const c = new AbortController();
  c.abort();
  return c;
}

/** An informer that restarts itself after errors; see the file comment. */
export class ResilientInformer {
  readonly #opts: InformerOptions;
  readonly #watch: StoppableWatch;
  readonly #informer: ListWatch<KubernetesObject>;
  #failures = 0;
  #startedAt = 0;
  #timer: NodeJS.Timeout | undefined;
  #listing: AbortController | undefined;
  #stopped = false;

  constructor(kc: KubeConfig, opts: InformerOptions, events: InformerEvents) {
    this.#opts = opts;
    this.#watch = new StoppableWatch(kc);
    const list = async (): Promise<KubernetesListObject<KubernetesObject>> => {
      if (this.#stopped) throw new Error('stopped');
      const abort = (this.#listing = new AbortController());
      const timeout = setTimeout(() => abort.abort(new Error(`list timed out after ${opts.listTimeoutMs} ms`)), opts.listTimeoutMs);
      const result = await opts.list(abort.signal).then(
        (r) => (clearTimeout(timeout), r),
        (err: unknown) => {
          clearTimeout(timeout);
          throw abort.signal.aborted ? abort.signal.reason : err;
        },
      );
      this.#failures = 0;
      // NOTE: ListWatch.doneHandler (client-node cache.js) delivers the listed objects
      // synchronously once this promise settles; setImmediate runs after that.
      setImmediate(() => this.#stopped || events.listed());
      return result;
    };
    this.#informer = new ListWatch(opts.path, this.#watch, list, false, undefined, opts.fieldSelector);
    this.#informer.on('add', (o) => this.#stopped || events.upsert(o));
    this.#informer.on('update', (o) => this.#stopped || events.upsert(o));
    this.#informer.on('delete', (o) => this.#stopped || events.remove(o));
    this.#informer.on('error', (err) => {
      if (this.#stopped) return;
      events.failed(err);
      this.#retry(err);
    });
  }

  /** Lists, then watches; never rejects (failures go through `failed` and are retried). */
  start(): void {
    this.#startedAt = Date.now();
    this.#informer.start().catch((err: unknown) => this.#stopped || this.#retry(err));
  }

  /** Stops for good: no more events, no open requests, no timers. */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    this.#listing?.abort();
    this.#watch.stop();
    await this.#informer.stop();
  }

  #retry(err: unknown): void {
    const { initialMs, maxMs } = this.#opts.backoff;
    if (Date.now() - this.#startedAt > maxMs) this.#failures = 0; // it ran fine for a while
    const delay = Math.min(maxMs, initialMs * 2 ** this.#failures) * (0.8 + 0.4 * Math.random());
    this.#failures++;
    this.#opts.logger?.warn({ path: this.#opts.path, err: describeError(err), attempt: this.#failures, retryInMs: Math.round(delay) }, 'kubernetes: list/watch failed; restarting');
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#stopped || this.start(), delay);
  }
}
