// The normalised daemon configuration: one zod schema with kube-proxy's defaults (ipvs mode
// and a 1s minimum sync period being ours). Durations are milliseconds.

import { z } from 'zod';
import { formatDuration } from './duration.js';
import { cidrFamily, ipFamily } from './net.js';

/** IPVS schedulers the kernel ships (ip_vs_<name>.ko); "twos" needs Linux ≥ 6.6. */
export const SCHEDULERS = ['rr', 'wrr', 'lc', 'wlc', 'lblc', 'lblcr', 'dh', 'sh', 'sed', 'nq', 'mh', 'fo', 'ovf', 'twos'] as const;

/** An IPVS scheduler name. */
export type Scheduler = (typeof SCHEDULERS)[number];

/** Proxy modes: ipvs (ours, the default) or the iptables proxier. */
export const PROXY_MODES = ['ipvs', 'iptables'] as const;

/** Default ports of the health and metrics servers, as kube-proxy. */
export const HEALTHZ_PORT = 10256;
/** Default port of the metrics server. */
export const METRICS_PORT = 10249;

const quoted = (v: unknown): string => JSON.stringify(v);

const cidr = z.string().refine((s) => cidrFamily(s) !== 0, { error: (iss) => `invalid CIDR ${quoted(iss.input)}` });
const ip = z.string().refine((s) => ipFamily(s) !== 0, { error: (iss) => `invalid IP address ${quoted(iss.input)}` });
const path = z.string().min(1, { error: 'must not be empty' });
const durationMs = z.number().min(0, { error: 'must not be negative' });
const hostPort = z.object({
  host: ip,
  port: z.number().int().min(0).max(65_535, { error: 'port out of range' }),
});

function onePerFamily(cidrs: string[]): boolean {
  const families = cidrs.map(cidrFamily);
  return families.length <= 2 && !(families.length === 2 && families[0] === families[1]);
}

function checkNodePortAddresses(list: string[], ctx: z.RefinementCtx): void {
  list.forEach((a, i) => {
    if (a === 'primary') {
      if (list.length > 1) ctx.addIssue({ code: 'custom', path: [i], message: '"primary" must be the only value' });
    } else if (cidrFamily(a) === 0) {
      ctx.addIssue({ code: 'custom', path: [i], message: `invalid CIDR ${quoted(a)} (or use "primary")` });
    }
  });
}

const ipvsSchema = z.object({
  /** IPVS scheduler for every virtual server. */
  scheduler: z.enum(SCHEDULERS, {
    error: (iss) => `unknown scheduler ${quoted(iss.input)} (valid: ${SCHEDULERS.join(', ')})`,
  }).default('rr'),
  /** CIDRs whose virtual servers cleanup never deletes. */
  excludeCIDRs: z.array(cidr).default([]),
  /** Set arp_ignore=1 and arp_announce=2. */
  strictARP: z.boolean().default(false),
  /** IPVS connection timeouts; 0 leaves the kernel's value. */
  tcpTimeoutMs: durationMs.default(0),
  tcpFinTimeoutMs: durationMs.default(0),
  udpTimeoutMs: durationMs.default(0),
});

const logSchema = z.object({
  format: z.enum(['json', 'text'], { error: (iss) => `unknown log format ${quoted(iss.input)} (valid: json, text)` }).default('text'),
  /** klog-style verbosity (-v): 0 info, ≥ 2 debug, ≥ 4 trace. */
  verbosity: z.number().int().min(0, { error: 'must not be negative' }).default(0),
});

/** Schema of the normalised configuration; `ConfigSchema.parse({})` gives every default. */
export const ConfigSchema = z
  .object({
    mode: z.enum(PROXY_MODES, { error: (iss) => `unknown proxy mode ${quoted(iss.input)} (valid: ipvs, iptables)` }).default('ipvs'),
    /** Fall back to the iptables proxier when IPVS is unavailable. */
    fallback: z.boolean().default(true),
    /** Longest time between two syncs (a full resync at least this often); must be > 0. */
    syncPeriodMs: z.number().positive({ error: 'must be greater than 0' }).default(30_000),
    /** Shortest time between the end of one sync and the start of the next. */
    minSyncPeriodMs: durationMs.default(1_000),
    ipvs: ipvsSchema.prefault({}),
    /** Pod CIDRs, at most one per IP family. */
    clusterCIDRs: z.array(cidr).refine(onePerFamily, { error: 'at most one CIDR per IP family (a dual-stack pair)' }).default([]),
    masqueradeAll: z.boolean().default(false),
    masqueradeBit: z.number().int().min(0, { error: 'must be within [0, 31]' }).max(31, { error: 'must be within [0, 31]' }).default(14),
    /** CIDRs of node IPs that accept NodePorts, or ['primary']; empty = every local IP. */
    nodePortAddresses: z.array(z.string()).superRefine(checkNodePortAddresses).default([]),
    hostnameOverride: z.string().trim().min(1, { error: 'must not be empty' }).optional(),
    /** Overrides the node's primary IP (kube-proxy --bind-address; nothing binds to it). */
    bindAddress: ip.optional(),
    /** null = server disabled. */
    healthzBindAddress: hostPort.nullable().default({ host: '0.0.0.0', port: HEALTHZ_PORT }),
    metricsBindAddress: hostPort.nullable().default({ host: '127.0.0.1', port: METRICS_PORT }),
    kubeconfig: path.optional(),
    master: z.string().min(1, { error: 'must not be empty' }).optional(),
    /** The KubeProxyConfiguration file that was loaded, if any. */
    configFile: path.optional(),
    /** Standalone mode: read Services/EndpointSlices from this file or directory. */
    manifests: path.optional(),
    /** Sync once and exit. */
    once: z.boolean().default(false),
    /** Compute and print the plan without touching the kernel. */
    dryRun: z.boolean().default(false),
    /** Longest wait for a removed real server's connections to drain; 0 = no limit. */
    gracefulTerminationTimeoutMs: durationMs.default(15 * 60_000),
    log: logSchema.prefault({}),
    /** Per-Service traffic metrics from IPVS counters (opt-in: one IPVS dump per period). */
    serviceStats: z
      .object({
        enabled: z.boolean().default(false),
        /** Most Service ports exported (7 series each). */
        maxServices: z.number().int().min(1, { error: 'must be at least 1' }).default(500),
        /** Age under which a scrape reuses the last dump. */
        periodMs: z.number().min(1000, { error: 'must be at least 1s' }).default(15_000),
      })
      .prefault({}),
    /** Record per-Service problems as Kubernetes Events on the Service (API mode). */
    events: z.boolean().default(true),
  })
  .superRefine((c, ctx) => {
    if (c.syncPeriodMs > 0 && c.minSyncPeriodMs > c.syncPeriodMs) {
      ctx.addIssue({
        code: 'custom',
        path: ['minSyncPeriodMs'],
        message: `${formatDuration(c.minSyncPeriodMs)} must not exceed the sync period (${formatDuration(c.syncPeriodMs)})`,
      });
    }
    if (c.manifests !== undefined && (c.kubeconfig !== undefined || c.master !== undefined)) {
      ctx.addIssue({ code: 'custom', path: ['manifests'], message: 'standalone mode cannot be combined with a kubeconfig or master' });
    }
  });

/** The normalised, validated configuration the daemon runs with. */
export type Config = z.output<typeof ConfigSchema>;

/** What ConfigSchema accepts: any field may be left out to take its default. */
export type ConfigInput = z.input<typeof ConfigSchema>;

/** The configuration with every default, a fresh object each call. */
export function defaultConfig(): Config {
  return ConfigSchema.parse({});
}
