// inspect's attribution: the kernel's virtual servers joined with the daemon's desired state
// (owner, endpoint states, draining servers) and what disagrees: missing, extra, different.
import type { DestinationStatus, IpvsStats, VirtualService } from '../kernel/ipvs/types.js';
import { destinationId, serviceId } from '../kernel/ipvs/types.js';
import { canonicalIp, familyOf } from '../model/ip.js';
import type { Attribution, DesiredStateDoc, DesiredVirtualServerDoc, EndpointState } from '../server/desired.js';

/** How the kernel's object compares with the daemon's desired one. */
export type JoinStatus = 'ok' | 'missing' | 'extra' | 'different';

/** A real server in inspect's JSON; the attribution fields are present when the desired state was read. */
export interface InspectDestination {
  address: string;
  port: number;
  forward: string;
  weight: number;
  upperThreshold: number;
  lowerThreshold: number;
  activeConns: number;
  inactiveConns: number;
  /** With --stats. */
  stats?: IpvsStats;
  state?: EndpointState | 'unknown';
  node?: string | null;
  local?: boolean;
  /** Epoch milliseconds when draining started (state `draining`). */
  drainingSince?: number;
  status?: JoinStatus;
  /** `field: want X, kernel Y` for status `different`. */
  differences?: string[];
}

/** A virtual server in inspect's JSON; the attribution fields are present when the desired state was read. */
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
  /** With --stats. */
  stats?: IpvsStats;
  destinations: InspectDestination[];
  /** The owning Service port; null when the daemon does not want this virtual server. */
  owner?: Attribution | null;
  /** `different` when its parameters or any real server disagree. */
  status?: JoinStatus;
  differences?: string[];
}

/** Kernel fields of a dumped real server (stats kept when read). */
export function kernelDestination(d: DestinationStatus): InspectDestination {
  const out: InspectDestination = {
    address: d.address, port: d.port, forward: d.forward, weight: d.weight,
    upperThreshold: d.upperThreshold, lowerThreshold: d.lowerThreshold,
    activeConns: d.activeConns, inactiveConns: d.inactiveConns,
  };
  if (d.stats) out.stats = d.stats;
  return out;
}

/** Scheduler flags are three anonymous kernel bits named after the scheduler: compare the bits. */
const FLAG_BIT: Record<string, string> = { 'sh-fallback': 'flag-1', 'mh-fallback': 'flag-1', 'sh-port': 'flag-2', 'mh-port': 'flag-2' };
const flagKey = (flags: readonly string[]): string => [...new Set(flags.map((f) => FLAG_BIT[f] ?? f))].sort().join(',');

function serviceDifferences(want: VirtualService, have: InspectService): string[] {
  const out: string[] = [];
  if (want.scheduler !== have.scheduler) out.push(`scheduler: want ${want.scheduler}, kernel ${have.scheduler}`);
  if (flagKey(want.flags) !== flagKey(have.flags)) out.push(`flags: want [${want.flags.join(',')}], kernel [${have.flags.join(',')}]`);
  if (want.timeout !== have.timeout) out.push(`timeout: want ${want.timeout}, kernel ${have.timeout}`);
  if (want.netmask !== have.netmask) out.push(`netmask: want ${want.netmask}, kernel ${have.netmask}`);
  return out;
}

function destinationDifferences(want: { forward: string; weight: number; upperThreshold: number; lowerThreshold: number }, have: InspectDestination): string[] {
  const out: string[] = [];
  for (const k of ['forward', 'weight', 'upperThreshold', 'lowerThreshold'] as const) {
    if (want[k] !== have[k]) out.push(`${k}: want ${want[k]}, kernel ${have[k]}`);
  }
  return out;
}

const withStatus = <T extends { status?: JoinStatus; differences?: string[] }>(o: T, diffs: string[]): T =>
  diffs.length ? { ...o, status: 'different', differences: diffs } : { ...o, status: 'ok' };

function joinOne(want: DesiredVirtualServerDoc, have: InspectService | undefined): InspectService {
  const kernelDests = new Map((have?.destinations ?? []).map((d) => [destinationId(d), d]));
  const draining = new Map(want.draining.map((d) => [destinationId(d), d.since]));
  const destinations: InspectDestination[] = [];
  for (const w of want.destinations) {
    const id = destinationId(w);
    const k = kernelDests.get(id);
    kernelDests.delete(id);
    const attr = { state: w.state, node: w.node, local: w.local };
    if (!k) destinations.push({ ...pickDestination(w), activeConns: 0, inactiveConns: 0, ...attr, status: 'missing' });
    else destinations.push(withStatus({ ...k, ...attr }, destinationDifferences(w, k)));
  }
  for (const [id, k] of kernelDests) {
    const since = draining.get(id);
    if (since === undefined) destinations.push({ ...k, state: 'unknown', status: 'extra' });
    else destinations.push(withStatus({ ...k, state: 'draining', drainingSince: since }, k.weight === 0 ? [] : [`weight: want 0 (draining), kernel ${k.weight}`]));
  }
  const base: InspectService = have
    ? { ...have, destinations, owner: want.owner }
    : { ...pickService(want.service), destinations, owner: want.owner };
  if (!have) return { ...base, status: 'missing' };
  const diffs = serviceDifferences(want.service, have);
  const vs = withStatus(base, diffs);
  if (vs.status === 'ok' && destinations.some((d) => d.status !== 'ok')) return { ...vs, status: 'different' };
  return vs;
}

function pickService(s: VirtualService): Omit<InspectService, 'destinations'> {
  return { family: s.family, protocol: s.protocol, address: s.address, port: s.port, fwmark: s.fwmark, scheduler: s.scheduler, flags: [...s.flags], timeout: s.timeout, netmask: s.netmask };
}

function pickDestination(d: Omit<InspectDestination, 'activeConns' | 'inactiveConns'>): Omit<InspectDestination, 'activeConns' | 'inactiveConns'> {
  return { address: d.address, port: d.port, forward: d.forward, weight: d.weight, upperThreshold: d.upperThreshold, lowerThreshold: d.lowerThreshold };
}

/**
 * Joins the kernel's virtual servers with the desired ones: each gets its owner and a status, each
 * real server its endpoint state and a status; desired ones the kernel lacks are added (`missing`),
 * kernel ones nobody wants are `extra`. Sorted by virtual server id.
 */
export function joinDesired(kernel: readonly InspectService[], desired: DesiredStateDoc): InspectService[] {
  const byId = new Map(kernel.map((s) => [serviceId(s as Parameters<typeof serviceId>[0]), s]));
  const out: Array<[string, InspectService]> = [];
  for (const want of desired.virtualServers) {
    out.push([want.id, joinOne(want, byId.get(want.id))]);
    byId.delete(want.id);
  }
  for (const [id, s] of byId) {
    out.push([id, { ...s, owner: null, status: 'extra', destinations: s.destinations.map((d) => ({ ...d, status: 'extra' as const })) }]);
  }
  return out.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)).map(([, s]) => s);
}

/** inspect's filters: --service ns/name, --vip IP[:PORT]. */
export interface InspectFilter {
  service?: string;
  vip?: { address: string; port: number | null };
}

/** The virtual servers that pass the filters (a Service filter matches only attributed ones). */
export function filterServices(services: readonly InspectService[], f: InspectFilter): InspectService[] {
  const vipAddress = f.vip && familyOf(f.vip.address) === 'ipv6' ? canonicalIp(f.vip.address) : f.vip?.address;
  return services.filter((s) => {
    if (f.service !== undefined && (!s.owner || `${s.owner.namespace}/${s.owner.name}` !== f.service)) return false;
    if (f.vip && (s.address !== vipAddress || (f.vip.port !== null && s.port !== f.vip.port))) return false;
    return true;
  });
}
