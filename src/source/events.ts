// Kubernetes Events (events.k8s.io/v1) on Services, so `kubectl describe service` shows the
// per-Service problems the proxy logs. Like client-go's event recorder:
// - dedup: the same Service, type, reason and note again (within seriesWindowMs) updates the first
//   Event's series (count, lastObservedTime) with a merge patch instead of creating another;
// - rate limit: a token bucket per Service (burst 25, one more every 5 minutes, client-go's spam
//   filter); writes are sent one at a time, at most one per minIntervalMs, from a bounded queue;
// - failures (403 without RBAC, a down API server) are logged and dropped: recording never
//   throws and never blocks the proxy.
import http from 'node:http';
import https from 'node:https';

import type { Logger } from '../log.js';

/** One problem to record on a Service. */
export interface ServiceEvent {
  /** `namespace/name`. */
  service: string;
  type: 'Normal' | 'Warning';
  /** CamelCase, e.g. `VirtualServerConflict`. */
  reason: string;
  /** What the proxy was doing, e.g. `Programming`. */
  action: string;
  note: string;
}

/** What the proxy records Events through (the recorder, or nothing in standalone mode). */
export interface EventSink {
  record(event: ServiceEvent): void;
}

/** One HTTP exchange with the API server. */
export interface EventTransport {
  request(method: 'POST' | 'PATCH', path: string, body: string, contentType: string): Promise<{ status: number; body: string }>;
}

/** What `kubeTransport` needs of a client-node KubeConfig. */
export interface KubeConfigLike {
  getCurrentCluster(): { server: string } | null;
  applyToHTTPSOptions(opts: https.RequestOptions): Promise<void>;
  /** After a 401: credentials read from a file are read again. */
  refresh?(): void;
}

/** A transport to the current cluster of a KubeConfig (its URL, TLS and credentials, per request). */
export function kubeTransport(kc: KubeConfigLike, timeoutMs = 10_000): EventTransport {
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error('events: the kubeconfig has no current cluster');
  const base = new URL(cluster.server);
  return {
    async request(method, path, body, contentType) {
      const opts: https.RequestOptions = { method, headers: { 'content-type': contentType, accept: 'application/json' } };
      await kc.applyToHTTPSOptions(opts);
      const url = new URL(base.pathname.replace(/\/$/, '') + path, base);
      const send = url.protocol === 'https:' ? https.request : http.request;
      return new Promise((resolve, reject) => {
        const req = send(url, opts, (res) => {
          let text = '';
          res.setEncoding('utf8').on('data', (d: string) => (text += d));
          res.on('end', () => {
            if (res.statusCode === 401) kc.refresh?.();
            resolve({ status: res.statusCode ?? 0, body: text });
          });
          res.on('error', reject);
        });
        req.setTimeout(timeoutMs, () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
        req.on('error', reject);
        req.end(body);
      });
    },
  };
}

/** Options of an EventRecorder. */
export interface EventRecorderOptions {
  transport: EventTransport;
  /** e.g. `kube-ipvs-proxy-node-1` (kube-proxy: `kube-proxy-<node>`). */
  reportingInstance: string;
  reportingController?: string;
  logger?: Logger;
  /** Wall clock in ms (tests pass a fake). */
  now?: () => number;
  /** Per-Service bucket: burst and refill interval (default 25, one per 300 s). */
  burst?: number;
  refillMs?: number;
  /** Least time between two writes (default 100 ms). */
  minIntervalMs?: number;
  /** A repeat after this long starts a new Event (default 30 min; the API server keeps Events 1 h). */
  seriesWindowMs?: number;
  /** Writes waiting beyond this are dropped (default 1000). */
  maxPending?: number;
}

/** An Event as last sent, or to be sent. */
interface Cached {
  namespace: string;
  name: string | null;
  body: Record<string, unknown>;
  count: number;
  lastMs: number;
}

/** The API server refuses a note over 1 kB. */
const NOTE_MAX_BYTES = 1024;

function truncate(note: string): string {
  if (Buffer.byteLength(note) <= NOTE_MAX_BYTES) return note;
  let n = note.slice(0, NOTE_MAX_BYTES - 3);
  while (Buffer.byteLength(n) > NOTE_MAX_BYTES - 3) n = n.slice(0, -1);
  return `${n}...`;
}

/** `2026-11-23T11:35:16.123000Z`: metav1.MicroTime. */
function microTime(ms: number): string {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/** Records ServiceEvents as events.k8s.io/v1 Events; see the file comment. */
export class EventRecorder implements EventSink {
  readonly #o: Required<Omit<EventRecorderOptions, 'logger'>> & { logger: Logger | undefined };
  #uidOf: (service: string) => string | undefined = () => undefined;
  readonly #cache = new Map<string, Cached>();
  readonly #buckets = new Map<string, { tokens: number; at: number }>();
  readonly #queue = new Set<string>();
  #seq = 0;
  #draining: Promise<void> | null = null;
  #lastWriteMs = -Infinity;
  #failures = 0;
  #closed = false;
  #prunedAt = 0;
  /** Events dropped by the rate limit or a full queue, and writes the API server refused. */
  readonly stats = { dropped: 0, failed: 0, created: 0, patched: 0 };

  constructor(opts: EventRecorderOptions) {
    this.#o = {
      reportingController: 'kube-ipvs-proxy',
      now: () => Date.now(),
      burst: 25,
      refillMs: 300_000,
      minIntervalMs: 100,
      seriesWindowMs: 30 * 60_000,
      maxPending: 1000,
      ...opts,
      logger: opts.logger,
    };
  }

  /** Where each Service's uid is looked up (kubectl describe matches Events by it): the change tracker's uidOf. */
  uidsFrom(uidOf: (service: string) => string | undefined): void {
    this.#uidOf = uidOf;
  }

  /** Queues the Event (or a series update of the same one); never throws. */
  record(e: ServiceEvent): void {
    if (this.#closed) return;
    const slash = e.service.indexOf('/');
    if (slash <= 0) return;
    const now = this.#o.now();
    if (now - this.#prunedAt > this.#o.seriesWindowMs) this.#prune(now);
    if (!this.#take(e.service, now)) {
      this.stats.dropped++;
      this.#o.logger?.debug({ service: e.service, reason: e.reason }, 'event dropped by the rate limit');
      return;
    }
    const note = truncate(e.note);
    const key = JSON.stringify([e.service, e.type, e.reason, note]);
    if (!this.#queue.has(key) && this.#queue.size >= this.#o.maxPending) {
      this.stats.dropped++;
      return;
    }
    const seen = this.#cache.get(key);
    if (seen && now - seen.lastMs <= this.#o.seriesWindowMs) {
      seen.count++;
      seen.lastMs = now;
    } else {
      const [namespace, name] = [e.service.slice(0, slash), e.service.slice(slash + 1)];
      const uid = this.#uidOf(e.service);
      const regarding = { apiVersion: 'v1', kind: 'Service', namespace, name, ...(uid ? { uid } : {}) };
      const body = {
        apiVersion: 'events.k8s.io/v1',
        kind: 'Event',
        metadata: { namespace },
        eventTime: microTime(now),
        reportingController: this.#o.reportingController,
        reportingInstance: this.#o.reportingInstance,
        action: e.action,
        reason: e.reason,
        regarding,
        note,
        type: e.type,
      };
      this.#cache.set(key, { namespace, name: null, body, count: 1, lastMs: now });
    }
    this.#queue.add(key);
    this.#drain();
  }

  /** Resolves once every queued write has been sent (or has failed). */
  async flush(): Promise<void> {
    while (this.#draining) await this.#draining;
  }

  /** Drops what is queued; later records are ignored. */
  close(): void {
    this.#closed = true;
    this.#queue.clear();
  }

  /** Forgets Events past their series window and buckets that are full again. */
  #prune(now: number): void {
    this.#prunedAt = now;
    for (const [k, c] of this.#cache) if (now - c.lastMs > this.#o.seriesWindowMs && !this.#queue.has(k)) this.#cache.delete(k);
    for (const [k, b] of this.#buckets) if (b.tokens + (now - b.at) / this.#o.refillMs >= this.#o.burst) this.#buckets.delete(k);
  }

  #take(service: string, now: number): boolean {
    let b = this.#buckets.get(service);
    if (!b) this.#buckets.set(service, (b = { tokens: this.#o.burst, at: now }));
    const refill = Math.floor((now - b.at) / this.#o.refillMs);
    if (refill > 0) {
      b.tokens = Math.min(this.#o.burst, b.tokens + refill);
      b.at += refill * this.#o.refillMs;
    }
    if (b.tokens >= this.#o.burst) b.at = now;
    if (b.tokens <= 0) return false;
    b.tokens--;
    return true;
  }

  #drain(): void {
    if (this.#draining) return;
    this.#draining = (async () => {
      while (this.#queue.size > 0 && !this.#closed) {
        const key = this.#queue.values().next().value as string;
        this.#queue.delete(key);
        const wait = this.#lastWriteMs + this.#o.minIntervalMs - Date.now();
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        this.#lastWriteMs = Date.now();
        const c = this.#cache.get(key);
        if (c) await this.#write(c).catch((err: unknown) => this.#failed(c, 0, err instanceof Error ? err.message : String(err)));
      }
    })().finally(() => {
      this.#draining = null;
    });
  }

  /** Creates the Event, or patches its series; a patch of an Event gone (404) creates a new one. */
  async #write(c: Cached): Promise<void> {
    const series = c.count > 1 ? { count: c.count, lastObservedTime: microTime(c.lastMs) } : undefined;
    const base = `/apis/events.k8s.io/v1/namespaces/${encodeURIComponent(c.namespace)}/events`;
    if (c.name !== null) {
      const r = await this.#o.transport.request('PATCH', `${base}/${encodeURIComponent(c.name)}`, JSON.stringify({ series }), 'application/merge-patch+json');
      if (r.status >= 200 && r.status < 300) return this.#ok('patched');
      if (r.status !== 404) return this.#failed(c, r.status, r.body);
    }
    const regarding = c.body.regarding as { name: string };
    const name = `${regarding.name}.${(BigInt(this.#o.now()) * 1_000_000n + BigInt(this.#seq++ % 1_000_000)).toString(16)}`;
    const body = { ...c.body, metadata: { ...(c.body.metadata as object), name }, ...(series ? { series } : {}) };
    const r = await this.#o.transport.request('POST', base, JSON.stringify(body), 'application/json');
    if (r.status >= 200 && r.status < 300) {
      c.name = name;
      return this.#ok('created');
    }
    this.#failed(c, r.status, r.body);
  }

  #ok(what: 'created' | 'patched'): void {
    this.stats[what]++;
    if (this.#failures > 0) this.#o.logger?.info({ failed: this.#failures }, 'events: recording works again');
    this.#failures = 0;
  }

  /** The first failure in a row is a warning, the rest debug: a missing RBAC rule must not flood the log. */
  #failed(c: Cached, status: number, detail: string): void {
    this.stats.failed++;
    const regarding = c.body.regarding as { namespace: string; name: string };
    const fields = { service: `${regarding.namespace}/${regarding.name}`, reason: c.body.reason, status, err: detail.slice(0, 200) };
    if (this.#failures++ === 0) this.#o.logger?.warn(fields, 'events: cannot record an Event (later failures are logged at -v 2)');
    else this.#o.logger?.debug(fields, 'events: cannot record an Event');
  }
}

/**
 * The daemon's recorder in API mode: the kubeconfig (or in-cluster config, or --master) as the
 * source uses it. Null, with a warning, when that config cannot be loaded (the source then fails too).
 */
export async function eventRecorderFor(opts: { kubeconfig?: string | undefined; master?: string | undefined; nodeName: string; logger: Logger }): Promise<EventRecorder | null> {
  try {
    const { loadKubeConfig } = await import('./kubernetes.js');
    const kc = loadKubeConfig({ kubeconfig: opts.kubeconfig, master: opts.master });
    return new EventRecorder({ transport: kubeTransport(kc), reportingInstance: `kube-ipvs-proxy-${opts.nodeName}`, logger: opts.logger });
  } catch (e) {
    opts.logger.warn({ err: e instanceof Error ? e.message : String(e) }, 'events: not recording Events');
    return null;
  }
}
