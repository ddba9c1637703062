// `kube-ipvs-proxy inspect`: what the kernel holds for this proxy, as a table or JSON.
import { NetlinkIpvsClient, type IpvsAvailability, type ServiceWithDestinations } from './kernel/ipvs/client.js';
import { observedDestination, type IpvsInfo } from './kernel/ipvs/types.js';
import { NetlinkIpsetClient } from './kernel/ipset/client.js';
import type { IpsetClient } from './kernel/ipset/types.js';
import { Iptables } from './kernel/iptables.js';
import { DEFAULT_DUMMY_LINK, NetlinkLinkClient, type LinkClient } from './kernel/link.js';

/** A virtual service in inspect's JSON. */
export interface InspectService {
  family: string;
  protocol: string | null;
  address: string | null;
  port: number | null;
  fwmark: number | null;
  scheduler: string;
  flags: string[];
  timeout: number;
  netmask: number;
  destinations: Array<{
    address: string;
    port: number;
    forward: string;
    weight: number;
    upperThreshold: number;
    lowerThreshold: number;
    activeConns: number;
    inactiveConns: number;
  }>;
}

/** Everything inspect reports; a section that could not be read is named in `errors`. */
export interface InspectReport {
  ipvs: { available: true; version: string; connTableSize: number; services: InspectService[] } | { available: false; reason: string };
  ipsets: Array<{ name: string; type: string; family: string | null; entries: string[] }>;
  dummy: { name: string; exists: boolean; addresses: string[] };
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
}

/** Objects this proxy owns: ipsets and chains named KUBE-*, and the dummy link. */
export const OWNED_SET_PREFIX = 'KUBE-';

const realSources: InspectSources = {
  ipvs: () => NetlinkIpvsClient.open(),
  ipset: () => NetlinkIpsetClient.open(),
  link: () => NetlinkLinkClient.open(),
  iptables: async () => (await Iptables.create()).saveOwned(),
};

function toJsonService(s: ServiceWithDestinations): InspectService {
  return {
    family: s.family,
    protocol: s.protocol,
    address: s.address,
    port: s.port,
    fwmark: s.fwmark,
    scheduler: s.scheduler,
    flags: s.flags,
    timeout: s.timeout,
    netmask: s.netmask,
    destinations: s.destinations.map(observedDestination),
  };
}

async function readIpvs(open: InspectSources['ipvs']): Promise<InspectReport['ipvs']> {
  const a = await open();
  if (!a.available) return { available: false, reason: a.reason };
  try {
    const info: IpvsInfo = await a.client.info();
    const services = await a.client.dumpAll();
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
    return { name: DEFAULT_DUMMY_LINK, exists: link !== null, addresses: link ? await client.listAddresses(link) : [] };
  } finally {
    client.close();
  }
}

/** Reads every section; one failing section is reported in `errors`, the others still read. */
export async function gatherInspect(sources: InspectSources = realSources): Promise<InspectReport> {
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
    ipvs: await attempt('ipvs', () => readIpvs(sources.ipvs), { available: false, reason: 'could not be read' } as InspectReport['ipvs']),
    ipsets: await attempt('ipsets', () => readIpsets(sources.ipset), []),
    dummy: await attempt('dummy', () => readDummy(sources.link), { name: DEFAULT_DUMMY_LINK, exists: false, addresses: [] }),
    iptables: await attempt<InspectReport['iptables']>('iptables', () => sources.iptables(), { backend: null, nat: [], filter: [] }),
  };
  report.mode = modeOf(report);
  if (errors.length) report.errors = errors;
  return report;
}

const FORWARD_LABEL: Record<string, string> = { masq: 'Masq', local: 'Local', tunnel: 'Tunnel', route: 'Route' };

function hostPort(address: string, port: number, family: string): string {
  return family === 'ipv6' ? `[${address}]:${port}` : `${address}:${port}`;
}

/** ipvsadm -Ln's layout for the IPVS section, then the ipsets, dummy link and iptables chains. */
export function formatInspect(r: InspectReport): string {
  const out: string[] = [];
  if (!r.ipvs.available) out.push(`IPVS: unavailable (${r.ipvs.reason})`);
  else {
    out.push(`IP Virtual Server version ${r.ipvs.version} (size=${r.ipvs.connTableSize})`);
    out.push('Prot LocalAddress:Port Scheduler Flags');
    out.push('  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn');
    for (const s of r.ipvs.services) {
      const flags = s.flags.filter((f) => f !== 'persistent');
      const where = s.fwmark !== null ? `FWM  ${s.fwmark}${s.family === 'ipv6' ? ' IPv6' : ''}` : `${s.protocol!.toUpperCase().padEnd(4)} ${hostPort(s.address!, s.port!, s.family)}`;
      let line = `${where} ${s.scheduler}`;
      if (flags.length) line += ` (${flags.join(',')})`;
      if (s.flags.includes('persistent')) line += ` persistent ${s.timeout}${s.netmask !== (s.family === 'ipv4' ? 32 : 128) ? ` mask ${s.netmask}` : ''}`;
      out.push(line);
      for (const d of s.destinations) {
        const addr = hostPort(d.address, d.port, d.address.includes(':') ? 'ipv6' : 'ipv4');
        out.push(`  -> ${addr.padEnd(28)} ${(FORWARD_LABEL[d.forward] ?? d.forward).padEnd(7)} ${String(d.weight).padEnd(6)} ${String(d.activeConns).padEnd(10)} ${d.inactiveConns}`);
      }
    }
  }
  out.push('', `ipsets (${r.ipsets.length}):`);
  for (const s of r.ipsets) {
    out.push(`  ${s.name} ${s.type}${s.family ? ` family ${s.family}` : ''} (${s.entries.length} entries)`);
    for (const e of s.entries) out.push(`    ${e}`);
  }
  out.push('', `dummy interface ${r.dummy.name}: ${r.dummy.exists ? 'present' : 'absent'}`);
  for (const a of r.dummy.addresses) out.push(`  ${a}`);
  out.push('', `iptables (${r.iptables.backend ?? 'unknown backend'}):`);
  for (const [table, lines] of [['nat', r.iptables.nat], ['filter', r.iptables.filter]] as const) {
    out.push(`  *${table} (${lines.length} lines)`);
    for (const l of lines) out.push(`    ${l}`);
  }
  if (r.mode !== undefined) out.push('', `proxy mode (from the kernel state): ${r.mode ?? 'none'}`);
  for (const e of r.errors ?? []) out.push('', `error reading ${e.section}: ${e.message}`);
  return `${out.join('\n')}\n`;
}
