import { describe, expect, it } from 'vitest';

import { ConfigSchema, type ConfigInput } from '../../src/config.js';
import { defaultIsOwned, planRestore, renderCommand, type TableSpec } from '../../src/kernel/iptables.js';
import type { Family } from '../../src/model/ip.js';
import { OWNED_SETS, setsForFamily } from '../../src/proxy/ipvs/ipsets.js';
import { CHAINS, ipvsModeRules, lbNoNodeAccess, masqueradeMark } from '../../src/proxy/ipvs/rules.js';
import type { DesiredContext, InternalRedirect } from '../../src/proxy/ipvs/types.js';

const ctx = (config: ConfigInput = {}): DesiredContext => ({ config: ConfigSchema.parse(config), nodeName: 'n', nodePortAddresses: [] });
const ALL = new Set(OWNED_SETS.map((s) => s.spec.name));
const NONE = new Set<string>();

/** The iptables-restore input the driver renders on a table that has none of our chains. */
function restoreText(specs: TableSpec[]): string {
  return specs.map((s) => planRestore(s, undefined, { isOwned: defaultIsOwned }).text).join('');
}
/** `-A CHAIN …` lines of one table. */
function lines(specs: TableSpec[], table: string): string[] {
  return specs.find((s) => s.table === table)!.chains.flatMap((c) => c.rules.map((r) => renderCommand('-A', c.name, r)));
}
const C = {
  lb: '-m comment --comment "Kubernetes service lb portal"',
  cluster: '-m comment --comment "Kubernetes service cluster ip + port for masquerade purpose"',
  ext: '-m comment --comment "Kubernetes service external ip + port for masquerade and filter purpose"',
  extLocal: '-m comment --comment "Kubernetes service external ip + port with externalTrafficPolicy=local"',
};

describe('ipvsModeRules: golden output', () => {
  it('default config, every set in use (IPv4)', () => {
    expect(restoreText(ipvsModeRules(ctx(), 'ipv4', ALL, ['198.51.100.1,tcp:80']))).toBe(`*nat
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-LOAD-BALANCER - [0:0]
:KUBE-MARK-MASQ - [0:0]
-I POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN
-A KUBE-SERVICES ${C.lb} -m set --match-set KUBE-LOAD-BALANCER dst,dst -j KUBE-LOAD-BALANCER
-A KUBE-SERVICES ${C.cluster} -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES ${C.ext} -m set --match-set KUBE-EXTERNAL-IP dst,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES ${C.ext} -m set --match-set KUBE-EXTERNAL-IP dst,dst -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT
-A KUBE-SERVICES ${C.ext} -m set --match-set KUBE-EXTERNAL-IP dst,dst -m addrtype --dst-type LOCAL -j ACCEPT
-A KUBE-SERVICES ${C.extLocal} -m set --match-set KUBE-EXTERNAL-IP-LOCAL dst,dst -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT
-A KUBE-SERVICES ${C.extLocal} -m set --match-set KUBE-EXTERNAL-IP-LOCAL dst,dst -m addrtype --dst-type LOCAL -j ACCEPT
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-SERVICES -m set --match-set KUBE-LOAD-BALANCER dst,dst -j ACCEPT
-A KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-TCP dst -j RETURN
-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ
-A KUBE-NODE-PORT -p udp -m comment --comment "Kubernetes nodeport UDP port with externalTrafficPolicy=local" -m set --match-set KUBE-NODE-PORT-LOCAL-UDP dst -j RETURN
-A KUBE-NODE-PORT -p udp -m comment --comment "Kubernetes nodeport UDP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-UDP dst -j KUBE-MARK-MASQ
-A KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'" -m set --match-set KUBE-NODE-PORT-LOCAL-SCTP-HASH dst,dst -j RETURN
-A KUBE-NODE-PORT -p sctp -m comment --comment "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'" -m set --match-set KUBE-NODE-PORT-SCTP-HASH dst,dst -j KUBE-MARK-MASQ
-A KUBE-LOAD-BALANCER -m comment --comment "Kubernetes service load balancer ip + port with externalTrafficPolicy=local" -m set --match-set KUBE-LOAD-BALANCER-LOCAL dst,dst -j RETURN
-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
COMMIT
*filter
:KUBE-FORWARD - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
-I OUTPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-OUT-FILTER
-I INPUT -m comment --comment "kubernetes health check rules" -j KUBE-NODE-PORT
-I INPUT -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-I INPUT -m comment --comment "kubernetes ipvs access filter" -j KUBE-IPVS-FILTER
-I FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-I FORWARD -m comment --comment "kube-proxy firewall rules" -j KUBE-PROXY-FIREWALL
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-NODE-PORT -m comment --comment "Kubernetes health check node port" -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j ACCEPT
-A KUBE-PROXY-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port for load balancer with sourceRange" -m set --match-set KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL
-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port + source cidr for packet filter purpose" -m set --match-set KUBE-LOAD-BALANCER-SOURCE-CIDR dst,dst,src -j RETURN
-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port + source IP for packet filter purpose" -m set --match-set KUBE-LOAD-BALANCER-SOURCE-IP dst,dst,src -j RETURN
-A KUBE-SOURCE-RANGES-FIREWALL -j DROP
-A KUBE-IPVS-FILTER -m set --match-set KUBE-LOAD-BALANCER dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-EXTERNAL-IP-LOCAL dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT
-A KUBE-IPVS-OUT-FILTER -s 198.51.100.1 -m ipvs --vaddr 198.51.100.1 --vproto tcp --vport 80 -j DROP
COMMIT
*mangle
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SOURCE-RANGES-FIREWALL - [0:0]
-I OUTPUT -m comment --comment "kube-proxy firewall rules for node-originated traffic" -j KUBE-PROXY-FIREWALL
-A KUBE-PROXY-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port for load balancer with sourceRange" -m set --match-set KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL
-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port + source cidr for packet filter purpose" -m set --match-set KUBE-LOAD-BALANCER-SOURCE-CIDR dst,dst,src -j RETURN
-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port + source IP for packet filter purpose" -m set --match-set KUBE-LOAD-BALANCER-SOURCE-IP dst,dst,src -j RETURN
-A KUBE-SOURCE-RANGES-FIREWALL -j DROP
COMMIT
`);
  });

  it('default config, no set in use: only the unconditional rules', () => {
    const specs = ipvsModeRules(ctx(), 'ipv4', NONE);
    expect(lines(specs, 'nat')).toEqual([
      '-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN',
      '-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT',
      '-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN',
      '-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000',
      '-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully',
      '-A KUBE-LOAD-BALANCER -j KUBE-MARK-MASQ',
      '-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000',
    ]);
    expect(lines(specs, 'filter').filter((l) => !l.startsWith('-A KUBE-IPVS-FILTER'))).toEqual([
      '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT',
      '-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT',
      '-A KUBE-NODE-PORT -m comment --comment "Kubernetes health check node port" -m set --match-set KUBE-HEALTH-CHECK-NODE-PORT dst -j ACCEPT',
      '-A KUBE-SOURCE-RANGES-FIREWALL -j DROP',
    ]);
    expect(lines(specs, 'filter').filter((l) => l.startsWith('-A KUBE-IPVS-FILTER'))).toHaveLength(6);
    expect(lines(specs, 'mangle')).toEqual(['-A KUBE-SOURCE-RANGES-FIREWALL -j DROP']);
  });
});

describe('ipvsModeRules: masquerading of cluster IP traffic', () => {
  const clusterRule = (config: ConfigInput, family: Family = 'ipv4'): string[] =>
    lines(ipvsModeRules(ctx(config), family, ALL), 'nat').filter((l) => l.includes('cluster ip + port'));

  it.each([
    ['default: VIP-sourced node traffic (src,dst)', {}, 'ipv4', `-A KUBE-SERVICES ${C.cluster} -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ`],
    ['--masquerade-all: everything', { masqueradeAll: true, clusterCIDRs: ['10.244.0.0/16'] }, 'ipv4', `-A KUBE-SERVICES ${C.cluster} -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ`],
    ['--cluster-cidr: off-cluster sources', { clusterCIDRs: ['10.244.0.0/16', 'fd00:244::/56'] }, 'ipv4', `-A KUBE-SERVICES ! -s 10.244.0.0/16 ${C.cluster} -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ`],
    ['--cluster-cidr, IPv6 picks its own family', { clusterCIDRs: ['10.244.0.0/16', 'fd00:244::/56'] }, 'ipv6', `-A KUBE-SERVICES ! -s fd00:244::/56 ${C.cluster} -m set --match-set KUBE-6-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ`],
    ['--cluster-cidr of the other family only: as default', { clusterCIDRs: ['10.244.0.0/16'] }, 'ipv6', `-A KUBE-SERVICES ${C.cluster} -m set --match-set KUBE-6-CLUSTER-IP src,dst -j KUBE-MARK-MASQ`],
    ['--cluster-cidr with host bits: normalised', { clusterCIDRs: ['10.244.1.7/16'] }, 'ipv4', `-A KUBE-SERVICES ! -s 10.244.0.0/16 ${C.cluster} -m set --match-set KUBE-CLUSTER-IP dst,dst -j KUBE-MARK-MASQ`],
  ] as Array<[string, ConfigInput, Family, string]>)('%s', (_n, config, family, want) => {
    expect(clusterRule(config, family)).toEqual([want]);
  });

  it.each([
    [14, '0x4000'],
    [0, '0x1'],
    [31, '0x80000000'],
  ])('--masquerade-bit %i marks %s', (bit, mark) => {
    expect(masqueradeMark(bit)).toBe(mark);
    const nat = lines(ipvsModeRules(ctx({ masqueradeBit: bit }), 'ipv4', NONE), 'nat');
    expect(nat).toContain(`-A KUBE-MARK-MASQ -j MARK --or-mark ${mark}`);
    expect(nat).toContain(`-A KUBE-POSTROUTING -m mark ! --mark ${mark}/${mark} -j RETURN`);
  });
});

describe('ipvsModeRules: sets and families', () => {
  it('a set rule appears only while its set has entries', () => {
    const some = new Set(['KUBE-CLUSTER-IP', 'KUBE-NODE-PORT-TCP', 'KUBE-6-LOAD-BALANCER']);
    const nat = lines(ipvsModeRules(ctx(), 'ipv4', some), 'nat').filter((l) => l.includes('--match-set'));
    expect(nat).toEqual([
      `-A KUBE-SERVICES ${C.cluster} -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ`,
      '-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT',
      '-A KUBE-NODE-PORT -p tcp -m comment --comment "Kubernetes nodeport TCP port for masquerade purpose" -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ',
    ]);
  });

  it('IPv6: ::1 instead of 127/8, KUBE-6- sets only, the same chains and jumps', () => {
    const v6 = ipvsModeRules(ctx(), 'ipv6', ALL);
    const v4 = ipvsModeRules(ctx(), 'ipv4', ALL);
    const all = [...lines(v6, 'nat'), ...lines(v6, 'filter')];
    expect(all[0]).toBe('-A KUBE-SERVICES -s ::1/128 -j RETURN');
    const used = new Set(all.flatMap((l) => [...l.matchAll(/--match-set (\S+)/g)].map((m) => m[1]!)));
    const v6Names = new Set(setsForFamily('ipv6').map((s) => s.spec.name));
    for (const s of used) expect(v6Names.has(s), s).toBe(true);
    expect(used.has('KUBE-6-LOAD-BALANCER-SOURCE-CID')).toBe(true);
    expect(v6.map((t) => [t.table, t.chains.map((c) => c.name), t.jumps])).toEqual(v4.map((t) => [t.table, t.chains.map((c) => c.name), t.jumps]));
  });

  it('owns exactly kube-proxy\'s IPVS-mode chains, never kubelet\'s KUBE-FIREWALL / KUBE-MARK-DROP', () => {
    const specs = ipvsModeRules(ctx(), 'ipv4', ALL);
    expect(specs.map((t) => [t.table, t.chains.map((c) => c.name)])).toEqual([['nat', [...CHAINS.nat]], ['filter', [...CHAINS.filter]], ['mangle', [...CHAINS.mangle]]]);
    for (const t of specs) for (const c of t.chains) expect(defaultIsOwned(c.name, t.table), c.name).toBe(true);
    const text = restoreText(specs);
    expect(text).not.toMatch(/KUBE-FIREWALL|KUBE-MARK-DROP/);
  });
});

describe('load-balancer source ranges', () => {
  it('lbNoNodeAccess: FW entries without a SOURCE-IP twin', () => {
    const fw = ['198.51.100.2,tcp:443', '198.51.100.1,tcp:80', '198.51.100.1,udp:53'];
    const srcIp = ['198.51.100.1,tcp:80,198.51.100.1'];
    expect(lbNoNodeAccess(fw, srcIp)).toEqual(['198.51.100.1,udp:53', '198.51.100.2,tcp:443']);
    expect(lbNoNodeAccess(['2001:db8::2,sctp:9'], [])).toEqual(['2001:db8::2,sctp:9']);
  });

  it('the firewall chain sends LB traffic with source ranges through the range sets, then drops', () => {
    const sets = new Set(['KUBE-6-LOAD-BALANCER-FW', 'KUBE-6-LOAD-BALANCER-SOURCE-CID']);
    const filter = lines(ipvsModeRules(ctx(), 'ipv6', sets, ['2001:db8::2,sctp:9']), 'filter').filter((l) => /FIREWALL|OUT-FILTER/.test(l));
    expect(filter).toEqual([
      '-A KUBE-PROXY-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port for load balancer with sourceRange" -m set --match-set KUBE-6-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL',
      '-A KUBE-SOURCE-RANGES-FIREWALL -m comment --comment "Kubernetes service load balancer ip + port + source cidr for packet filter purpose" -m set --match-set KUBE-6-LOAD-BALANCER-SOURCE-CID dst,dst,src -j RETURN',
      '-A KUBE-SOURCE-RANGES-FIREWALL -j DROP',
      '-A KUBE-IPVS-OUT-FILTER -s 2001:db8::2 -m ipvs --vaddr 2001:db8::2 --vproto sctp --vport 9 -j DROP',
    ]);
  });
});

describe('internal clients of eTP Local external and LB IPs (kubernetes#93456, #115931)', () => {
  const r = (o: Partial<InternalRedirect> = {}): InternalRedirect => ({
    family: 'ipv4', protocol: 'tcp', address: '198.51.100.1', port: 80, clusterIP: '10.96.0.10', sourceRanges: false, service: 'ns/web:http', ...o,
  });
  const cmt = (svc = 'ns/web:http') => `-m comment --comment "${svc} internal traffic to an externalTrafficPolicy=Local IP"`;
  const kubeServices = (specs: TableSpec[]): string[] => lines(specs, 'nat').filter((l) => l.startsWith('-A KUBE-SERVICES'));

  it('none without redirects: KUBE-SERVICES is unchanged', () => {
    expect(kubeServices(ipvsModeRules(ctx(), 'ipv4', ALL, [], []))).toEqual(kubeServices(ipvsModeRules(ctx(), 'ipv4', ALL)));
  });

  it('the node (masqueraded) and the cluster CIDR DNATed to the cluster IP, first in KUBE-SERVICES after the loopback RETURN', () => {
    const specs = ipvsModeRules(ctx({ clusterCIDRs: ['10.244.0.0/16'] }), 'ipv4', ALL, [], [r(), r({ address: '198.51.100.2', protocol: 'udp', port: 53, clusterIP: '10.96.0.11', sourceRanges: true, service: 'ns/dns' })]);
    expect(kubeServices(specs).slice(0, 7)).toEqual([
      '-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN',
      `-A KUBE-SERVICES -d 198.51.100.1 -p tcp ${cmt()} -m tcp --dport 80 -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
      `-A KUBE-SERVICES -d 198.51.100.1 -p tcp ${cmt()} -m tcp --dport 80 -m addrtype --src-type LOCAL -j DNAT --to-destination 10.96.0.10:80`,
      `-A KUBE-SERVICES -s 10.244.0.0/16 -d 198.51.100.1 -p tcp ${cmt()} -m tcp --dport 80 -j DNAT --to-destination 10.96.0.10:80`,
      `-A KUBE-SERVICES -d 198.51.100.2 -p udp ${cmt('ns/dns')} -m udp --dport 53 -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
      `-A KUBE-SERVICES -d 198.51.100.2 -p udp ${cmt('ns/dns')} -m udp --dport 53 -m addrtype --src-type LOCAL -j DNAT --to-destination 10.96.0.11:53`,
      // Behind source ranges, only Pods inside them: the others meet the filter's range check on the LB IP.
      `-A KUBE-SERVICES -s 10.244.0.0/16 -d 198.51.100.2 -p udp ${cmt('ns/dns')} -m udp --dport 53 -m set --match-set KUBE-LOAD-BALANCER-SOURCE-CIDR dst,dst,src -j DNAT --to-destination 10.96.0.11:53`,
    ]);
  });

  it('without a cluster CIDR of the family, only the node; IPv6 targets in brackets', () => {
    const v6 = r({ family: 'ipv6', address: '2001:db8::2', clusterIP: 'fd00::a', protocol: 'sctp' });
    expect(kubeServices(ipvsModeRules(ctx({ clusterCIDRs: ['10.244.0.0/16'] }), 'ipv6', ALL, [], [v6])).slice(1, 4)).toEqual([
      `-A KUBE-SERVICES -d 2001:db8::2 -p sctp ${cmt()} -m sctp --dport 80 -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
      `-A KUBE-SERVICES -d 2001:db8::2 -p sctp ${cmt()} -m sctp --dport 80 -m addrtype --src-type LOCAL -j DNAT --to-destination [fd00::a]:80`,
      `-A KUBE-SERVICES -m comment --comment "Kubernetes service lb portal" -m set --match-set KUBE-6-LOAD-BALANCER dst,dst -j KUBE-LOAD-BALANCER`,
    ]);
  });
});
