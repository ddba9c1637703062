// The proxy's health (kubernetes pkg/proxy/healthcheck/proxy_health.go) and its /healthz and
// /livez server, plus the small HTTP helpers the metrics and service health servers share.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

import { isUnspecified, type HostPort } from '../config/net.js';

/** The taint the cluster autoscaler puts on a node it is about to delete. */
export const TO_BE_DELETED_TAINT = 'ToBeDeletedByClusterAutoscaler';

/** An IP family as kube-proxy names it in its health JSON. */
export type HealthFamily = 'IPv4' | 'IPv6';

/** The parts of a Node (v1) that decide its eligibility; any raw or parsed Node fits. */
export interface NodeEligibilityFields {
  metadata?: { deletionTimestamp?: string | null };
  spec?: { taints?: readonly { key: string }[] | null };
}

/** kube-proxy's rule: a node is eligible unless it is being deleted or tainted ToBeDeletedByClusterAutoscaler. */
export function isNodeEligible(node: NodeEligibilityFields): boolean {
  if (node.metadata?.deletionTimestamp) return false;
  return !(node.spec?.taints ?? []).some((t) => t.key === TO_BE_DELETED_TAINT);
}

/** One family's health, as kube-proxy's ProxierHealth. Times are epoch milliseconds. */
export interface FamilyHealth {
  lastUpdated: number;
  healthy: boolean;
}

/** A snapshot of the proxy's health, as kube-proxy's ProxyHealth (without nodeEligible). */
export interface HealthSnapshot {
  /** The most recent successful sync of any family; 0 if none yet. */
  lastUpdated: number;
  currentTime: number;
  healthy: boolean;
  /** Only families that have synced at least once. */
  status: Map<HealthFamily, FamilyHealth>;
}

const DEFAULT_SYNC_PERIOD_MS = 30_000;

/** Options of ProxyHealth. */
export interface ProxyHealthOptions {
  /** The sync period; the health timeout is twice it, as kube-proxy. Default 30 s. */
  syncPeriodMs?: number;
  /** Overrides the health timeout (a queued change this old makes the proxy unhealthy). */
  healthTimeoutMs?: number;
  /** The families queued()/updated() apply to when none is named; default ['IPv4']. */
  families?: readonly HealthFamily[];
  /** Wall clock in epoch milliseconds; default Date.now. */
  now?: () => number;
}

/**
 * The proxy's health state. A family is unhealthy when it has synced at least once and a
 * change queued since its last successful sync is healthTimeout old or older; the proxy is
 * healthy when every family is. Before the first successful sync the proxy is healthy, as
 * kube-proxy (it reports healthy while starting up).
 */
export class ProxyHealth {
  readonly healthTimeoutMs: number;
  readonly #families: readonly HealthFamily[];
  readonly #now: () => number;
  readonly #lastUpdated = new Map<HealthFamily, number>();
  readonly #oldestPendingQueued = new Map<HealthFamily, number>();
  #nodeEligible = true;

  /** Throws a RangeError unless the timeout is > 0. */
  constructor(options: ProxyHealthOptions = {}) {
    const timeout = options.healthTimeoutMs ?? 2 * (options.syncPeriodMs ?? DEFAULT_SYNC_PERIOD_MS);
    if (!(timeout > 0)) throw new RangeError(`health timeout must be > 0 ms, got ${timeout}`);
    this.healthTimeoutMs = timeout;
    this.#families = options.families?.length ? [...options.families] : ['IPv4'];
    this.#now = options.now ?? Date.now;
  }

  /** The clock this state reads (epoch milliseconds). */
  now(): number {
    return this.#now();
  }

  /** A change is waiting to be synced (at `t`, default now); only the oldest pending one counts. */
  queued(family?: HealthFamily, t = this.#now()): void {
    for (const f of this.#pick(family)) if (!this.#oldestPendingQueued.has(f)) this.#oldestPendingQueued.set(f, t);
  }

  /** A sync succeeded (at `t`, default now): nothing is pending any more. */
  updated(family?: HealthFamily, t = this.#now()): void {
    for (const f of this.#pick(family)) {
      this.#oldestPendingQueued.delete(f);
      this.#lastUpdated.set(f, t);
    }
  }

  /** Records whether this node may take traffic (see isNodeEligible); true until told otherwise. */
  setNodeEligible(eligible: boolean): void {
    this.#nodeEligible = eligible;
  }

  /** Whether this node may take traffic; only /healthz considers it. */
  get nodeEligible(): boolean {
    return this.#nodeEligible;
  }

  /** The proxy's health ignoring node eligibility (what /livez and service health checks report). */
  isHealthy(): boolean {
    return this.snapshot().healthy;
  }

  /** The health of every family that has synced, as kube-proxy's Health(). */
  snapshot(): HealthSnapshot {
    const currentTime = this.#now();
    const status = new Map<HealthFamily, FamilyHealth>();
    let lastUpdated = 0;
    let healthy = true;
    for (const [family, updated] of this.#lastUpdated) {
      lastUpdated = Math.max(lastUpdated, updated);
      const queuedAt = this.#oldestPendingQueued.get(family);
      const ok = queuedAt === undefined || currentTime - queuedAt < this.healthTimeoutMs;
      healthy &&= ok;
      status.set(family, { lastUpdated: updated, healthy: ok });
    }
    return { lastUpdated, currentTime, healthy, status };
  }

  #pick(family: HealthFamily | undefined): readonly HealthFamily[] {
    return family === undefined ? this.#families : [family];
  }
}

const GO_ZERO_TIME = '0001-01-01T00:00:00Z';

/** Formats epoch milliseconds as Go's json.Marshal of a UTC time.Time (RFC3339Nano, trailing zeros trimmed); 0 is Go's zero time. */
export function formatGoTime(ms: number): string {
  if (ms === 0) return GO_ZERO_TIME;
  return new Date(ms).toISOString().replace(/\.?0+Z$/, 'Z');
}

/** The JSON body kube-proxy writes for /healthz (with nodeEligible) or /livez (without). */
export function healthBody(s: HealthSnapshot, nodeEligible: boolean | undefined, ok: boolean): string {
  const status: Record<string, { lastUpdated: string; healthy: boolean }> = {};
  for (const family of [...s.status.keys()].sort()) {
    const h = s.status.get(family)!;
    status[family] = { lastUpdated: formatGoTime(h.lastUpdated), healthy: h.healthy };
  }
  return JSON.stringify({
    // Healthy responses report lastUpdated = currentTime, as kube-proxy does for compatibility.
    lastUpdated: formatGoTime(ok ? s.currentTime : s.lastUpdated),
    currentTime: formatGoTime(s.currentTime),
    ...(nodeEligible === undefined ? {} : { nodeEligible }),
    healthy: s.healthy,
    ...(s.status.size > 0 ? { status } : {}),
  });
}

/** Which probe was answered, and how; see HealthServerOptions.onProbe. */
export type Probe = 'healthz' | 'livez';

/** Options of HealthServer. */
export interface HealthServerOptions {
  /** Called after each /healthz or /livez answer (kubeproxy_proxy_healthz_total / _livez_total). */
  onProbe?: (probe: Probe, code: number) => void;
  /** Called with errors of the listening server after start(). */
  onError?: (err: Error) => void;
}

/** A server whose lifecycle is its HttpServer's: start, stop, address. */
export abstract class HttpEndpoint {
  protected abstract readonly http: HttpServer;

  /** Resolves once listening; rejects with a ListenError naming the address. */
  start(): Promise<void> {
    return this.http.start();
  }

  /** Stops listening and closes open connections. */
  stop(): Promise<void> {
    return this.http.stop();
  }

  /** The bound address (the real port when 0 was asked for); null when not listening. */
  address(): HostPort | null {
    return this.http.address();
  }
}

/** Serves kube-proxy's /healthz and /livez for a ProxyHealth on {host, port}. */
export class HealthServer extends HttpEndpoint {
  protected readonly http: HttpServer;

  constructor(
    readonly health: ProxyHealth,
    bind: HostPort,
    private readonly options: HealthServerOptions = {},
  ) {
    super();
    this.http = new HttpServer('proxy healthz', bind, (req, res) => this.#handle(req, res), options.onError);
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const path = pathOf(req);
    if (path !== '/healthz' && path !== '/livez') return notFound(res);
    const snap = this.health.snapshot();
    const eligible = path === '/healthz' ? this.health.nodeEligible : undefined;
    const ok = snap.healthy && eligible !== false;
    const code = ok ? 200 : 503;
    send(res, code, 'application/json', healthBody(snap, eligible, ok));
    this.options.onProbe?.(path === '/healthz' ? 'healthz' : 'livez', code);
  }
}

// ---- HTTP helpers shared by the health, service health and metrics servers ----

/** A server failed to listen; `code` is the errno name (EADDRINUSE, EACCES, …). */
export class ListenError extends Error {
  override readonly name = 'ListenError';
  /** Why, e.g. "address already in use (EADDRINUSE)". */
  readonly reason: string;
  constructor(
    readonly what: string,
    readonly bindAddress: string,
    readonly code: string | undefined,
    cause: Error,
  ) {
    const reason = describeListenError(code, cause);
    super(`failed to start ${what} on ${bindAddress}: ${reason}`, { cause });
    this.reason = reason;
  }
}

const ERRNO_TEXT: Record<string, string> = {
  EADDRINUSE: 'address already in use',
  EADDRNOTAVAIL: 'cannot assign requested address (not an address of this host)',
  EACCES: 'permission denied',
  EAFNOSUPPORT: 'address family not supported',
};

function describeListenError(code: string | undefined, err: Error): string {
  const text = code === undefined ? undefined : ERRNO_TEXT[code];
  return text === undefined ? err.message : `${text} (${code})`;
}

/** "host:port", with IPv6 hosts in brackets. */
export function formatHostPort(host: string, port: number): string {
  return host.includes(':') ? `[${host}]:${port}` : `${host}:${port}`;
}

/** The request path without the query string. */
export function pathOf(req: IncomingMessage): string {
  const url = req.url ?? '/';
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
}

/** Writes a whole response with the nosniff header every kube-proxy handler sets. */
export function send(res: ServerResponse, code: number, contentType: string, body: string, extra: Record<string, string> = {}): void {
  res.writeHead(code, { 'Content-Type': contentType, 'X-Content-Type-Options': 'nosniff', ...extra });
  res.end(body);
}

/** Go's http.NotFound. */
export function notFound(res: ServerResponse): void {
  send(res, 404, 'text/plain; charset=utf-8', '404 page not found\n');
}

/** One HTTP listener with a promise-based start/stop and errors that name the address. */
export class HttpServer {
  readonly #server: Server;
  #listening = false;
  #starting: Promise<void> | undefined;

  /**
   * `family`: listen on `bind.host` of that family only (an IPv6 wildcard with IPV6_V6ONLY), not
   * on both families as a wildcard host does by default.
   */
  constructor(
    readonly what: string,
    readonly bind: HostPort,
    handler: (req: IncomingMessage, res: ServerResponse) => void,
    private readonly onError?: (err: Error) => void,
    private readonly family?: 4 | 6,
  ) {
    this.#server = createServer(handler);
    this.#server.on('error', (err) => {
      if (this.#listening) this.onError?.(err);
    });
  }

  /** The address as configured, e.g. "0.0.0.0:10256". */
  get bindAddress(): string {
    return formatHostPort(this.bind.host, this.bind.port);
  }

  /** Resolves once listening; rejects with a ListenError naming the address. */
  start(): Promise<void> {
    if (this.#listening) return Promise.resolve();
    this.#starting ??= this.#listen().finally(() => (this.#starting = undefined));
    return this.#starting;
  }

  #listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onError = (err: NodeJS.ErrnoException): void => {
        this.#server.off('listening', onListening);
        reject(new ListenError(this.what, this.bindAddress, err.code, err));
      };
      const onListening = (): void => {
        this.#server.off('error', onError);
        this.#listening = true;
        resolve();
      };
      this.#server.once('error', onError).once('listening', onListening);
      // NOTE: a wildcard host listens on both families when it can, as Go's net.Listen does
      // for "0.0.0.0:port"; Node picks "::" (dual-stack) or falls back to 0.0.0.0 itself.
      const host = this.family === undefined && isUnspecified(this.bind.host) ? undefined : this.bind.host;
      this.#server.listen({ host, port: this.bind.port, ...(this.family === 6 ? { ipv6Only: true } : {}) });
    });
  }

  /** Stops listening and closes open (keep-alive) connections; resolves when closed. */
  stop(): Promise<void> {
    if (!this.#listening) return Promise.resolve();
    this.#listening = false;
    return new Promise((resolve) => {
      this.#server.close(() => resolve());
      this.#server.closeAllConnections();
    });
  }

  /** The bound address; null when not listening. */
  address(): HostPort | null {
    const a = this.#listening ? (this.#server.address() as AddressInfo | null) : null;
    return a === null ? null : { host: a.address, port: a.port };
  }
}
