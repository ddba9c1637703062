// The normalised daemon configuration: its type, kube-proxy's defaults (ipvs mode and a 1s
// minimum sync period being ours) and its checks (rules.ts). Durations are milliseconds.

import { formatDuration } from './duration.js';
import type { HostPort } from './net.js';
import { cidrFamily, ipFamily } from './net.js';
import { check, integer, listOf, nested, nullable, object, oneOf, optional, typed, withDefault, type Checked, type Issue, type IssuePath, type Rule } from './rules.js';

/** IPVS schedulers the kernel ships (ip_vs_<name>.ko); "twos" needs Linux ≥ 6.6. */
export const SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'mh', 'fo', 'ovf', 'twos'] as const;

/** An IPVS scheduler name. */
export type Scheduler = (typeof SCHEDULERS)[number];

/** Proxy modes: ipvs (ours, the default) or the iptables proxier. */
export const PROXY_MODES = ['ipvs', 'iptables'] as const;
/** How Service IPs are made local (docs/decisions.md): a local route each through the dummy link, or kube-proxy's address each on it. */
export const ADDRESS_BINDINGS = ['route', 'address'] as const;

/** Default ports of the health and metrics servers, as kube-proxy. */
export const HEALTHZ_PORT = 10256;
/** Default port of the metrics server. */
export const METRICS_PORT = 10249;

/** Proxy mode. */
export type ProxyMode = (typeof PROXY_MODES)[number];
export type AddressBinding = (typeof ADDRESS_BINDINGS)[number];

/** The normalised, validated configuration the daemon runs with. */
export interface Config {
  mode: ProxyMode;
  /** Fall back to the iptables proxier when IPVS is unavailable. */
  fallback: boolean;
  /** Longest time between two syncs (a full resync at least this often); must be > 0. */
  syncPeriodMs: number;
  /** Shortest time between the end of one sync and the start of the next. */
  minSyncPeriodMs: number;
  ipvs: {
    /** IPVS scheduler for every virtual server. */
    scheduler: Scheduler;
    /** CIDRs whose virtual servers cleanup never deletes. */
    excludeCIDRs: string[];
    /** Set arp_ignore=1 and arp_announce=2. */
    strictARP: boolean;
    /** How Service IPs are bound to the dummy link. */
    addressBinding: AddressBinding;
    /** IPVS connection timeouts; 0 leaves the kernel's value. */
    tcpTimeoutMs: number;
    tcpFinTimeoutMs: number;
    udpTimeoutMs: number;
  };
  /**
   * Conntrack settings as kube-proxy applies them, with its defaults; 0 (false) leaves a setting as
   * the kernel has it. nf_conntrack_max = max(maxPerCore × CPUs, min), its hash size raised to a
   * quarter of it; both only in the initial network namespace (read-only elsewhere).
   */
  conntrack: {
    maxPerCore: number;
    min: number;
    tcpEstablishedTimeoutMs: number;
    tcpCloseWaitTimeoutMs: number;
    tcpBeLiberal: boolean;
    udpTimeoutMs: number;
    udpStreamTimeoutMs: number;
  };
  /** Pod CIDRs, at most one per IP family. */
  clusterCIDRs: string[];
  masqueradeAll: boolean;
  masqueradeBit: number;
  /** CIDRs of node IPs that accept NodePorts, or ['primary']; empty = every local IP. */
  nodePortAddresses: string[];
  hostnameOverride?: string;
  /** Overrides the node's primary IP (kube-proxy --bind-address; nothing binds to it). */
  bindAddress?: string;
  /** null = server disabled. */
  healthzBindAddress: HostPort | null;
  metricsBindAddress: HostPort | null;
  kubeconfig?: string;
  master?: string;
  /** The KubeProxyConfiguration file that was loaded, if any. */
  configFile?: string;
  /** Standalone mode: read Services/EndpointSlices from this file or directory. */
  manifests?: string;
  /** Sync once and exit. */
  once: boolean;
  /** Compute and print the plan without touching the kernel. */
  dryRun: boolean;
  /** Longest wait for a removed real server's connections to drain; 0 = no limit. */
  gracefulTerminationTimeoutMs: number;
  log: {
    format: 'json' | 'text';
    /** klog-style verbosity (-v): 0 info, ≥ 2 debug, ≥ 4 trace. */
    verbosity: number;
  };
  /** Per-Service traffic metrics from IPVS counters (opt-in: one IPVS dump per period). */
  serviceStats: {
    enabled: boolean;
    /** Most Service ports exported (7 series each). */
    maxServices: number;
    /** Age under which a scrape reuses the last dump. */
    periodMs: number;
  };
  /** Record per-Service problems as Kubernetes Events on the Service (API mode). */
  events: boolean;
}

/** What ConfigSchema accepts: any field may be left out to take its default. */
export type ConfigInput = {
  [K in keyof Config]?: Config[K] extends readonly unknown[] ? Config[K] : Config[K] extends object ? Partial<Config[K]> : Config[K];
};

const quoted = (v: unknown): string => JSON.stringify(v);

const bool = typed('boolean');
const cidr = typed('string', (s) => (cidrFamily(s) !== 0 ? undefined : `invalid CIDR ${quoted(s)}`));
const ip = typed('string', (s) => (ipFamily(s) !== 0 ? undefined : `invalid IP address ${quoted(s)}`));
const notEmpty = (s: string): string | undefined => (s.length > 0 ? undefined : 'must not be empty');
const path = typed('string', notEmpty);
const durationMs = typed('number', (n) => (n >= 0 ? undefined : 'must not be negative'));
const atLeast = (min: number, reason: string) => typed('number', (n) => (n >= min ? undefined : reason));
/** A timeout the kernel keeps in seconds: 0 (leave it) or at least 1s. */
const seconds = typed('number', (n) => (n === 0 || n >= 1000 ? undefined : 'must be 0 or at least 1s'));
const hostPort = object<HostPort>({ host: { rule: ip }, port: { rule: integer(0, 65_535, 'port out of range') } });
const trimmed: Rule<string> = (v, at, issues) => {
  const s = typed('string')(v, at, issues);
  return s === undefined ? undefined : typed('string', notEmpty)(s.trim(), at, issues);
};

function onePerFamily(cidrs: string[], at: IssuePath, issues: Issue[]): void {
  const families = cidrs.map(cidrFamily);
  if (families.length > 2 || (families.length === 2 && families[0] === families[1])) issues.push({ path: at, message: 'at most one CIDR per IP family (a dual-stack pair)' });
}

function nodePortAddresses(list: string[], at: IssuePath, issues: Issue[]): void {
  list.forEach((a, i) => {
    if (a === 'primary') {
      if (list.length > 1) issues.push({ path: [...at, i], message: '"primary" must be the only value' });
    } else if (cidrFamily(a) === 0) {
      issues.push({ path: [...at, i], message: `invalid CIDR ${quoted(a)} (or use "primary")` });
    }
  });
}

function crossChecks(c: Config, issues: Issue[]): void {
  if (c.syncPeriodMs > 0 && c.minSyncPeriodMs > c.syncPeriodMs) {
    issues.push({ path: ['minSyncPeriodMs'], message: `${formatDuration(c.minSyncPeriodMs)} must not exceed the sync period (${formatDuration(c.syncPeriodMs)})` });
  }
  if (c.manifests !== undefined && (c.kubeconfig !== undefined || c.master !== undefined)) {
    issues.push({ path: ['manifests'], message: 'standalone mode cannot be combined with a kubeconfig or master' });
  }
}

const configRule = object<Config>(
  {
    mode: withDefault(oneOf(PROXY_MODES, 'proxy mode'), () => 'ipvs'),
    fallback: withDefault(bool, () => true),
    syncPeriodMs: withDefault(typed('number', (n) => (n > 0 ? undefined : 'must be greater than 0')), () => 30_000),
    minSyncPeriodMs: withDefault(durationMs, () => 1_000),
    ipvs: nested(object<Config['ipvs']>({
      scheduler: withDefault(oneOf(SCHEDULERS, 'scheduler'), () => 'rr'),
      excludeCIDRs: withDefault(listOf(cidr), () => []),
      strictARP: withDefault(bool, () => false),
      addressBinding: withDefault(oneOf(ADDRESS_BINDINGS, 'address binding'), () => 'route'),
      tcpTimeoutMs: withDefault(durationMs, () => 0),
      tcpFinTimeoutMs: withDefault(durationMs, () => 0),
      udpTimeoutMs: withDefault(durationMs, () => 0),
    })),
    conntrack: nested(object<Config['conntrack']>({
      maxPerCore: withDefault(integer(0, 2 ** 31 - 1, 'must be within [0, 2147483647]'), () => 32 * 1024),
      min: withDefault(integer(0, 2 ** 31 - 1, 'must be within [0, 2147483647]'), () => 128 * 1024),
      tcpEstablishedTimeoutMs: withDefault(seconds, () => 24 * 3_600_000),
      tcpCloseWaitTimeoutMs: withDefault(seconds, () => 3_600_000),
      tcpBeLiberal: withDefault(bool, () => false),
      udpTimeoutMs: withDefault(seconds, () => 0),
      udpStreamTimeoutMs: withDefault(seconds, () => 0),
    })),
    clusterCIDRs: withDefault(listOf(cidr, onePerFamily), () => []),
    masqueradeAll: withDefault(bool, () => false),
    masqueradeBit: withDefault(integer(0, 31, 'must be within [0, 31]'), () => 14),
    nodePortAddresses: withDefault(listOf(typed('string'), nodePortAddresses), () => []),
    hostnameOverride: optional(trimmed),
    bindAddress: optional(ip),
    healthzBindAddress: withDefault(nullable(hostPort), () => ({ host: '0.0.0.0', port: HEALTHZ_PORT })),
    metricsBindAddress: withDefault(nullable(hostPort), () => ({ host: '127.0.0.1', port: METRICS_PORT })),
    kubeconfig: optional(path),
    master: optional(path),
    configFile: optional(path),
    manifests: optional(path),
    once: withDefault(bool, () => false),
    dryRun: withDefault(bool, () => false),
    gracefulTerminationTimeoutMs: withDefault(durationMs, () => 15 * 60_000),
    log: nested(object<Config['log']>({
      format: withDefault(oneOf(['json', 'text'] as const, 'log format'), () => 'text'),
      verbosity: withDefault(integer(0, Number.MAX_SAFE_INTEGER, 'must not be negative'), () => 0),
    })),
    serviceStats: nested(object<Config['serviceStats']>({
      enabled: withDefault(bool, () => false),
      maxServices: withDefault(integer(1, Number.MAX_SAFE_INTEGER, 'must be at least 1'), () => 500),
      periodMs: withDefault(atLeast(1000, 'must be at least 1s'), () => 15_000),
    })),
    events: withDefault(bool, () => true),
  },
  { refine: crossChecks },
);

/** Checks a ConfigInput (unknown fields dropped) into a Config; `parse({})` gives every default. */
export const ConfigSchema = {
  safeParse(input: unknown): Checked<Config> {
    return check(configRule, input);
  },
  /** The Config, or a TypeError listing every issue as `path: reason`. */
  parse(input: ConfigInput): Config {
    const r = check(configRule, input);
    if (r.success) return r.data;
    throw new TypeError(r.error.issues.map((i) => `${i.path.join('.') || '(config)'}: ${i.message}`).join('\n'));
  },
};

/** The configuration with every default, a fresh object each call. */
export function defaultConfig(): Config {
  return ConfigSchema.parse({});
}
