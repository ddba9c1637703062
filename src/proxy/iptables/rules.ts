// Pure: one service port + its endpoints -> kube-proxy iptables-mode rules for one family
// (syncProxyRules / writeServiceToEndpointRules in pkg/proxy/iptables/proxier.go): the rules it
// adds to the shared chains, and its own KUBE-SVC/SVL/EXT/FW/SEP chains. Then the fixed chains
// and the jumps into them, which put the per-service pieces together.
import { comment, type ChainSpec, type JumpSpec, type Rule, type TableSpec } from '../../kernel/iptables.js';
import { familyOf, type Family } from '../../model/ip.js';
import type { EndpointInfo, ServicePortInfo } from '../../model/service.js';
import { cidrContains, isLoopback, parseCidr } from '../ipvs/desired-net.js';
import { categorizeEndpoints, externallyAccessible, usesClusterEndpoints, usesLocalEndpoints } from '../topology.js';
import { CHAIN, endpointChain, endpointString, portNameString, serviceChains } from './names.js';

/** What the rules depend on besides the service (one family). */
export interface RulesContext {
  family: Family;
  nodeName: string;
  /** This node's topology.kubernetes.io/zone label ('' or absent: none), for topology hints. */
  zone?: string;
  masqueradeAll: boolean;
  /** `0x4000` for --iptables-masquerade-bit 14. */
  masqueradeMark: string;
  /** This family's --cluster-cidr (kube-proxy's ClusterCIDR local detector); null = no detection. */
  clusterCIDR: string | null;
  /** Addresses NodePorts answer on (this family); null = every local address (`addrtype LOCAL`). */
  nodePortAddresses: readonly string[] | null;
  /** The node's own addresses (this family): a source range holding one lets the node reach the LB IP. */
  nodeIPs: readonly string[];
  /** Leave out the per-endpoint comments (kube-proxy's large cluster mode, > 1,000 endpoints). */
  largeCluster: boolean;
  /** Drop conntrack-INVALID packets in KUBE-FORWARD (kube-proxy does unless nf_conntrack_tcp_be_liberal). */
  dropInvalid: boolean;
}

/** Endpoint count above which kube-proxy drops per-endpoint comments (largeClusterEndpointsThreshold). */
export const LARGE_CLUSTER_ENDPOINTS = 1000;

/** The shared chains a service adds rules to, as `table/chain`. */
export const SHARED = ['nat/KUBE-SERVICES', 'nat/KUBE-NODEPORTS', 'filter/KUBE-SERVICES', 'filter/KUBE-EXTERNAL-SERVICES', 'filter/KUBE-NODEPORTS', 'filter/KUBE-PROXY-FIREWALL'] as const;
/** One of {@link SHARED}. */
export type SharedChain = (typeof SHARED)[number];

/** Everything one service port asks of one family's tables. */
export interface ServiceRules {
  /** Rules added to the shared chains, in order. */
  shared: Record<SharedChain, Rule[]>;
  /** Its own nat chains (KUBE-EXT, KUBE-FW, KUBE-SVC, KUBE-SVL, KUBE-SEP), each complete. */
  chains: ChainSpec[];
  /** iTP / eTP Local with no local endpoint (kubeproxy_sync_proxy_rules_no_local_endpoints_total). */
  noLocalEndpoints: { internal: boolean; external: boolean };
}

/** `1/n` as kube-proxy prints it (`%0.10f`). */
export function probability(n: number): string {
  return (1 / n).toFixed(10);
}

/** The loopback network of a family. */
const loopback = (f: Family): string => (f === 'ipv4' ? '127.0.0.0/8' : '::1/128');

/**
 * The rules of one service port in one family (pure); null when the service has no cluster IP of
 * that family. Chains are written only when used, exactly as kube-proxy's iptables mode does:
 * SVC for Cluster-policy endpoints, SVL for Local ones, EXT when externally reachable, FW with
 * loadBalancerSourceRanges, one SEP per reachable endpoint. A service without usable endpoints
 * gets REJECT (or DROP for a Local policy without local endpoints) rules in the filter table.
 */
export function serviceRules(svc: ServicePortInfo, endpoints: readonly EndpointInfo[], ctx: RulesContext): ServiceRules | null {
  const f = ctx.family;
  const clusterIP = svc.clusterIPs.find((ip) => familyOf(ip) === f);
  if (clusterIP === undefined) return null;
  const ofFamily = (ips: readonly string[]): string[] => ips.filter((ip) => familyOf(ip) === f);
  // The per-family proxier's view: only this family's addresses.
  const view: ServicePortInfo = { ...svc, externalIPs: ofFamily(svc.externalIPs), loadBalancerIPs: ofFamily(svc.loadBalancerIPs) };
  const eps = endpoints.filter((ep) => ep.family === f);
  const cat = categorizeEndpoints(eps, view, ctx.nodeName, ctx.zone);
  const names = serviceChains(svc.name);
  const name = portNameString(svc.name);
  const proto = svc.protocol;
  const l4 = ['-m', proto, '-p', proto];
  const ranges = svc.loadBalancerSourceRanges.filter((r) => parseCidr(r)?.family === f);

  const usesClusterChain = cat.clusterEndpoints.length > 0 && usesClusterEndpoints(view);
  const usesLocalChain = cat.localEndpoints.length > 0 && usesLocalEndpoints(view);
  const hasEndpoints = cat.hasAnyEndpoints;
  const internalChain = svc.internalPolicyLocal ? names.svl : names.svc;
  const hasInternal = hasEndpoints && !(svc.internalPolicyLocal && cat.localEndpoints.length === 0);
  const externalPolicyChain = view.externalPolicyLocal ? names.svl : names.svc;
  const hasExternal = hasEndpoints && !(view.externalPolicyLocal && cat.localEndpoints.length === 0);
  const usesExtChain = hasEndpoints && externallyAccessible(view);
  const usesFwChain = hasEndpoints && view.loadBalancerIPs.length > 0 && ranges.length > 0;
  const lbChain = usesFwChain ? names.fw : names.ext;

  const none = hasEndpoints ? 'DROP' : 'REJECT';
  const noneComment = hasEndpoints ? `${name} has no local endpoints` : `${name} has no endpoints`;

  const shared = Object.fromEntries(SHARED.map((c) => [c, [] as Rule[]])) as Record<SharedChain, Rule[]>;
  const add = (c: SharedChain, r: Rule): void => void shared[c].push(r);
  const chains = new Map<string, Rule[]>();
  const declare = (c: string): Rule[] => {
    let rules = chains.get(c);
    if (rules === undefined) chains.set(c, (rules = []));
    return rules;
  };
  const to = (ip: string, port: number) => [...l4, '-d', ip, '--dport', String(port)];

  if (hasInternal) add('nat/KUBE-SERVICES', [...comment(`${name} cluster IP`), ...to(clusterIP, svc.port), '-j', internalChain]);
  else add('filter/KUBE-SERVICES', [...comment(noneComment), ...to(clusterIP, svc.port), '-j', none]);

  for (const ip of view.externalIPs) {
    if (hasEndpoints) add('nat/KUBE-SERVICES', [...comment(`${name} external IP`), ...to(ip, svc.port), '-j', names.ext]);
    if (!hasExternal) add('filter/KUBE-EXTERNAL-SERVICES', [...comment(noneComment), ...to(ip, svc.port), '-j', none]);
  }
  for (const ip of view.loadBalancerIPs) {
    if (hasEndpoints) add('nat/KUBE-SERVICES', [...comment(`${name} loadbalancer IP`), ...to(ip, svc.port), '-j', lbChain]);
    if (usesFwChain) add('filter/KUBE-PROXY-FIREWALL', [...comment(`${name} traffic not accepted by ${names.fw}`), ...to(ip, svc.port), '-j', 'DROP']);
  }
  if (!hasExternal) for (const ip of view.loadBalancerIPs) add('filter/KUBE-EXTERNAL-SERVICES', [...comment(noneComment), ...to(ip, svc.port), '-j', none]);
  if (svc.nodePort !== null) {
    const port = ['--dport', String(svc.nodePort)];
    if (hasEndpoints) add('nat/KUBE-NODEPORTS', [...comment(name), ...l4, ...port, '-j', names.ext]);
    if (!hasExternal) add('filter/KUBE-EXTERNAL-SERVICES', [...comment(noneComment), '-m', 'addrtype', '--dst-type', 'LOCAL', ...l4, ...port, '-j', none]);
  }
  if (svc.healthCheckNodePort !== null) {
    add('filter/KUBE-NODEPORTS', [...comment(`${name} health check node port`), '-m', 'tcp', '-p', 'tcp', '--dport', String(svc.healthCheckNodePort), '-j', 'ACCEPT']);
  }

  // Chains are declared in kube-proxy's order: EXT, FW, SVC, SVL, SEPs; masquerade rules first.
  if (usesExtChain) declare(names.ext);
  if (usesFwChain) declare(names.fw);
  if (usesClusterChain) declare(names.svc);
  if (usesLocalChain) declare(names.svl);
  if (hasInternal) {
    const match = [...comment(`${name} cluster IP`), ...to(clusterIP, svc.port)];
    if (ctx.masqueradeAll) declare(internalChain).push([...match, '-j', CHAIN.MARK_MASQ]);
    // Off-cluster traffic to a cluster IP is masqueraded: it may bounce off-node.
    else if (ctx.clusterCIDR !== null) declare(internalChain).push([...match, '!', '-s', ctx.clusterCIDR, '-j', CHAIN.MARK_MASQ]);
  }
  if (usesExtChain) {
    const ext = declare(names.ext);
    if (!view.externalPolicyLocal) {
      ext.push([...comment(`masquerade traffic for ${name} external destinations`), '-j', CHAIN.MARK_MASQ]);
    } else {
      // Pods and the node itself reach external destinations with Cluster policy (short-circuit).
      if (ctx.clusterCIDR !== null) ext.push([...comment(`pod traffic for ${name} external destinations`), '-s', ctx.clusterCIDR, '-j', names.svc]);
      ext.push([...comment(`masquerade LOCAL traffic for ${name} external destinations`), '-m', 'addrtype', '--src-type', 'LOCAL', '-j', CHAIN.MARK_MASQ]);
      ext.push([...comment(`route LOCAL traffic for ${name} external destinations`), '-m', 'addrtype', '--src-type', 'LOCAL', '-j', names.svc]);
    }
    if (hasExternal) ext.push(['-j', externalPolicyChain]);
  }
  if (usesFwChain) {
    const fw = declare(names.fw);
    const c = comment(`${name} loadbalancer IP`);
    let allowFromNode = false;
    for (const r of ranges) {
      fw.push([...c, '-s', r, '-j', names.ext]);
      const cidr = parseCidr(r)!;
      if (ctx.nodeIPs.some((ip) => cidrContains(cidr, ip))) allowFromNode = true;
    }
    // A node reaching its own LB VIP may loop back with the VIP as source.
    if (allowFromNode) for (const ip of view.loadBalancerIPs) fw.push([...c, '-s', ip, '-j', names.ext]);
    fw.push(comment(`other traffic to ${name} will be dropped by KUBE-PROXY-FIREWALL`));
  }
  const epComment = (text: string): string[] => (ctx.largeCluster ? [] : comment(text));
  const sepNames = new Map<EndpointInfo, string>();
  const sepOf = (ep: EndpointInfo): string => {
    let n = sepNames.get(ep);
    if (n === undefined) sepNames.set(ep, (n = endpointChain(svc.name, ep)));
    return n;
  };
  const affinity = svc.sessionAffinitySeconds;
  const toEndpoints = (chain: string, list: readonly EndpointInfo[]): void => {
    const rules = declare(chain);
    if (affinity !== null) {
      for (const ep of list) {
        const sep = sepOf(ep);
        rules.push([...epComment(`${name} -> ${endpointString(ep)}`), '-m', 'recent', '--name', sep, '--rcheck', '--seconds', String(affinity), '--reap', '-j', sep]);
      }
    }
    list.forEach((ep, i) => {
      const random = i < list.length - 1 ? ['-m', 'statistic', '--mode', 'random', '--probability', probability(list.length - i)] : [];
      rules.push([...epComment(`${name} -> ${endpointString(ep)}`), ...random, '-j', sepOf(ep)]);
    });
  };
  if (usesClusterChain) toEndpoints(names.svc, cat.clusterEndpoints);
  if (usesLocalChain) toEndpoints(names.svl, cat.localEndpoints);
  for (const ep of cat.allReachable) {
    const sep = sepOf(ep);
    const rules = declare(sep);
    // Hairpin: an endpoint reaching itself through the service is masqueraded.
    rules.push([...epComment(name), '-s', ep.address, '-j', CHAIN.MARK_MASQ]);
    const recent = affinity !== null ? ['-m', 'recent', '--name', sep, '--set'] : [];
    rules.push([...epComment(name), ...recent, ...l4, '-j', 'DNAT', '--to-destination', endpointString(ep)]);
  }

  return {
    shared,
    chains: [...chains].map(([n, rules]) => ({ name: n, rules })),
    noLocalEndpoints: { internal: hasEndpoints && !hasInternal, external: hasEndpoints && !hasExternal },
  };
}

const jump = (chain: string, target: string, text: string, extra: string[] = []): JumpSpec => ({
  chain,
  rule: [...extra, ...comment(text), '-j', target],
  position: 'first',
});
const NEW = ['-m', 'conntrack', '--ctstate', 'NEW'];

/**
 * Jumps from the built-in chains, per table, in the order they end up in (kube-proxy prepends
 * each of iptablesJumpChains in turn, so the last one listed there comes first).
 */
export const JUMPS: Readonly<Record<'nat' | 'filter', readonly JumpSpec[]>> = {
  filter: [
    jump('INPUT', CHAIN.PROXY_FIREWALL, 'kubernetes load balancer firewall', NEW),
    jump('INPUT', CHAIN.NODEPORTS, 'kubernetes health check service ports'),
    jump('INPUT', CHAIN.EXTERNAL_SERVICES, 'kubernetes externally-visible service portals', NEW),
    jump('FORWARD', CHAIN.PROXY_FIREWALL, 'kubernetes load balancer firewall', NEW),
    jump('FORWARD', CHAIN.FORWARD, 'kubernetes forwarding rules'),
    jump('FORWARD', CHAIN.SERVICES, 'kubernetes service portals', NEW),
    jump('FORWARD', CHAIN.EXTERNAL_SERVICES, 'kubernetes externally-visible service portals', NEW),
    jump('OUTPUT', CHAIN.PROXY_FIREWALL, 'kubernetes load balancer firewall', NEW),
    jump('OUTPUT', CHAIN.SERVICES, 'kubernetes service portals', NEW),
  ],
  nat: [
    jump('PREROUTING', CHAIN.SERVICES, 'kubernetes service portals'),
    jump('OUTPUT', CHAIN.SERVICES, 'kubernetes service portals'),
    jump('POSTROUTING', CHAIN.POSTROUTING, 'kubernetes postrouting rules'),
  ],
};

/** The fixed chains per table, in the order they are declared. */
export const FIXED_CHAINS = {
  filter: [CHAIN.SERVICES, CHAIN.EXTERNAL_SERVICES, CHAIN.FORWARD, CHAIN.NODEPORTS, CHAIN.PROXY_FIREWALL],
  nat: [CHAIN.SERVICES, CHAIN.NODEPORTS, CHAIN.POSTROUTING, CHAIN.MARK_MASQ],
} as const;

/**
 * The fixed chains of one family, complete: each shared chain holds the rules of `services` (in
 * the order given) followed by the fixed ones (the NodePort catch-all last in nat KUBE-SERVICES).
 */
export function fixedChains(ctx: RulesContext, services: Iterable<ServiceRules>): Record<'nat' | 'filter', ChainSpec[]> {
  const shared = Object.fromEntries(SHARED.map((c) => [c, [] as Rule[]])) as Record<SharedChain, Rule[]>;
  for (const s of services) for (const c of SHARED) for (const r of s.shared[c]) shared[c].push(r);
  const mark = ctx.masqueradeMark;
  const nodePorts = comment('kubernetes service nodeports; NOTE: this must be the last rule in this chain');
  const natServices = shared['nat/KUBE-SERVICES'];
  if (ctx.nodePortAddresses === null) {
    natServices.push([...nodePorts, '-m', 'addrtype', '--dst-type', 'LOCAL', '!', '-d', loopback(ctx.family), '-j', CHAIN.NODEPORTS]);
  } else {
    for (const ip of ctx.nodePortAddresses) {
      if (familyOf(ip) === ctx.family && !isLoopback(ip)) natServices.push([...nodePorts, '-d', ip, '-j', CHAIN.NODEPORTS]);
    }
  }
  const forward: Rule[] = [];
  if (ctx.dropInvalid) forward.push(['-m', 'conntrack', '--ctstate', 'INVALID', '-j', 'DROP']);
  forward.push([...comment('kubernetes forwarding rules'), '-m', 'mark', '--mark', `${mark}/${mark}`, '-j', 'ACCEPT']);
  forward.push([...comment('kubernetes forwarding conntrack rule'), '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT']);
  return {
    filter: [
      { name: CHAIN.SERVICES, rules: shared['filter/KUBE-SERVICES'] },
      { name: CHAIN.EXTERNAL_SERVICES, rules: shared['filter/KUBE-EXTERNAL-SERVICES'] },
      { name: CHAIN.FORWARD, rules: forward },
      { name: CHAIN.NODEPORTS, rules: shared['filter/KUBE-NODEPORTS'] },
      { name: CHAIN.PROXY_FIREWALL, rules: shared['filter/KUBE-PROXY-FIREWALL'] },
    ],
    nat: [
      { name: CHAIN.SERVICES, rules: natServices },
      { name: CHAIN.NODEPORTS, rules: shared['nat/KUBE-NODEPORTS'] },
      {
        name: CHAIN.POSTROUTING,
        rules: [
          ['-m', 'mark', '!', '--mark', `${mark}/${mark}`, '-j', 'RETURN'],
          // Clear the mark: a packet re-traversing the stack is not masqueraded twice.
          ['-j', 'MARK', '--xor-mark', mark],
          [...comment('kubernetes service traffic requiring SNAT'), '-j', 'MASQUERADE', '--random-fully'],
        ],
      },
      { name: CHAIN.MARK_MASQ, rules: [['-j', 'MARK', '--or-mark', mark]] },
    ],
  };
}

/**
 * The complete desired state of one family's filter and nat tables (for a full sync through
 * the driver, which also deletes every owned chain not listed): the fixed chains, then each
 * service's own chains, and the jumps from the built-in chains.
 */
export function iptablesModeSpecs(ctx: RulesContext, services: readonly ServiceRules[]): TableSpec[] {
  const fixed = fixedChains(ctx, services);
  return [
    { table: 'filter', chains: fixed.filter, jumps: JUMPS.filter },
    { table: 'nat', chains: [...fixed.nat, ...services.flatMap((s) => s.chains)], jumps: JUMPS.nat },
  ];
}
