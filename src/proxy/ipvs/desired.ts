// Pure: one service port + its endpoints -> the virtual servers, ipset entries and dummy-link
// addresses it asks for, as kube-proxy's IPVS syncProxyRules builds them, for both families.
import type { Destination, ServiceFlag, VirtualService } from '../../kernel/ipvs/types.js';
import { serviceId } from '../../kernel/ipvs/types.js';
import { canonicalIp, familyOf, type Family } from '../../model/ip.js';
import { portNameKey, type EndpointInfo, type ServicePortInfo } from '../../model/service.js';
import { Endpoint } from '../slice-endpoints.js';
import { categorizeEndpoints, kept } from '../topology.js';
import { cidrContains, isLoopback, parseCidr, type Cidr } from './desired-net.js';
import { schedulerFlagsError, sortFlags } from './desired-scheduler.js';
import { SET, setName, type SetName } from './ipsets.js';
import type { DesiredContext, DesiredVirtualServer, InternalRedirect, ServiceContribution } from './types.js';

/** `ip,proto:port`: an entry of the hash:ip,port sets. */
export function ipPortEntry(ip: string, protocol: string, port: number): string {
  return [ip, ',', protocol, ':', port].join(''); // one flat string (see destinationId)
}

/** A real server as kube-proxy adds it: masquerade, weight 1, no thresholds (what a tracker's Endpoint is already). */
function destination(ep: EndpointInfo): Destination {
  return { address: ep.address, port: ep.port, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0 };
}

/**
 * Addresses that belong to the node, so are never bound on the dummy link nor put in
 * KUBE-IPVS-IPS (whose filter would refuse the node's own ports on them, kubernetes#115019): every
 * address of its interfaces, NodePort ones or not, and --bind-address.
 */
function nodeAddresses(ctx: DesiredContext): Set<string> {
  const out = new Set<string>();
  for (const a of [...ctx.nodePortAddresses, ...(ctx.nodeAddresses ?? [])]) if (familyOf(a) !== null) out.add(canonicalIp(a));
  if (ctx.config.bindAddress !== undefined) out.add(canonicalIp(ctx.config.bindAddress));
  return out;
}

/**
 * The service flags: annotation flags, `persistent` with affinity, kube-proxy's mh-port for a
 * default mh, and sh-fallback / mh-fallback always for sh / mh.
 */
function flagsOf(svc: ServicePortInfo, scheduler: string): ServiceFlag[] {
  const flags: ServiceFlag[] = [...svc.schedulerFlags];
  if (svc.sessionAffinitySeconds !== null) flags.push('persistent');
  // kube-proxy sets IP_VS_SVC_F_SCHED2 (mh-port) whenever its scheduler is mh.
  if (svc.scheduler === null && scheduler === 'mh' && svc.schedulerFlags.length === 0) flags.push('mh-port');
  // NOTE: a draining (weight-0) real server keeps its sh buckets (ip_vs_sh.c reassign gives it one
  // per round) and its mh slots (ip_vs_mh.c builds from last_weight); without the fallback flag a
  // client hashed to it gets "no destination available" although other servers are ready. The
  // flag re-hashes only those clients; deleting the server instead would drop its open connections.
  if (scheduler === 'sh') flags.push('sh-fallback');
  if (scheduler === 'mh') flags.push('mh-fallback');
  return sortFlags(flags);
}

/** Collects one contribution, deduplicating virtual servers, entries and addresses. */
class Builder {
  readonly virtualServers: DesiredVirtualServer[] = [];
  readonly ipsetEntries: Array<{ set: string; entry: string }> = [];
  readonly addresses: string[] = [];
  readonly redirects: InternalRedirect[] = [];
  readonly #vs = new Set<string>();
  readonly #entries = new Set<string>();
  readonly #addresses = new Set<string>();
  /** The real servers built for each endpoint list: the virtual servers of one list share them. */
  readonly #destinations = new Map<readonly EndpointInfo[], readonly Destination[]>();

  vs(service: VirtualService, endpoints: readonly EndpointInfo[]): void {
    const id = serviceId(service);
    if (this.#vs.has(id)) return;
    this.#vs.add(id);
    let destinations = this.#destinations.get(endpoints);
    // A list of tracker Endpoints is its own list of real servers (see Endpoint).
    if (destinations === undefined) this.#destinations.set(endpoints, (destinations = endpoints.every((ep) => ep instanceof Endpoint) ? (endpoints as Endpoint[]) : endpoints.map(destination)));
    this.virtualServers.push({ service, destinations });
  }

  entry(base: SetName, family: Family, entry: string): void {
    const set = setName(base, family);
    const k = `${set} ${entry}`;
    if (this.#entries.has(k)) return;
    this.#entries.add(k);
    this.ipsetEntries.push({ set, entry });
  }

  /** One per address (protocol and port are the service port's); source ranges win for an IP both external and LB. */
  redirect(r: InternalRedirect): void {
    const had = this.redirects.find((x) => x.address === r.address);
    if (had === undefined) this.redirects.push(r);
    else had.sourceRanges ||= r.sourceRanges;
  }

  bind(address: string, family: Family): void {
    if (this.#addresses.has(address)) return;
    this.#addresses.add(address);
    this.addresses.push(address);
    this.entry(SET.IPVS_IPS, family, address);
  }
}

/** Source ranges of one family; null when there is no firewall (none given, or one is /0). */
function firewallRanges(svc: ServicePortInfo, family: Family): Cidr[] | null {
  const ranges: Cidr[] = [];
  for (const r of svc.loadBalancerSourceRanges) {
    const c = parseCidr(r);
    if (c === null || c.family !== family) continue;
    if (c.prefix === 0) return null; // everything allowed (ipset cannot hold a /0 net)
    ranges.push(c);
  }
  return ranges.length > 0 ? ranges : null;
}

/** `network` or `network/prefix` as ipset prints a net (no suffix for a host). */
function netEntry(c: Cidr): string {
  return c.prefix === (c.family === 'ipv4' ? 32 : 128) ? c.network : `${c.network}/${c.prefix}`;
}

/** What one family of a service port needs. */
function addFamily(b: Builder, svc: ServicePortInfo, all: readonly EndpointInfo[], ctx: DesiredContext, family: Family, clusterIP: string): void {
  const { protocol, port } = svc;
  const scheduler = svc.scheduler ?? ctx.config.ipvs.scheduler;
  const flags = flagsOf(svc, scheduler);
  const persistent = svc.sessionAffinitySeconds !== null;
  const vs = (address: string, p: number): VirtualService => ({
    family, protocol, address, port: p, fwmark: null, scheduler, flags,
    timeout: persistent ? svc.sessionAffinitySeconds! : 0,
    netmask: family === 'ipv4' ? 32 : 128,
    pe: null, // as the kernel reports it: the observed state keeps this object once it is programmed
  });
  const endpoints = kept(all, (ep) => ep.family === family);
  const cat = categorizeEndpoints(endpoints, svc, ctx.nodeName, ctx.zone);
  const clusterEps = svc.internalPolicyLocal ? cat.localEndpoints : cat.clusterEndpoints;
  // kube-proxy (#97081): with eTP Local and no local endpoint, node ports use cluster endpoints.
  const nodePortEps = svc.externalPolicyLocal && cat.localEndpoints.length > 0 ? cat.localEndpoints : cat.clusterEndpoints;
  // External and load-balancer IPs keep Local strictly: their internal clients are redirected to
  // the cluster IP instead (kubernetes#93456, #115931; rules.ts redirectRules).
  const externalEps = svc.externalPolicyLocal ? cat.localEndpoints : cat.clusterEndpoints;
  const service = `${svc.name.namespace}/${svc.name.name}${svc.name.port ? `:${svc.name.port}` : ''}`;
  const redirect = (address: string, sourceRanges: boolean): void => {
    if (svc.externalPolicyLocal) b.redirect({ family, protocol, address, port, clusterIP, sourceRanges, service });
  };
  const nodeAddrs = nodeAddresses(ctx);
  const ofFamily = (ips: readonly string[]): string[] => ips.filter((ip) => familyOf(ip) === family);

  for (const ep of endpoints) {
    if (ep.isLocal) b.entry(SET.LOOP_BACK, family, `${ipPortEntry(ep.address, protocol, ep.port)},${ep.address}`);
  }

  b.entry(SET.CLUSTER_IP, family, ipPortEntry(clusterIP, protocol, port));
  b.vs(vs(clusterIP, port), clusterEps);
  b.bind(clusterIP, family);

  for (const ip of ofFamily(svc.externalIPs)) {
    b.entry(svc.externalPolicyLocal ? SET.EXTERNAL_IP_LOCAL : SET.EXTERNAL_IP, family, ipPortEntry(ip, protocol, port));
    b.vs(vs(ip, port), externalEps);
    redirect(ip, false);
    if (!nodeAddrs.has(ip)) b.bind(ip, family);
  }

  const ranges = firewallRanges(svc, family);
  const nodeFamilyAddrs = [...nodeAddrs].filter((a) => familyOf(a) === family);
  const allowFromNode = ranges !== null && ranges.some((r) => nodeFamilyAddrs.some((a) => cidrContains(r, a)));
  for (const ip of ofFamily(svc.loadBalancerIPs)) {
    const e = ipPortEntry(ip, protocol, port);
    b.entry(SET.LOAD_BALANCER, family, e);
    if (svc.externalPolicyLocal) b.entry(SET.LOAD_BALANCER_LOCAL, family, e);
    if (ranges !== null) {
      b.entry(SET.LOAD_BALANCER_FW, family, e);
      for (const r of ranges) b.entry(SET.LOAD_BALANCER_SOURCE_CIDR, family, `${e},${netEntry(r)}`);
      if (allowFromNode) b.entry(SET.LOAD_BALANCER_SOURCE_IP, family, `${e},${ip}`);
    }
    b.vs(vs(ip, port), externalEps);
    redirect(ip, ranges !== null);
    if (!nodeAddrs.has(ip)) b.bind(ip, family);
  }

  if (svc.nodePort !== null) {
    const nodeIPs = [...new Set(ofFamily(ctx.nodePortAddresses).map(canonicalIp))].filter((ip) => !isLoopback(ip));
    if (nodeIPs.length > 0) {
      const [all, local] = nodePortSets(protocol);
      const entries = protocol === 'sctp' ? nodeIPs.map((ip) => ipPortEntry(ip, protocol, svc.nodePort!)) : [String(svc.nodePort)];
      for (const e of entries) {
        b.entry(all, family, e);
        if (svc.externalPolicyLocal) b.entry(local, family, e);
      }
      for (const ip of nodeIPs) b.vs(vs(ip, svc.nodePort), nodePortEps);
    }
  }

  if (svc.healthCheckNodePort !== null) b.entry(SET.HEALTH_CHECK_NODE_PORT, family, String(svc.healthCheckNodePort));
}

/** The NodePort set and its externalTrafficPolicy=Local twin for a protocol. */
function nodePortSets(protocol: ServicePortInfo['protocol']): [SetName, SetName] {
  if (protocol === 'tcp') return [SET.NODE_PORT_TCP, SET.NODE_PORT_LOCAL_TCP];
  if (protocol === 'udp') return [SET.NODE_PORT_UDP, SET.NODE_PORT_LOCAL_UDP];
  return [SET.NODE_PORT_SCTP, SET.NODE_PORT_LOCAL_SCTP];
}

/**
 * Everything one service port asks of the kernel (pure). Per cluster IP family: a virtual server
 * for the cluster IP, each external and load-balancer IP, and each NodePort address of that
 * family, with that family's endpoints; kube-proxy's ipset entries; the addresses to bind.
 * A service with no endpoints still gets its virtual servers (with no real servers).
 * `--ipvs-exclude-cidrs` plays no part here: it only protects foreign virtual servers from cleanup.
 */
export function desiredForService(svc: ServicePortInfo, endpoints: readonly EndpointInfo[], ctx: DesiredContext): ServiceContribution {
  const key = portNameKey(svc.name);
  const out: ServiceContribution = { key, virtualServers: [], ipsetEntries: [], addresses: [], healthCheck: null, errors: [] };
  const scheduler = svc.scheduler ?? ctx.config.ipvs.scheduler;
  const mismatch = schedulerFlagsError(scheduler, svc.schedulerFlags);
  if (mismatch !== null) {
    out.errors.push({ object: `Service ${svc.name.namespace}/${svc.name.name}`, reason: mismatch });
    return out;
  }
  const b = new Builder();
  for (const clusterIP of svc.clusterIPs) {
    const family = familyOf(clusterIP);
    if (family !== null) addFamily(b, svc, endpoints, ctx, family, canonicalIp(clusterIP));
  }
  out.virtualServers = b.virtualServers;
  out.ipsetEntries = b.ipsetEntries;
  out.addresses = b.addresses;
  if (b.redirects.length > 0) out.redirects = b.redirects;
  if (svc.externalPolicyLocal && svc.healthCheckNodePort !== null) {
    const localReady = new Set(endpoints.filter((ep) => ep.isLocal && ep.ready).map((ep) => ep.address));
    out.healthCheck = { port: svc.healthCheckNodePort, service: `${svc.name.namespace}/${svc.name.name}`, localEndpoints: localReady.size };
  }
  return out;
}
