// The ipsets of kube-proxy's IPVS mode (pkg/proxy/ipvs/ipset.go), for both families: IPv6 sets
// are named with the prefix KUBE-6- and cut to 31 characters, exactly as kube-proxy names them.
import type { Family } from '../../model/ip.js';
import type { IpsetSetSpec, SetType } from '../../kernel/ipset/types.js';
import type { OwnedSet } from './types.js';

/** kube-proxy's base (IPv4) set names. */
export const SET = {
  LOOP_BACK: 'KUBE-LOOP-BACK',
  CLUSTER_IP: 'KUBE-CLUSTER-IP',
  EXTERNAL_IP: 'KUBE-EXTERNAL-IP',
  EXTERNAL_IP_LOCAL: 'KUBE-EXTERNAL-IP-LOCAL',
  LOAD_BALANCER: 'KUBE-LOAD-BALANCER',
  LOAD_BALANCER_LOCAL: 'KUBE-LOAD-BALANCER-LOCAL',
  LOAD_BALANCER_FW: 'KUBE-LOAD-BALANCER-FW',
  LOAD_BALANCER_SOURCE_IP: 'KUBE-LOAD-BALANCER-SOURCE-IP',
  LOAD_BALANCER_SOURCE_CIDR: 'KUBE-LOAD-BALANCER-SOURCE-CIDR',
  NODE_PORT_TCP: 'KUBE-NODE-PORT-TCP',
  NODE_PORT_LOCAL_TCP: 'KUBE-NODE-PORT-LOCAL-TCP',
  NODE_PORT_UDP: 'KUBE-NODE-PORT-UDP',
  NODE_PORT_LOCAL_UDP: 'KUBE-NODE-PORT-LOCAL-UDP',
  NODE_PORT_SCTP: 'KUBE-NODE-PORT-SCTP-HASH',
  NODE_PORT_LOCAL_SCTP: 'KUBE-NODE-PORT-LOCAL-SCTP-HASH',
  HEALTH_CHECK_NODE_PORT: 'KUBE-HEALTH-CHECK-NODE-PORT',
  IPVS_IPS: 'KUBE-IPVS-IPS',
} as const;

/** A base set name. */
export type SetName = (typeof SET)[keyof typeof SET];

/** Type and comment of each set, in kube-proxy's order (ipsetInfo in proxier.go). */
const SET_INFO: ReadonlyArray<readonly [SetName, SetType, string]> = [
  [SET.LOOP_BACK, 'hash:ip,port,ip', 'Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose'],
  [SET.CLUSTER_IP, 'hash:ip,port', 'Kubernetes service cluster ip + port for masquerade purpose'],
  [SET.EXTERNAL_IP, 'hash:ip,port', 'Kubernetes service external ip + port for masquerade and filter purpose'],
  [SET.EXTERNAL_IP_LOCAL, 'hash:ip,port', 'Kubernetes service external ip + port with externalTrafficPolicy=local'],
  [SET.LOAD_BALANCER, 'hash:ip,port', 'Kubernetes service lb portal'],
  [SET.LOAD_BALANCER_FW, 'hash:ip,port', 'Kubernetes service load balancer ip + port for load balancer with sourceRange'],
  [SET.LOAD_BALANCER_LOCAL, 'hash:ip,port', 'Kubernetes service load balancer ip + port with externalTrafficPolicy=local'],
  [SET.LOAD_BALANCER_SOURCE_IP, 'hash:ip,port,ip', 'Kubernetes service load balancer ip + port + source IP for packet filter purpose'],
  [SET.LOAD_BALANCER_SOURCE_CIDR, 'hash:ip,port,net', 'Kubernetes service load balancer ip + port + source cidr for packet filter purpose'],
  [SET.NODE_PORT_TCP, 'bitmap:port', 'Kubernetes nodeport TCP port for masquerade purpose'],
  [SET.NODE_PORT_LOCAL_TCP, 'bitmap:port', 'Kubernetes nodeport TCP port with externalTrafficPolicy=local'],
  [SET.NODE_PORT_UDP, 'bitmap:port', 'Kubernetes nodeport UDP port for masquerade purpose'],
  [SET.NODE_PORT_LOCAL_UDP, 'bitmap:port', 'Kubernetes nodeport UDP port with externalTrafficPolicy=local'],
  [SET.NODE_PORT_SCTP, 'hash:ip,port', "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"],
  [SET.NODE_PORT_LOCAL_SCTP, 'hash:ip,port', "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"],
  [SET.HEALTH_CHECK_NODE_PORT, 'bitmap:port', 'Kubernetes health check node port'],
  [SET.IPVS_IPS, 'hash:ip', 'Addresses on the ipvs interface'],
];

/** ipset's longest set name (IPSET_MAXNAMELEN 32 with the NUL). */
const MAX_SET_NAME = 31;

/** The name of a base set in `family`: `KUBE-6-…` (cut to 31 characters) for IPv6, as kube-proxy. */
export function setName(base: SetName, family: Family): string {
  return family === 'ipv4' ? base : base.replace('KUBE-', 'KUBE-6-').slice(0, MAX_SET_NAME);
}

/** kube-proxy's maxelem of every hash set: the smallest one this proxy creates a set with. */
export const MIN_MAXELEM = 65536;

function spec(base: SetName, type: SetType, family: Family): IpsetSetSpec {
  const name = setName(base, family);
  if (type === 'bitmap:port') return { name, type, range: { from: 0, to: 65535 } };
  return { name, type, family: family === 'ipv4' ? 'inet' : 'inet6', hashSize: 1024, maxElem: MIN_MAXELEM };
}

/** The maxelem for a set of `n` entries: a power of two at least 2n, and at least MIN_MAXELEM. */
export function maxElemFor(n: number): number {
  let m = MIN_MAXELEM;
  while (m < 2 * n) m *= 2;
  return m;
}

/**
 * True when a set of capacity `maxElem` is to be replaced by a larger one before it holds `n`
 * entries: past three quarters full, so that growth happens ahead of need (a full hash refuses
 * every further entry) and, doubling at least, seldom.
 */
export function mustGrow(n: number, maxElem: number): boolean {
  return n > maxElem * 0.75;
}

/** `spec` sized for `n` entries: itself when its maxelem suffices (a bitmap:port set holds every port). */
export function sizedSpec(spec: IpsetSetSpec, n: number): IpsetSetSpec {
  const maxElem = maxElemFor(n);
  return spec.type === 'bitmap:port' || maxElem <= (spec.maxElem ?? MIN_MAXELEM) ? spec : { ...spec, maxElem };
}

/** What a set can hold as listed (maxelem of a hash set, the range of a bitmap:port set); null when unknown. */
export function capacityOf(info: { maxElem: number | null; range: { from: number; to: number } | null }): number | null {
  return info.maxElem ?? (info.range ? info.range.to - info.range.from + 1 : null);
}

/** Prefix of the set a growing set is built in before the swap (never one of kube-proxy's names). */
export const GROW_PREFIX = 'KUBE-GROW-';

/** The temporary name a larger copy of owned set `name` is filled under, then swapped in. */
export function growName(name: string): string {
  return `${GROW_PREFIX}${OWNED_SETS.findIndex((s) => s.spec.name === name)}`;
}

/** Every set the IPVS proxier owns, IPv4 then IPv6, with kube-proxy's types, sizes and comments. */
export const OWNED_SETS: readonly OwnedSet[] = (['ipv4', 'ipv6'] as const).flatMap((family) =>
  SET_INFO.map(([base, type, comment]) => ({ spec: spec(base, type, family), comment })),
);

const BY_FAMILY: Readonly<Record<Family, readonly OwnedSet[]>> = {
  ipv4: OWNED_SETS.slice(0, SET_INFO.length),
  ipv6: OWNED_SETS.slice(SET_INFO.length),
};

/** The owned sets of one family (bitmap:port sets exist once per family too, as in kube-proxy). */
export function setsForFamily(family: Family): readonly OwnedSet[] {
  return BY_FAMILY[family];
}

const BY_NAME: ReadonlyMap<string, OwnedSet> = new Map(OWNED_SETS.map((s) => [s.spec.name, s]));

/** The owned set named `name` (a family-specific name), if any. */
export function ownedSet(name: string): OwnedSet | undefined {
  return BY_NAME.get(name);
}

/** The comment kube-proxy gives a base set (used in iptables rules that match it). */
export function setComment(base: SetName): string {
  return SET_INFO.find(([b]) => b === base)![2];
}
