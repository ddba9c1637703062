// The iptables rules of kube-proxy's IPVS mode (writeIptablesRules in pkg/proxy/ipvs/proxier.go),
// per family, as owned chains plus jumps from the built-in chains, and ours in mangle (the
// source ranges for node-originated traffic, MANGLE_JUMPS). A rule matching a set is left out
// while that set is empty, as kube-proxy does.
import { comment, type ChainSpec, type JumpSpec, type Rule, type TableSpec } from '../../kernel/iptables.js';
import type { Family } from '../../model/ip.js';
import { formatCidr, parseCidr } from './desired-net.js';
import { SET, setComment, setName, type SetName } from './ipsets.js';
import type { DesiredContext, InternalRedirect } from './types.js';

/** Owned chains, by table, in kube-proxy's order. */
export const CHAINS = {
  nat: ['KUBE-SERVICES', 'KUBE-POSTROUTING', 'KUBE-NODE-PORT', 'KUBE-LOAD-BALANCER', 'KUBE-MARK-MASQ'],
  filter: [
    'KUBE-FORWARD',
    'KUBE-NODE-PORT',
    'KUBE-PROXY-FIREWALL',
    'KUBE-SOURCE-RANGES-FIREWALL',
    'KUBE-IPVS-FILTER',
    'KUBE-IPVS-OUT-FILTER',
  ],
  mangle: ['KUBE-PROXY-FIREWALL', 'KUBE-SOURCE-RANGES-FIREWALL'],
} as const;

const jump = (chain: string, target: string, text: string): JumpSpec => ({
  chain,
  rule: [...comment(text), '-j', target],
  position: 'first',
});

/** Jumps from built-in chains, in the order they end up in (kube-proxy prepends each one). */
const NAT_JUMPS: readonly JumpSpec[] = [
  jump('OUTPUT', 'KUBE-SERVICES', 'kubernetes service portals'),
  jump('PREROUTING', 'KUBE-SERVICES', 'kubernetes service portals'),
  jump('POSTROUTING', 'KUBE-POSTROUTING', 'kubernetes postrouting rules'),
];
const FILTER_JUMPS: readonly JumpSpec[] = [
  jump('FORWARD', 'KUBE-PROXY-FIREWALL', 'kube-proxy firewall rules'),
  jump('FORWARD', 'KUBE-FORWARD', 'kubernetes forwarding rules'),
  jump('INPUT', 'KUBE-IPVS-FILTER', 'kubernetes ipvs access filter'),
  jump('INPUT', 'KUBE-PROXY-FIREWALL', 'kube-proxy firewall rules'),
  jump('INPUT', 'KUBE-NODE-PORT', 'kubernetes health check rules'),
  jump('OUTPUT', 'KUBE-IPVS-OUT-FILTER', 'kubernetes ipvs access filter'),
];
/**
 * Load-balancer source ranges for the node's own connections (and hostNetwork Pods'): IPVS takes
 * them in OUTPUT before the filter table (at NF_IP_PRI_NAT_DST + 2), which then sees the real
 * server as the destination; mangle OUTPUT still sees the load-balancer address (kubernetes#119656).
 */
const MANGLE_JUMPS: readonly JumpSpec[] = [jump('OUTPUT', 'KUBE-PROXY-FIREWALL', 'kube-proxy firewall rules for node-originated traffic')];

/** `0x4000` for bit 14: the masquerade mark. */
export function masqueradeMark(bit: number): string {
  return `0x${(2 ** bit).toString(16)}`;
}

/** Sets matched by a rule that jumps, in kube-proxy's order (ipsetWithIptablesChain). */
const SET_JUMPS: ReadonlyArray<{ set: SetName; table: 'nat' | 'filter'; from: string; to: string; match: string; proto?: string }> = [
  { set: SET.LOOP_BACK, table: 'nat', from: 'KUBE-POSTROUTING', to: 'MASQUERADE', match: 'dst,dst,src' },
  { set: SET.LOAD_BALANCER, table: 'nat', from: 'KUBE-SERVICES', to: 'KUBE-LOAD-BALANCER', match: 'dst,dst' },
  { set: SET.LOAD_BALANCER_LOCAL, table: 'nat', from: 'KUBE-LOAD-BALANCER', to: 'RETURN', match: 'dst,dst' },
  { set: SET.NODE_PORT_LOCAL_TCP, table: 'nat', from: 'KUBE-NODE-PORT', to: 'RETURN', match: 'dst', proto: 'tcp' },
  { set: SET.NODE_PORT_TCP, table: 'nat', from: 'KUBE-NODE-PORT', to: 'KUBE-MARK-MASQ', match: 'dst', proto: 'tcp' },
  { set: SET.NODE_PORT_LOCAL_UDP, table: 'nat', from: 'KUBE-NODE-PORT', to: 'RETURN', match: 'dst', proto: 'udp' },
  { set: SET.NODE_PORT_UDP, table: 'nat', from: 'KUBE-NODE-PORT', to: 'KUBE-MARK-MASQ', match: 'dst', proto: 'udp' },
  { set: SET.NODE_PORT_LOCAL_SCTP, table: 'nat', from: 'KUBE-NODE-PORT', to: 'RETURN', match: 'dst,dst', proto: 'sctp' },
  { set: SET.NODE_PORT_SCTP, table: 'nat', from: 'KUBE-NODE-PORT', to: 'KUBE-MARK-MASQ', match: 'dst,dst', proto: 'sctp' },
  { set: SET.LOAD_BALANCER_FW, table: 'filter', from: 'KUBE-PROXY-FIREWALL', to: 'KUBE-SOURCE-RANGES-FIREWALL', match: 'dst,dst' },
  { set: SET.LOAD_BALANCER_SOURCE_CIDR, table: 'filter', from: 'KUBE-SOURCE-RANGES-FIREWALL', to: 'RETURN', match: 'dst,dst,src' },
  { set: SET.LOAD_BALANCER_SOURCE_IP, table: 'filter', from: 'KUBE-SOURCE-RANGES-FIREWALL', to: 'RETURN', match: 'dst,dst,src' },
];

/**
 * The load-balancer entries (`ip,proto:port`) the node itself must not reach (kube-proxy's
 * lbNoNodeAccess): those with source ranges (KUBE-LOAD-BALANCER-FW) but no KUBE-LOAD-BALANCER-SOURCE-IP
 * entry, i.e. no source range holds a node address. Pass the entries of one family.
 */
export function lbNoNodeAccess(fwEntries: Iterable<string>, sourceIpEntries: Iterable<string>): string[] {
  const allowed = new Set(sourceIpEntries);
  return [...fwEntries].filter((e) => !allowed.has(`${e},${e.slice(0, e.indexOf(','))}`)).sort();
}

/** `-s IP -m ipvs --vaddr IP --vproto P --vport N -j DROP` for one `ip,proto:port` entry. */
function outFilterRule(entry: string): Rule {
  const [ip = '', protoPort = ''] = entry.split(',');
  const [proto = '', port = ''] = protoPort.split(':');
  return ['-s', ip, '-m', 'ipvs', '--vaddr', ip, '--vproto', proto, '--vport', port, '-j', 'DROP'];
}

/** `ip:port`, `[ip6]:port`: a DNAT target. */
const hostPort = (ip: string, port: number): string => (ip.includes(':') ? `[${ip}]:${port}` : `${ip}:${port}`);

/**
 * Internal clients of an externalTrafficPolicy: Local external or load-balancer IP port, DNATed to
 * the cluster IP (whose virtual server has every endpoint, by the internal policy), as kube-proxy's
 * iptables mode short-circuits them (kubernetes#93456, #115931); external clients keep the local
 * endpoints and their source address. The node (and hostNetwork Pods) is masqueraded, as there:
 * its source would be the VIP itself. Pods come from `cidr`; behind source ranges only Pods inside
 * them are redirected (the others meet the filter's range check; the node's is in mangle OUTPUT).
 */
function redirectRules(r: InternalRedirect, cidr: string | null, sourceCidrSet: string): Rule[] {
  const to = ['-j', 'DNAT', '--to-destination', hostPort(r.clusterIP, r.port)];
  const vip = ['-d', r.address, '-p', r.protocol, ...comment(`${r.service} internal traffic to an externalTrafficPolicy=Local IP`), '-m', r.protocol, '--dport', String(r.port)];
  const node = [...vip, '-m', 'addrtype', '--src-type', 'LOCAL'];
  const out: Rule[] = [
    [...node, '-j', 'KUBE-MARK-MASQ'],
    [...node, ...to],
  ];
  if (cidr !== null) out.push(['-s', cidr, ...vip, ...(r.sourceRanges ? ['-m', 'set', '--match-set', sourceCidrSet, 'dst,dst,src'] : []), ...to]);
  return out;
}

/**
 * kube-proxy IPVS mode's nat and filter rules for one family. `nonEmptySets` holds the
 * (family-specific) names of the owned sets that have entries; `noNodeAccess` the
 * {@link lbNoNodeAccess} entries of this family, dropped when the node itself sends to them;
 * `redirects` this family's internal-traffic redirects (redirectRules).
 */
export function ipvsModeRules(
  ctx: DesiredContext,
  family: Family,
  nonEmptySets: ReadonlySet<string>,
  noNodeAccess: readonly string[] = [],
  redirects: readonly InternalRedirect[] = [],
): TableSpec[] {
  const natRules: Record<string, Rule[]> = Object.fromEntries(CHAINS.nat.map((c) => [c, [] as Rule[]]));
  const filterRules: Record<string, Rule[]> = Object.fromEntries(CHAINS.filter.map((c) => [c, [] as Rule[]]));
  const mangleRules: Record<string, Rule[]> = Object.fromEntries(CHAINS.mangle.map((c) => [c, [] as Rule[]]));
  const nat = (c: string, r: Rule): void => void natRules[c]!.push(r);
  const filter = (c: string, r: Rule): void => void filterRules[c]!.push(r);
  const name = (s: SetName): string => setName(s, family);
  const has = (s: SetName): boolean => nonEmptySets.has(name(s));
  const match = (s: SetName, m: string): string[] => ['-m', 'set', '--match-set', name(s), m];
  const commented = (s: SetName, m: string): string[] => [...comment(setComment(s)), ...match(s, m)];
  const mark = masqueradeMark(ctx.config.masqueradeBit);

  nat('KUBE-SERVICES', ['-s', family === 'ipv4' ? '127.0.0.0/8' : '::1/128', '-j', 'RETURN']);
  const podCidr = ctx.config.clusterCIDRs.map(parseCidr).find((c) => c !== null && c.family === family) ?? null;
  for (const r of redirects) for (const rule of redirectRules(r, podCidr && formatCidr(podCidr), name(SET.LOAD_BALANCER_SOURCE_CIDR))) nat('KUBE-SERVICES', rule);
  for (const j of SET_JUMPS) {
    if (!has(j.set)) continue;
    const rule = [...(j.proto ? ['-p', j.proto] : []), ...commented(j.set, j.match), '-j', j.to];
    if (j.table === 'nat') nat(j.from, rule);
    else filter(j.from, rule);
    // The same source-range checks for node-originated packets (MANGLE_JUMPS).
    if (j.table === 'filter') mangleRules[j.from]!.push(rule);
  }

  if (has(SET.CLUSTER_IP)) {
    const cidr = ctx.config.clusterCIDRs.map(parseCidr).find((c) => c !== null && c.family === family);
    if (ctx.config.masqueradeAll) nat('KUBE-SERVICES', [...commented(SET.CLUSTER_IP, 'dst,dst'), '-j', 'KUBE-MARK-MASQ']);
    // Off-cluster traffic to a cluster IP is masqueraded (it may bounce off-node).
    else if (cidr) nat('KUBE-SERVICES', ['!', '-s', formatCidr(cidr), ...commented(SET.CLUSTER_IP, 'dst,dst'), '-j', 'KUBE-MARK-MASQ']);
    // Without a cluster CIDR: node-originated traffic whose source is a VIP (picked from kube-ipvs0).
    else nat('KUBE-SERVICES', [...commented(SET.CLUSTER_IP, 'src,dst'), '-j', 'KUBE-MARK-MASQ']);
  }
  const externalAccept = (s: SetName): void => {
    nat('KUBE-SERVICES', [...commented(s, 'dst,dst'), '-m', 'physdev', '!', '--physdev-is-in', '-m', 'addrtype', '!', '--src-type', 'LOCAL', '-j', 'ACCEPT']);
    nat('KUBE-SERVICES', [...commented(s, 'dst,dst'), '-m', 'addrtype', '--dst-type', 'LOCAL', '-j', 'ACCEPT']);
  };
  if (has(SET.EXTERNAL_IP)) {
    nat('KUBE-SERVICES', [...commented(SET.EXTERNAL_IP, 'dst,dst'), '-j', 'KUBE-MARK-MASQ']);
    externalAccept(SET.EXTERNAL_IP);
  }
  if (has(SET.EXTERNAL_IP_LOCAL)) externalAccept(SET.EXTERNAL_IP_LOCAL);
  nat('KUBE-SERVICES', ['-m', 'addrtype', '--dst-type', 'LOCAL', '-j', 'KUBE-NODE-PORT']);
  nat('KUBE-LOAD-BALANCER', ['-j', 'KUBE-MARK-MASQ']);
  filter('KUBE-SOURCE-RANGES-FIREWALL', ['-j', 'DROP']);
  mangleRules['KUBE-SOURCE-RANGES-FIREWALL']!.push(['-j', 'DROP']);
  for (const e of noNodeAccess) filter('KUBE-IPVS-OUT-FILTER', outFilterRule(e));
  // Accept traffic to IPVS VIPs in case later rules would drop it; last in KUBE-SERVICES.
  for (const s of [SET.CLUSTER_IP, SET.LOAD_BALANCER] as const) {
    if (has(s)) nat('KUBE-SERVICES', [...match(s, 'dst,dst'), '-j', 'ACCEPT']);
  }

  filter('KUBE-FORWARD', [...comment('kubernetes forwarding rules'), '-m', 'mark', '--mark', `${mark}/${mark}`, '-j', 'ACCEPT']);
  filter('KUBE-FORWARD', [...comment('kubernetes forwarding conntrack rule'), '-m', 'conntrack', '--ctstate', 'RELATED,ESTABLISHED', '-j', 'ACCEPT']);
  filter('KUBE-NODE-PORT', [...commented(SET.HEALTH_CHECK_NODE_PORT, 'dst'), '-j', 'ACCEPT']);
  // Refuse new connections to any other port of a VIP (kubernetes#72236).
  for (const s of [SET.LOAD_BALANCER, SET.CLUSTER_IP, SET.EXTERNAL_IP, SET.EXTERNAL_IP_LOCAL] as const) {
    filter('KUBE-IPVS-FILTER', [...match(s, 'dst,dst'), '-j', 'RETURN']);
  }
  filter('KUBE-IPVS-FILTER', [...match(SET.HEALTH_CHECK_NODE_PORT, 'dst'), '-j', 'RETURN']);
  filter('KUBE-IPVS-FILTER', ['-m', 'conntrack', '--ctstate', 'NEW', ...match(SET.IPVS_IPS, 'dst'), '-j', 'REJECT']);

  nat('KUBE-POSTROUTING', ['-m', 'mark', '!', '--mark', `${mark}/${mark}`, '-j', 'RETURN']);
  nat('KUBE-POSTROUTING', ['-j', 'MARK', '--xor-mark', mark]);
  nat('KUBE-POSTROUTING', [...comment('kubernetes service traffic requiring SNAT'), '-j', 'MASQUERADE', '--random-fully']);
  nat('KUBE-MARK-MASQ', ['-j', 'MARK', '--or-mark', mark]);

  const spec = (names: readonly string[], rules: Record<string, Rule[]>): ChainSpec[] => names.map((n) => ({ name: n, rules: rules[n]! }));
  return [
    { table: 'nat', chains: spec(CHAINS.nat, natRules), jumps: NAT_JUMPS },
    { table: 'filter', chains: spec(CHAINS.filter, filterRules), jumps: FILTER_JUMPS },
    { table: 'mangle', chains: spec(CHAINS.mangle, mangleRules), jumps: MANGLE_JUMPS },
  ];
}
