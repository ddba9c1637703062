// The API server as a source: informers (list+watch) on Services, EndpointSlices
// (discovery.k8s.io/v1) and this node's Node (fieldSelector metadata.name=<node>).
// - Every object is validated with the zod schemas; an invalid one is reported and skipped, so
//   the last valid version delivered stays in force (a later valid version replaces it).
// - EndpointSlices without the kubernetes.io/service-name label are not delivered (a slice that
//   loses the label is delivered as deleted). ExternalName Services are delivered like any other
//   (both sources deliver the same objects); the change tracker ignores them.
// - onSynced fires once the Service and EndpointSlice lists have been delivered and the Node
//   list has either been delivered (onNode(null) when the node does not exist yet) or failed:
//   the node is optional and arrives by onNode whenever it appears.
import {
  CoreV1Api,
  DiscoveryV1Api,
  KubeConfig,
  Observable,
  type Cluster,
  type ConfigurationOptions,
  type KubernetesListObject,
  type KubernetesObject,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';

import type { Logger } from '../log.js';
import { SERVICE_NAME_LABEL } from '../model/k8s.js';
import type { EndpointSlice } from '../model/k8s.js';
import { ResilientInformer, type Backoff, type InformerEvents } from './kube-informer.js';
import type { ProxySource, SourceHandler } from './types.js';
import { validate, type SourceKind, type SourceObjects } from './validate.js';

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
}

/**
 * Loads the client config: the kubeconfig file, else in-cluster, else --master alone; --master
 * then overrides the server. Throws when there is nothing to load.
 */
export function loadKubeConfig(opts: { kubeconfig?: string | undefined; master?: string | undefined }): KubeConfig {
  const kc = new KubeConfig();
  if (opts.kubeconfig) kc.loadFromFile(opts.kubeconfig);
  else if (process.env.KUBERNETES_SERVICE_HOST) kc.loadFromCluster();
  else if (opts.master) kc.loadFromClusterAndUser({ name: 'master', server: opts.master, skipTLSVerify: false }, { name: 'anonymous' });
  else throw new Error('no --kubeconfig, no --master, and not in a cluster (KUBERNETES_SERVICE_HOST unset)');
  const current = kc.getCurrentCluster()?.name;
  const clusters = kc.clusters.map((c): Cluster => {
    const server = c.name === current && opts.master ? opts.master : c.server;
    // NOTE: client-node refuses http:// servers unless skipTLSVerify is set (config.js
    // createAgent); there is no TLS to verify on plain HTTP, so allow it as client-go does.
    return { ...c, server, skipTLSVerify: c.skipTLSVerify || server.startsWith('http:') };
  });
  kc.loadFromOptions({ clusters, users: kc.users, contexts: kc.contexts, currentContext: kc.currentContext });
  return kc;
}

/** Services, EndpointSlices and the Node from the API server; see the file comment. */
export class KubernetesSource implements ProxySource {
  readonly #opts: KubernetesSourceOptions;
  #informers: ResilientInformer[] = [];
  /** Keys delivered (and not deleted since), per kind. */
  readonly #delivered: Record<SourceKind, Set<string>> = { Service: new Set(), EndpointSlice: new Set(), Node: new Set() };
  readonly #pending = new Set<SourceKind>(['Service', 'EndpointSlice', 'Node']);
  #synced = false;
  #stopped = false;
  #settle: { resolve: () => void; reject: (err: Error) => void } | undefined;

  constructor(options: KubernetesSourceOptions) {
    this.#opts = options;
  }

  /** Starts the informers; resolves after onSynced; rejects on a bad config or if stop() comes first. */
  async start(handler: SourceHandler): Promise<void> {
    const { nodeName, logger } = this.#opts;
    const kc = loadKubeConfig(this.#opts);
    const core = kc.makeApiClient(CoreV1Api);
    const discovery = kc.makeApiClient(DiscoveryV1Api);
    const backoff = this.#opts.backoff ?? { initialMs: 500, maxMs: 30_000 };
    const listTimeoutMs = this.#opts.listTimeoutMs ?? 60_000;
    type List = (signal: AbortSignal) => Promise<KubernetesListObject<KubernetesObject>>;
    const make = (kind: SourceKind, path: string, list: List, fieldSelector?: string): ResilientInformer =>
      new ResilientInformer(kc, { path, list, backoff, listTimeoutMs, logger, ...(fieldSelector ? { fieldSelector } : {}) }, this.#events(kind, handler));
    const fieldSelector = `metadata.name=${nodeName}`;
    this.#informers = [
      make('Service', '/api/v1/services', (s) => core.listServiceForAllNamespaces({}, withSignal(s))),
      make('EndpointSlice', '/apis/discovery.k8s.io/v1/endpointslices', (s) => discovery.listEndpointSliceForAllNamespaces({}, withSignal(s))),
      make('Node', '/api/v1/nodes', (s) => core.listNode({ fieldSelector }, withSignal(s)), fieldSelector),
    ];
    logger?.info({ server: kc.getCurrentCluster()?.server, nodeName }, 'kubernetes: starting informers');
    const synced = new Promise<void>((resolve, reject) => (this.#settle = { resolve, reject }));
    for (const informer of this.#informers) informer.start();
    await synced;
  }

  /** Stops every informer; nothing is delivered after this resolves. */
  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all(this.#informers.map((i) => i.stop()));
    this.#settle?.reject(new Error('kubernetes source stopped before the initial sync'));
  }

  #events(kind: SourceKind, h: SourceHandler): InformerEvents {
    return {
      upsert: (raw) => this.#upsert(kind, raw, h),
      remove: (raw) => this.#remove(kind, nameOf(raw), h),
      listed: () => this.#listed(kind, h),
      // The node is optional: a failing Node list (e.g. RBAC) must not hold the first sync.
      failed: () => kind === 'Node' && this.#listed(kind, h),
    };
  }

  #upsert(kind: SourceKind, raw: KubernetesObject, h: SourceHandler): void {
    const key = nameOf(raw);
    const result = validate(kind, JSON.parse(JSON.stringify(raw)));
    if (!result.ok) {
      this.#opts.logger?.warn({ object: `${kind} ${key}`, reason: result.reason }, 'kubernetes: object rejected');
      h.onError({ object: `${kind} ${key}`, reason: result.reason });
      return;
    }
    if (kind === 'EndpointSlice' && !(result.value as EndpointSlice).metadata.labels[SERVICE_NAME_LABEL]) {
      this.#remove(kind, key, h);
      return;
    }
    if (kind === 'Node' && key !== this.#opts.nodeName) return;
    this.#delivered[kind].add(key);
    this.#deliver(kind, key, result.value, h);
  }

  #remove(kind: SourceKind, key: string, h: SourceHandler): void {
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
    this.#opts.logger?.info({ services: this.#delivered.Service.size, endpointSlices: this.#delivered.EndpointSlice.size }, 'kubernetes: caches synced');
    h.onSynced();
    this.#settle?.resolve();
  }
}

/** Request options that make an API call abortable. */
function withSignal(signal: AbortSignal): ConfigurationOptions {
  const middleware = {
    pre: (ctx: RequestContext) => (ctx.setSignal(signal), new Observable(Promise.resolve(ctx))),
    post: (response: ResponseContext) => new Observable(Promise.resolve(response)),
  };
  return { middleware: [middleware], middlewareMergeStrategy: 'append' };
}

/** `namespace/name` (cluster-scoped: `name`), as objectKey does. */
function nameOf(o: KubernetesObject): string {
  const { namespace, name } = o.metadata ?? {};
  return namespace ? `${namespace}/${name ?? ''}` : (name ?? '');
}
