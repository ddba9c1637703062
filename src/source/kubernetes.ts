// The API server as a source: informers (list+watch) on Services, EndpointSlices
// (discovery.k8s.io/v1) and this node's Node (fieldSelector metadata.name=<node>).
// - Objects are decoded from each list page / watch line straight into the compact validated
//   form (compact.ts, then validate.ts once); the informers cache only resourceVersions.
//   The validation's modules load when the first list answers, before its body is read.
// - Every object is validated (k8s-fast.ts, or the zod schemas for an object that is not plain);
//   an invalid one is reported and skipped, so the last valid version delivered stays in force
//   (a later valid version replaces it).
// - EndpointSlices without the kubernetes.io/service-name label are not delivered (a slice that
//   loses the label is delivered as deleted). ExternalName Services are delivered like any other
//   (both sources deliver the same objects); the change tracker ignores them.
// - onSynced fires once the Service and EndpointSlice lists have been delivered and the Node
//   list has either been delivered (onNode(null) when the node does not exist yet) or failed:
//   the node is optional and arrives by onNode whenever it appears.
// - Resuming (options.resume, source/resume.ts): given the record of the daemon before this one
//   for the same API server, each informer watches from the record's resourceVersion instead of
//   listing, the tracker is restored from it while those requests are on their way (their events
//   wait for it), the rejected objects are reported again, and onSynced fires once the watches
//   have caught up. cursor() gives the record's source part after stop().
import type { RequestOptions } from 'node:https';

import type { Logger } from '../log.js';
import { SERVICE_NAME_LABEL } from '../model/k8s.js';
import type { EndpointSlice } from '../model/k8s.js';
import type { ObjectError } from '../model/service.js';
import { compact } from './compact.js';
import { loadClientConfig } from './kube-config.js';
import { KubeHttp } from './kube-http.js';
import { Informer, type Backoff, type InformerEvents, type RawObject } from './kube-informer.js';
import { moduleFile, type SourceCursor } from './resume.js';
import type { ProxySource, SourceHandler } from './types.js';
import type { SourceKind, SourceObjects, validate } from './validate.js';

/** This module's bundle chunk: part of the resume record's build (resume.ts). */
export const KUBERNETES_SOURCE_BUILD = moduleFile(import.meta.url);

const KINDS: readonly SourceKind[] = ['Service', 'EndpointSlice', 'Node'];

/** Options of a KubernetesSource. */
export interface KubernetesSourceOptions {
  /** A kubeconfig file; without it, the in-cluster service account config. */
  kubeconfig?: string;
  /** Overrides the API server URL of the loaded config (kube-proxy's --master). */
  master?: string;
  nodeName: string;
  logger?: Logger;
  /** Restart delays after a failed list or watch (default 500 ms doubling up to 30 s). */
  backoff?: Backoff;
  /** A list taking longer is aborted and retried (default 60 s). */
  listTimeoutMs?: number;
  /** Objects per list page (default 500). */
  pageSize?: number;
  /**
   * The stopped daemon's record (resume.ts); used when it names the same API server. `restore()`
   * puts its model into the change tracker; it runs once the watches are on their way, and their
   * events wait for it (a failed restore relists). `discard()` when it is not used (another server).
   */
  resume?: { cursor: SourceCursor; restore(): Promise<void>; discard?(): void };
}

/**
 * The client config in the shape of client-node's KubeConfig that other API clients (the
 * Events recorder) take: the server and per-request TLS/auth. Throws when there is no config.
 */
export function loadKubeConfig(opts: { kubeconfig?: string | undefined; master?: string | undefined }): {
  getCurrentCluster(): { server: string };
  applyToHTTPSOptions(o: RequestOptions): Promise<void>;
  refresh(): void;
} {
  const config = loadClientConfig(opts);
  return { getCurrentCluster: () => ({ server: config.server }), applyToHTTPSOptions: (o) => config.apply(o), refresh: () => config.refresh?.() };
}

/** Services, EndpointSlices and the Node from the API server; see the file comment. */
export class KubernetesSource implements ProxySource {
  readonly #opts: KubernetesSourceOptions;
  #informers: Informer[] = [];
  #http: KubeHttp | undefined;
  /** Keys delivered (and not deleted since), per kind. */
  readonly #delivered: Record<SourceKind, Set<string>> = { Service: new Set(), EndpointSlice: new Set(), Node: new Set() };
  readonly #pending = new Set<SourceKind>(KINDS);
  /** Objects rejected (and not since replaced by a valid version or deleted), per kind. */
  readonly #rejected: Record<SourceKind, Map<string, ObjectError>> = { Service: new Map(), EndpointSlice: new Map(), Node: new Map() };
  #server = '';
  /** Starts the restore of a resumed source once its informers have sent their watches (set: resumed). */
  #restore: (() => void) | undefined;
  /** Settles once that restore has run (or failed: the resumed watches then relist). */
  #restored: Promise<unknown> = Promise.resolve();
  #synced = false;
  #stopped = false;
  #startedAt = 0;
  #heapAtStart = 0;
  #settle: { resolve: () => void; reject: (err: Error) => void } | undefined;
  /** validate.js's, imported when the first list answers; every list waits for it before decoding. */
  #validate: typeof validate | undefined;

  constructor(options: KubernetesSourceOptions) {
    this.#opts = options;
  }

  /** Starts the informers; resolves after onSynced; rejects on a bad config or if stop() comes first. */
  async start(handler: SourceHandler): Promise<void> {
    const { nodeName, logger } = this.#opts;
    this.#startedAt = performance.now();
    this.#heapAtStart = process.memoryUsage().heapUsed;
    const config = loadClientConfig(this.#opts);
    if (this.#stopped) throw new Error('kubernetes source stopped before the initial sync');
    const synced = new Promise<void>((resolve, reject) => (this.#settle = { resolve, reject }));
    const http = (this.#http = new KubeHttp(config));
    const backoff = this.#opts.backoff ?? { initialMs: 500, maxMs: 30_000 };
    const listTimeoutMs = this.#opts.listTimeoutMs ?? 60_000;
    const pageSize = this.#opts.pageSize ?? 500;
    // Imported once the first answer is in: nothing the first requests do not need is loaded before them.
    // Resuming, nothing is delivered before the tracker's restore (nor a list of a kind without a resourceVersion).
    let validation: Promise<void> | undefined;
    const beforeDecode = (): Promise<void> =>
      (validation ??= Promise.all([import('./validate.js'), this.#restored]).then(([m]) => void (this.#validate = m.validate)));
    const make = (kind: SourceKind, path: string, fieldSelector?: string): Informer =>
      new Informer(http, { path, backoff, listTimeoutMs, pageSize, logger, beforeDecode, ...(fieldSelector ? { fieldSelector } : {}) }, this.#events(kind, handler));
    this.#informers = [
      make('Service', '/api/v1/services'),
      make('EndpointSlice', '/apis/discovery.k8s.io/v1/endpointslices'),
      make('Node', '/api/v1/nodes', `metadata.name=${nodeName}`),
    ];
    this.#server = config.server;
    const resume = this.#opts.resume;
    if (resume && resume.cursor.server !== config.server) {
      logger?.info({ server: config.server, recorded: resume.cursor.server }, 'kubernetes: the resume record names another API server; listing');
      resume.discard?.();
    } else if (resume) this.#resume(resume, handler);
    logger?.info({ server: config.server, auth: config.auth, nodeName, resumed: this.#restore !== undefined }, 'kubernetes: starting informers');
    for (const informer of this.#informers) informer.start();
    this.#restore?.();
    await synced;
  }

  /** Takes the stopped daemon's model and watches from where it was; see the file comment. */
  #resume({ cursor, restore }: NonNullable<KubernetesSourceOptions['resume']>, h: SourceHandler): void {
    let start!: () => void;
    const restored = new Promise<void>((resolve) => (start = resolve)).then(restore);
    restored.catch((err: unknown) => this.#opts.logger?.warn({ err: err instanceof Error ? err.message : String(err) }, 'kubernetes: restoring the resume record failed; listing'));
    this.#restore = start;
    this.#restored = restored.catch(() => {});
    for (const kind of KINDS) for (const key of cursor.delivered[kind] ?? []) this.#delivered[kind].add(key);
    for (const r of cursor.rejected) {
      this.#rejected[r.kind].set(r.key, r.error);
      h.onError(r.error);
    }
    KINDS.forEach((kind, i) => {
      const rv = cursor.informers[kind];
      if (rv) this.#informers[i]!.resume(rv, [...this.#delivered[kind], ...this.#rejected[kind].keys()], restored);
    });
  }

  /**
   * The resume record's source part (resume.ts), once stop() has resolved: null before the caches
   * synced. A kind whose informer was between a 410 and its relist has no resourceVersion.
   */
  cursor(): SourceCursor | null {
    if (!this.#synced || !this.#stopped) return null;
    const informers: SourceCursor['informers'] = {};
    KINDS.forEach((kind, i) => {
      const rv = this.#informers[i]?.resourceVersion;
      if (rv) informers[kind] = rv;
    });
    const delivered = Object.fromEntries(KINDS.map((k) => [k, [...this.#delivered[k]]])) as SourceCursor['delivered'];
    const rejected = KINDS.flatMap((kind) => Array.from(this.#rejected[kind], ([key, error]) => ({ kind, key, error })));
    return { server: this.#server, informers, delivered, rejected };
  }

  /** Stops every informer; nothing is delivered after this resolves. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#informers.map((i) => i.stop()));
    this.#http?.close();
    this.#settle?.reject(new Error('kubernetes source stopped before the initial sync'));
  }

  #events(kind: SourceKind, h: SourceHandler): InformerEvents {
    return {
      upsert: (key, raw) => this.#stopped || this.#upsert(kind, key, raw, h),
      remove: (key) => this.#stopped || this.#remove(kind, key, h),
      listed: () => this.#listed(kind, h),
      // The node is optional: a failing Node list (e.g. RBAC) must not hold the first sync.
      failed: () => kind === 'Node' && this.#listed(kind, h),
    };
  }

  /** Decodes a raw object into the compact validated form (validated once), then delivers it. */
  #upsert(kind: SourceKind, key: string, raw: RawObject, h: SourceHandler): void {
    const name = `${kind} ${key || '(unnamed)'}`;
    const result = this.#validate!(kind, compact(raw));
    if (!result.ok) {
      const error = { object: name, reason: result.reason };
      this.#rejected[kind].set(key, error);
      h.onError(error);
      return;
    }
    this.#rejected[kind].delete(key);
    if (kind === 'EndpointSlice' && !(result.value as EndpointSlice).metadata.labels[SERVICE_NAME_LABEL]) {
      this.#remove(kind, key, h);
      return;
    }
    if (kind === 'Node' && key !== this.#opts.nodeName) return;
    this.#delivered[kind].add(key);
    this.#deliver(kind, key, result.value, h);
  }

  #remove(kind: SourceKind, key: string, h: SourceHandler): void {
    this.#rejected[kind].delete(key);
    if (this.#delivered[kind].delete(key)) this.#deliver(kind, key, null, h);
  }

  #deliver<K extends SourceKind>(kind: K, key: string, value: SourceObjects[K] | null, h: SourceHandler): void {
    if (kind === 'Service') h.onService(key, value as SourceObjects['Service'] | null);
    else if (kind === 'EndpointSlice') h.onEndpointSlice(key, value as SourceObjects['EndpointSlice'] | null);
    else h.onNode(value as SourceObjects['Node'] | null);
  }

  #listed(kind: SourceKind, h: SourceHandler): void {
    if (this.#synced || this.#stopped || !this.#pending.delete(kind) || this.#pending.size > 0) return;
    this.#synced = true;
    if (this.#delivered.Node.size === 0) h.onNode(null);
    const services = this.#delivered.Service.size;
    const endpointSlices = this.#delivered.EndpointSlice.size;
    const { rss, heapUsed } = process.memoryUsage();
    const objects = services + endpointSlices;
    this.#opts.logger?.info(
      {
        services,
        endpointSlices,
        resumed: this.#restore !== undefined,
        durationMs: Math.round(performance.now() - this.#startedAt),
        rssMiB: Math.round(rss / 2 ** 20),
        heapUsedMiB: Math.round(heapUsed / 2 ** 20),
        // What the initial sync added to the heap (this source and its receiver), per object.
        heapBytesPerObject: objects ? Math.round(Math.max(0, heapUsed - this.#heapAtStart) / objects) : 0,
      },
      'kubernetes: caches synced',
    );
    h.onSynced();
    this.#settle?.resolve();
  }
}
