// Prometheus metrics under kube-proxy's names (kubernetes pkg/proxy/metrics/metrics.go) plus
// ours, and the metrics server with kube-proxy's /metrics, /proxyMode, /healthz and /configz.

import type { IncomingMessage, ServerResponse } from 'node:http';

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics, exponentialBuckets, linearBuckets } from 'prom-client';

import type { HostPort } from '../config/net.js';
import { PROXY_MODES } from '../config/schema.js';
import { DESIRED_PATH } from './desired.js';
import { HttpEndpoint, HttpServer, notFound, pathOf, send, type Probe } from './health.js';

/** A proxy mode, as /proxyMode reports it. */
export type ProxyMode = (typeof PROXY_MODES)[number];

/** A full sync re-reads the kernel; a partial one applies only what changed. */
export type SyncKind = 'full' | 'partial';

/** Outcome label of kube_ipvs_proxy_kernel_ops_total (drift: the kernel had lost the object the op assumed; compared again). */
export type KernelOpResult = 'ok' | 'error' | 'drift';

/** kube-proxy's sync duration buckets: 1 ms doubling 15 times (to 16.384 s). */
export const SYNC_BUCKETS: readonly number[] = exponentialBuckets(0.001, 2, 15);

/** kube-proxy's network programming buckets; its merge() starts with a 0 bucket, kept here. */
export const NETWORK_PROGRAMMING_BUCKETS: readonly number[] = [
  0,
  ...linearBuckets(0.25, 0.25, 2),
  ...linearBuckets(1, 1, 59),
  ...linearBuckets(60, 5, 12),
  ...linearBuckets(120, 30, 7),
];

/** Options of ProxyMetrics. */
export interface ProxyMetricsOptions {
  /**
   * Also expose Node's process metrics (process_*, nodejs_*); default true. They are registered
   * at the first scrape (their module is not loaded at start-up; see prom.ts), so the Node.js
   * GC and event-loop figures count from then.
   */
  defaultMetrics?: boolean;
  /** Wall clock in epoch milliseconds, for the *_timestamp_seconds gauges; default Date.now. */
  now?: () => number;
}

const CONFIGZ_GROUP = 'kubeproxy.config.k8s.io';

/**
 * The sampling interval of the event-loop delay histogram behind nodejs_eventloop_lag_*_seconds
 * (prom-client's default is 10 ms). Its timer wakes the idle daemon at that rate, each wake a
 * handful of clock reads and epoll calls: at 10 ms that was ~800 syscalls a second on an idle
 * node (in UML, where no clock read is a vDSO call, ~3 % of a CPU, and a wake could fall inside
 * a change's path). A stall is still seen, up to this much shorter than it was.
 */
export const EVENT_LOOP_RESOLUTION_MS = 100;

/** How many Services and EndpointSlices the proxy holds, and how many were delivered since the last sync took them. */
export interface ObjectCounts {
  services: number;
  endpointSlices: number;
  pendingServices?: number;
  pendingSlices?: number;
}

/** The proxy's metrics, in a private registry. Durations are passed in milliseconds. */
export class ProxyMetrics {
  readonly #registry = new Registry();
  /** The default metrics are still to be registered (at the first expose()). */
  #defaultMetrics: boolean;
  readonly #now: () => number;
  #mode: ProxyMode | undefined;

  readonly #syncDuration = this.#histogram('kubeproxy_sync_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds', SYNC_BUCKETS);
  readonly #syncFull = this.#histogram('kubeproxy_sync_full_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds for full resyncs', SYNC_BUCKETS);
  readonly #syncPartial = this.#histogram('kubeproxy_sync_partial_proxy_rules_duration_seconds', 'SyncProxyRules latency in seconds for partial resyncs', SYNC_BUCKETS);
  readonly #lastSync = this.#gauge('kubeproxy_sync_proxy_rules_last_timestamp_seconds', 'The last time proxy rules were successfully synced');
  readonly #lastQueued = this.#gauge('kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds', 'The last time a sync of proxy rules was queued');
  readonly #netProg = this.#histogram('kubeproxy_network_programming_duration_seconds', 'In Cluster Network Programming Latency in seconds', NETWORK_PROGRAMMING_BUCKETS);
  readonly #epPending = this.#pendingGauge('kubeproxy_sync_proxy_rules_endpoint_changes_pending', 'Pending proxy rules Endpoint changes', 'pendingSlices');
  readonly #epTotal = this.#counter('kubeproxy_sync_proxy_rules_endpoint_changes_total', 'Cumulative proxy rules Endpoint changes');
  readonly #svcPending = this.#pendingGauge('kubeproxy_sync_proxy_rules_service_changes_pending', 'Pending proxy rules Service changes', 'pendingServices');
  readonly #svcTotal = this.#counter('kubeproxy_sync_proxy_rules_service_changes_total', 'Cumulative proxy rules Service changes');
  readonly #restoreFailures = this.#counter('kubeproxy_sync_proxy_rules_iptables_restore_failures_total', 'Cumulative proxy iptables restore failures');
  readonly #noLocal = this.#gauge('kubeproxy_sync_proxy_rules_no_local_endpoints_total', 'Number of services with a Local traffic policy and no endpoints', ['traffic_policy']);
  readonly #healthz = this.#counter('kubeproxy_proxy_healthz_total', 'Cumulative proxy healthz HTTP status', ['code']);
  readonly #livez = this.#counter('kubeproxy_proxy_livez_total', 'Cumulative proxy livez HTTP status', ['code']);
  readonly #virtualServers = this.#gauge('kube_ipvs_proxy_virtual_servers', 'IPVS virtual servers programmed');
  readonly #realServers = this.#gauge('kube_ipvs_proxy_real_servers', 'IPVS real servers programmed');
  readonly #kernelOps = this.#counter('kube_ipvs_proxy_kernel_ops_total', 'Kernel operations applied, by kind and result', ['kind', 'result']);
  readonly #syncErrors = this.#counter('kube_ipvs_proxy_sync_errors_total', 'Syncs that failed');
  readonly #modeGauge = this.#gauge('kube_ipvs_proxy_proxy_mode', 'The active proxy mode (1) among the possible ones (0)', ['mode']);
  readonly #setEntries = this.#gauge('kube_ipvs_proxy_ipset_entries', 'Entries in each ipset the proxy owns, as programmed', ['set']);
  readonly #setMaxElem = this.#gauge('kube_ipvs_proxy_ipset_maxelem', "What each owned ipset can hold (a hash set's maxelem, grown ahead of need; a bitmap:port set's range size)", ['set']);

  #objectCounts: (() => ObjectCounts) | null = null;
  readonly #objects = new Gauge({
    name: 'kube_ipvs_proxy_objects',
    help: 'Services and EndpointSlices the proxy holds, by kind',
    labelNames: ['kind'],
    registers: [this.#registry],
    collect: () => {
      const c = this.#objectCounts?.();
      if (c) for (const [kind, n] of [['Service', c.services], ['EndpointSlice', c.endpointSlices]] as const) this.#objects.set({ kind }, n);
    },
  });
  readonly #heapPerObject = new Gauge({
    name: 'kube_ipvs_proxy_heap_bytes_per_object',
    help: 'V8 heap in use divided by the Services and EndpointSlices held (the fixed part of the heap included)',
    registers: [this.#registry],
    collect: () => {
      const c = this.#objectCounts?.();
      const n = c ? c.services + c.endpointSlices : 0;
      this.#heapPerObject.set(n > 0 ? Math.round(process.memoryUsage().heapUsed / n) : 0);
    },
  });

  constructor(options: ProxyMetricsOptions = {}) {
    this.#now = options.now ?? Date.now;
    this.#defaultMetrics = options.defaultMetrics ?? true;
  }

  /** The Content-Type of expose()'s text. */
  get contentType(): string {
    return this.#registry.contentType;
  }

  /** The private registry, for collectors that add their own metrics (service traffic). */
  get registry(): Registry {
    return this.#registry;
  }

  /** Every metric in the Prometheus text format. */
  expose(): Promise<string> {
    if (this.#defaultMetrics) {
      this.#defaultMetrics = false;
      collectDefaultMetrics({ register: this.#registry, eventLoopMonitoringPrecision: EVENT_LOOP_RESOLUTION_MS });
    }
    return this.#registry.metrics();
  }

  /** One sync took durationMs; a successful one sets the last-sync timestamp, a failed one counts an error. */
  observeSync(durationMs: number, kind: SyncKind, succeeded = true, at = this.#now()): void {
    const s = durationMs / 1000;
    this.#syncDuration.observe(s);
    (kind === 'full' ? this.#syncFull : this.#syncPartial).observe(s);
    if (succeeded) this.#lastSync.set(at / 1000);
    else this.#syncErrors.inc();
  }

  /** A sync was requested (kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds = `at`, default now). */
  syncQueued(at = this.#now()): void {
    this.#lastQueued.set(at / 1000);
  }

  /** Time from an endpoint change (its EndpointSlice's last-change-trigger-time) to it being programmed. */
  observeNetworkProgramming(durationMs: number): void {
    this.#netProg.observe(Math.max(0, durationMs) / 1000);
  }

  /** Changes seen from the source (the *_changes_total counters). */
  countChanges(changes: { services?: number; endpoints?: number }): void {
    if (changes.services) this.#svcTotal.inc(changes.services);
    if (changes.endpoints) this.#epTotal.inc(changes.endpoints);
  }

  /** What is programmed in the kernel now. */
  setCounts(counts: { virtualServers: number; realServers: number }): void {
    this.#virtualServers.set(counts.virtualServers);
    this.#realServers.set(counts.realServers);
  }

  /** The owned ipsets as programmed: entries and capacity per set (sets not listed keep their last values). */
  setIpsetSizes(sets: Iterable<{ set: string; entries: number; maxElem: number }>): void {
    for (const { set, entries, maxElem } of sets) {
      this.#setEntries.set({ set }, entries);
      this.#setMaxElem.set({ set }, maxElem);
    }
  }

  /** Where kube_ipvs_proxy_objects and kube_ipvs_proxy_heap_bytes_per_object read the object counts (on each scrape). */
  trackObjects(counts: () => ObjectCounts): void {
    this.#objectCounts = counts;
  }

  /** Counts n kernel operations of a kind (e.g. "ipvs.addDestination") with one result. */
  countKernelOps(kind: string, result: KernelOpResult, n = 1): void {
    if (n > 0) this.#kernelOps.inc({ kind, result }, n);
  }

  /** An iptables-restore run failed. */
  iptablesRestoreFailed(): void {
    this.#restoreFailures.inc();
  }

  /** Services with a Local traffic policy and no local endpoints, by policy. */
  setNoLocalEndpoints(counts: { internal: number; external: number }): void {
    this.#noLocal.set({ traffic_policy: 'internal' }, counts.internal);
    this.#noLocal.set({ traffic_policy: 'external' }, counts.external);
  }

  /** Sets the active mode: kube_ipvs_proxy_proxy_mode{mode} is 1 for it, 0 for the others; /proxyMode reports it. */
  setProxyMode(mode: ProxyMode): void {
    this.#mode = mode;
    for (const m of PROXY_MODES) this.#modeGauge.set({ mode: m }, m === mode ? 1 : 0);
  }

  /** The active mode, once set. */
  get proxyMode(): ProxyMode | undefined {
    return this.#mode;
  }

  /** Counts one /healthz or /livez answer (kubeproxy_proxy_healthz_total / _livez_total{code}). */
  observeProbe(probe: Probe, code: number): void {
    (probe === 'healthz' ? this.#healthz : this.#livez).inc({ code: String(code) });
  }

  #histogram(name: string, help: string, buckets: readonly number[]): Histogram {
    return new Histogram({ name, help, buckets: [...buckets], registers: [this.#registry] });
  }

  /** A *_changes_pending gauge: set from trackObjects()'s counts at each scrape. */
  #pendingGauge(name: string, help: string, field: 'pendingServices' | 'pendingSlices'): Gauge {
    const g: Gauge = new Gauge({
      name, help, registers: [this.#registry],
      collect: () => {
        const n = this.#objectCounts?.()[field];
        if (n !== undefined) g.set(n);
      },
    });
    return g;
  }

  #gauge<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Gauge<L> {
    return new Gauge({ name, help, labelNames, registers: [this.#registry] });
  }

  #counter<L extends string>(name: string, help: string, labelNames: readonly L[] = []): Counter<L> {
    return new Counter({ name, help, labelNames, registers: [this.#registry] });
  }
}

/** Options of MetricsServer. */
export interface MetricsServerOptions {
  /** Called with errors of the listening server after start(). */
  onError?: (err: Error) => void;
}

/**
 * kube-proxy's metrics server: /metrics, /proxyMode (plain text), /healthz ("ok", as the
 * generic healthz handler kube-proxy installs there), /configz (the configuration as JSON
 * under "kubeproxy.config.k8s.io") and ours, /desired (the IPVS desired state, read-only JSON).
 */
export class MetricsServer extends HttpEndpoint {
  protected readonly http: HttpServer;
  #config: unknown = undefined;
  #desired: (() => unknown) | null = null;

  /** proxyMode, when given, is passed to metrics.setProxyMode(). */
  constructor(
    readonly metrics: ProxyMetrics,
    bind: HostPort,
    proxyMode?: ProxyMode,
    options: MetricsServerOptions = {},
  ) {
    if (proxyMode !== undefined) metrics.setProxyMode(proxyMode);
    super();
    this.http = new HttpServer('metrics server', bind, (req, res) => void this.#handle(req, res), options.onError);
  }

  /** The configuration /configz serves (JSON-serialisable, e.g. a KubeProxyConfiguration). */
  setConfig(config: unknown): void {
    this.#config = config;
  }

  /** What /desired serves (read-only JSON, built per request); null answers 404 (iptables mode). */
  setDesired(build: (() => unknown) | null): void {
    this.#desired = build;
  }

  async #handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const text = 'text/plain; charset=utf-8';
    switch (pathOf(req)) {
      case '/metrics':
        try {
          const body = await this.metrics.expose();
          return send(res, 200, this.metrics.contentType, body);
        } catch (err) {
          return send(res, 500, text, `error gathering metrics: ${(err as Error).message}\n`);
        }
      case '/proxyMode':
        return send(res, 200, text, this.metrics.proxyMode ?? '');
      case '/healthz':
        return send(res, 200, text, new URL(req.url ?? '/', 'http://x').searchParams.has('verbose') ? '[+]ping ok\nhealthz check passed\n' : 'ok');
      case '/healthz/ping':
        return send(res, 200, text, 'ok');
      case '/configz':
        try {
          const body = JSON.stringify(this.#config === undefined ? {} : { [CONFIGZ_GROUP]: this.#config });
          return send(res, 200, 'application/json', body);
        } catch (err) {
          return send(res, 500, text, `error marshaling json: ${(err as Error).message}\n`);
        }
      case DESIRED_PATH:
        if (this.#desired === null) return send(res, 404, text, 'no desired IPVS state (not in ipvs mode)\n');
        try {
          return send(res, 200, 'application/json', JSON.stringify(this.#desired()));
        } catch (err) {
          return send(res, 500, text, `error building the desired state: ${(err as Error).message}\n`);
        }
      default:
        return notFound(res);
    }
  }
}
