// `kube-ipvs-proxy inspect`: what the kernel holds for this proxy, as a table or JSON; with the
// daemon's desired state (GET /desired), each virtual server attributed and compared (inspect/join.ts).
import type { Config } from './config.js';
import { desiredUrl, fetchDesired } from './inspect/desired-client.js';
import { filterServices, joinDesired, kernelDestination, type InspectFilter, type InspectService } from './inspect/join.js';
import { formatIpvs } from './inspect/table.js';
import { NetlinkIpsetClient } from './kernel/ipset/client.js';
import type { IpsetClient } from './kernel/ipset/types.js';
import { Iptables } from './kernel/iptables.js';
import { NetlinkIpvsClient, type IpvsAvailability, type ServiceWithDestinations } from './kernel/ipvs/client.js';
import type { IpvsInfo } from './kernel/ipvs/types.js';
import { DEFAULT_DUMMY_LINK, NetlinkLinkClient, type LinkClient } from './kernel/link.js';
import type { DesiredStateDoc } from './server/desired.js';
import { trafficByService, type ServiceTraffic } from './server/service-stats.js';

export type { InspectDestination, InspectService, JoinStatus } from './inspect/join.js';

/** Where the desired state came from: read (and from where) or why not. */
export type DesiredSection =
  | { available: true; source: string; node: string; defaultScheduler: string }
  | { available: false; source: string | null; reason: string };

/** Traffic of one Service port (with --stats and the desired state): sums over its virtual servers. */
export type InspectTraffic = Omit<ServiceTraffic, 'key'> & { service: string };

/** Everything inspect reports; a section that could not be read is named in `errors`. */
export interface InspectReport {
  ipvs: { available: true; version: string; connTableSize: number; services: InspectService[] } | { available: false; reason: string };
  /** The daemon's desired state (joined into ipvs.services), or why inspect shows the kernel view only. */
  desired?: DesiredSection;
  /** With --stats and the desired state: traffic per Service port. */
  traffic?: InspectTraffic[];
  ipsets: Array<{ name: string; type: string; family: string | null; entries: string[] }>;
  /** The dummy link, its addresses and the local routes through it (the two ways a Service IP is bound, --ipvs-address-binding). */
  dummy: { name: string; exists: boolean; addresses: string[]; routes: string[] };
  iptables: { backend: string | null; nat: string[]; filter: string[] };
  /** The proxy mode the kernel state belongs to (see {@link modeOf}). */
  mode?: 'ipvs' | 'iptables' | 'both' | null;
  errors?: Array<{ section: string; message: string }>;
}

/**
 * Which proxy mode programmed this node, from its state: `ipvs` (virtual servers, kube-ipvs0 or
 * the IPVS mode's chains), `iptables` (KUBE-SVC/SEP/NODEPORTS chains), `both` mid-switch, null.
 */
export function modeOf(r: Omit<InspectReport, 'mode'>): InspectReport['mode'] {
  const nat = r.iptables.nat.join('\n');
  const ipvs = r.dummy.exists || (r.ipvs.available && r.ipvs.services.length > 0) || /KUBE-(NODE-PORT|LOAD-BALANCER)\b/.test(nat);
  const iptables = /KUBE-(SVC|SEP)-|KUBE-NODEPORTS\b/.test(nat);
  return ipvs && iptables ? 'both' : ipvs ? 'ipvs' : iptables ? 'iptables' : null;
}

/** The kernel clients inspect reads through (injectable for tests). */
export interface InspectSources {
  ipvs: () => Promise<IpvsAvailability>;
  ipset: () => Promise<IpsetClient>;
  link: () => LinkClient;
  iptables: () => Promise<{ backend: string; nat: string[]; filter: string[] }>;
  /** The daemon's desired state; absent = kernel view only. `source` names where it is read from. */
  desired?: { source: string; read: () => Promise<DesiredStateDoc> };
}

/** What inspect is asked for besides the kernel dump. */
export interface InspectOptions extends InspectFilter {
  /** Read IPVS's counters (STATS64) and rates. */
  stats?: boolean;
}

/** Objects this proxy owns: ipsets and chains named KUBE-*, and the dummy link. */
export const OWNED_SET_PREFIX = 'KUBE-';

/** The real kernel clients. */
export const realSources: InspectSources = {
  ipvs: () => NetlinkIpvsClient.open(),
  ipset: () => NetlinkIpsetClient.open(),
  link: () => NetlinkLinkClient.open(),
  iptables: async () => (await Iptables.create()).saveOwned(),
};

/** The kernel clients, and the desired state from the daemon's metrics server (when enabled). */
export function inspectSourcesFor(config: Config): InspectSources {
  const bind = config.metricsBindAddress;
  if (bind === null) return realSources;
  const source = desiredUrl(bind);
  return { ...realSources, desired: { source, read: () => fetchDesired(source) } };
}

function toJsonService(s: ServiceWithDestinations): InspectService {
  const out: InspectService = {
    family: s.family,
    protocol: s.protocol,
    address: s.address,
    port: s.port,
    fwmark: s.fwmark,
    scheduler: s.scheduler,
    flags: s.flags,
    timeout: s.timeout,
    netmask: s.netmask,
    destinations: s.destinations.map(kernelDestination),
  };
  if (s.stats) out.stats = s.stats;
  return out;
}

async function readIpvs(open: InspectSources['ipvs'], stats: boolean): Promise<InspectReport['ipvs']> {
  const a = await open();
  if (!a.available) return { available: false, reason: a.reason };
  try {
    const info: IpvsInfo = await a.client.info();
    const services = await a.client.dumpAll(stats ? { stats: true } : {});
    return { available: true, version: info.version, connTableSize: info.connTableSize, services: services.map(toJsonService) };
  } finally {
    a.client.close();
  }
}

async function readIpsets(open: InspectSources['ipset']): Promise<InspectReport['ipsets']> {
  const client = await open();
  try {
    const sets = (await client.list()).filter((s) => s.name.startsWith(OWNED_SET_PREFIX));
    return sets.map((s) => ({ name: s.name, type: s.type, family: s.family, entries: s.entries }));
  } finally {
    client.close();
  }
}

async function readDummy(open: InspectSources['link']): Promise<InspectReport['dummy']> {
  const client = open();
  try {
    const link = await client.getLink(DEFAULT_DUMMY_LINK);
    if (!link) return { name: DEFAULT_DUMMY_LINK, exists: false, addresses: [], routes: [] };
    return { name: DEFAULT_DUMMY_LINK, exists: true, addresses: await client.listAddresses(link), routes: await client.listLocalRoutes(link) };
  } finally {
    client.close();
  }
}

/**
 * Reads every section; one failing section is reported in `errors`, the others still read. With
 * the desired state, virtual servers are attributed and compared (see joinDesired); filters apply
 * to ipvs.services.
 */
export async function gatherInspect(sources: InspectSources = realSources, options: InspectOptions = {}): Promise<InspectReport> {
  const errors: NonNullable<InspectReport['errors']> = [];
  const attempt = async <T>(section: string, fn: () => Promise<T>, fallback: T): Promise<T> => {
    try {
      return await fn();
    } catch (e) {
      errors.push({ section, message: e instanceof Error ? e.message : String(e) });
      return fallback;
    }
  };
  const report: InspectReport = {
    ipvs: await attempt('ipvs', () => readIpvs(sources.ipvs, options.stats ?? false), { available: false, reason: 'could not be read' } as InspectReport['ipvs']),
    ipsets: await attempt('ipsets', () => readIpsets(sources.ipset), []),
    dummy: await attempt('dummy', () => readDummy(sources.link), { name: DEFAULT_DUMMY_LINK, exists: false, addresses: [], routes: [] }),
    iptables: await attempt<InspectReport['iptables']>('iptables', () => sources.iptables(), { backend: null, nat: [], filter: [] }),
  };
  report.mode = modeOf(report);
  await attribute(report, sources.desired, options);
  if (options.service !== undefined && !report.desired?.available) {
    errors.push({ section: 'filter', message: `--service ${options.service}: needs the daemon's desired state, which is unavailable` });
  }
  if (errors.length) report.errors = errors;
  return report;
}

async function attribute(report: InspectReport, desired: InspectSources['desired'], options: InspectOptions): Promise<void> {
  let doc: DesiredStateDoc | null = null;
  if (!desired) report.desired = { available: false, source: null, reason: 'no desired-state source (metrics server disabled)' };
  else {
    try {
      doc = await desired.read();
      report.desired = { available: true, source: desired.source, node: doc.node, defaultScheduler: doc.defaultScheduler };
    } catch (e) {
      report.desired = { available: false, source: desired.source, reason: e instanceof Error ? e.message : String(e) };
    }
  }
  if (!report.ipvs.available) return;
  let services = report.ipvs.services;
  if (doc) services = joinDesired(services, doc);
  services = filterServices(services, options);
  report.ipvs.services = services;
  if (doc && options.stats) {
    const owners = new Map(doc.virtualServers.flatMap((v) => (v.owner ? [[v.id, v.owner.service] as const] : [])));
    report.traffic = trafficByService(services.filter((s) => s.status !== 'missing'), (id) => owners.get(id)).map(({ key, ...t }) => ({ service: key, ...t }));
  }
}

/**
 * ipvsadm -Ln's layout for the IPVS section (with attribution and stats when present), then the
 * ipsets, dummy link and iptables chains; `ipvsOnly` (inspect's filters) prints the IPVS section alone.
 */
export function formatInspect(r: InspectReport, opts: { ipvsOnly?: boolean } = {}): string {
  const out: string[] = formatIpvs(r);
  if (opts.ipvsOnly) {
    for (const e of r.errors ?? []) out.push('', `error reading ${e.section}: ${e.message}`);
    return `${out.join('\n')}\n`;
  }
  out.push('', `ipsets (${r.ipsets.length}):`);
  for (const s of r.ipsets) {
    out.push(`  ${s.name} ${s.type}${s.family ? ` family ${s.family}` : ''} (${s.entries.length} entries)`);
    for (const e of s.entries) out.push(`    ${e}`);
  }
  out.push('', `dummy interface ${r.dummy.name}: ${r.dummy.exists ? 'present' : 'absent'}`);
  for (const a of r.dummy.addresses) out.push(`  ${a}`);
  for (const a of r.dummy.routes) out.push(`  ${a} (local route)`);
  out.push('', `iptables (${r.iptables.backend ?? 'unknown backend'}):`);
  for (const [table, lines] of [['nat', r.iptables.nat], ['filter', r.iptables.filter]] as const) {
    out.push(`  *${table} (${lines.length} lines)`);
    for (const l of lines) out.push(`    ${l}`);
  }
  if (r.mode !== undefined) out.push('', `proxy mode (from the kernel state): ${r.mode ?? 'none'}`);
  for (const e of r.errors ?? []) out.push('', `error reading ${e.section}: ${e.message}`);
  return `${out.join('\n')}\n`;
}
