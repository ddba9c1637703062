// Golden iptables-restore input of the iptables-mode rule generator (kube-proxy's iptables mode:
// pkg/proxy/iptables/proxier.go). Chain names and rules are checked against kube-proxy's own
// test expectations where they overlap (KUBE-SVC-XPGD46QRK7WJZT7O, KUBE-SEP-SXIVWICOYRO3J4NJ).
import { describe, expect, it } from 'vitest';

import { defaultIsOwned, planRestore, renderCommand, renderSections, type TableSpec } from '../../src/kernel/iptables.js';
import type { EndpointInfo, ServicePortInfo } from '../../src/model/service.js';
import { base32, endpointChain, endpointString, isServiceChain, portNameString, serviceChains } from '../../src/proxy/iptables/names.js';
import { partialSections, type PartialRestore } from '../../src/proxy/iptables/restore.js';
import { fixedChains, iptablesModeSpecs, JUMPS, probability, serviceRules, type RulesContext, type ServiceRules } from '../../src/proxy/iptables/rules.js';

function svc(o: Partial<ServicePortInfo> = {}): ServicePortInfo {
  return {
    name: { namespace: 'ns', name: 'web', port: 'http', protocol: o.protocol ?? 'tcp' },
    type: 'ClusterIP', clusterIPs: ['10.96.0.10'], port: 80, protocol: 'tcp', nodePort: null,
    externalIPs: [], loadBalancerIPs: [], loadBalancerSourceRanges: [],
    externalPolicyLocal: false, internalPolicyLocal: false, healthCheckNodePort: null,
    sessionAffinitySeconds: null, scheduler: null, schedulerFlags: [], ...o,
  };
}

/** `ep('10.244.0.1', 'L')`: L local, T serving-terminating, N not ready. */
function ep(address: string, flags = '', port = 8080): EndpointInfo {
  const ready = !flags.includes('T') && !flags.includes('N');
  return {
    address, port, family: address.includes(':') ? 'ipv6' : 'ipv4',
    ready, serving: ready || flags.includes('T'), terminating: flags.includes('T'),
    nodeName: flags.includes('L') ? 'node-a' : 'node-b', zone: null, isLocal: flags.includes('L'),
  };
}

function ctx(o: Partial<RulesContext> = {}): RulesContext {
  return {
    family: 'ipv4', nodeName: 'node-a', masqueradeAll: false, masqueradeMark: '0x4000', clusterCIDR: '10.244.0.0/16',
    nodePortAddresses: null, nodeIPs: ['192.168.0.10'], largeCluster: false, dropInvalid: true, ...o,
  };
}

/** A service's rules as text: `table: -A SHARED …` lines, then `:CHAIN` and its rules per own chain. */
function lines(r: ServiceRules | null): string {
  if (r === null) return 'null\n';
  const out: string[] = [];
  for (const [k, rules] of Object.entries(r.shared)) {
    const [table, chain] = k.split('/') as [string, string];
    for (const rule of rules) out.push(`${table}: ${renderCommand('-A', chain, rule)}`);
  }
  for (const c of r.chains) out.push(`:${c.name}`, ...c.rules.map((rule) => renderCommand('-A', c.name, rule)));
  return `\n${out.join('\n')}\n`;
}

/** The restore input the driver renders for these specs on tables holding none of our chains. */
function restoreText(specs: TableSpec[]): string {
  return specs.map((s) => planRestore(s, undefined, { isOwned: defaultIsOwned }).text).join('');
}

describe('chain names', () => {
  it('are kube-proxy\'s: base32(sha256(port name + protocol [+ endpoint])), 16 characters', () => {
    const p = { namespace: 'ns1', name: 'svc1', port: 'p80', protocol: 'tcp' as const };
    expect(serviceChains(p)).toEqual({
      svc: 'KUBE-SVC-XPGD46QRK7WJZT7O', svl: 'KUBE-SVL-XPGD46QRK7WJZT7O', ext: 'KUBE-EXT-XPGD46QRK7WJZT7O', fw: 'KUBE-FW-XPGD46QRK7WJZT7O',
    });
    expect(endpointChain(p, { address: '10.180.0.1', port: 80 })).toBe('KUBE-SEP-SXIVWICOYRO3J4NJ');
    expect(portNameString({ ...p, port: '' })).toBe('ns1/svc1');
    expect(endpointString({ address: 'fd00::1', port: 80 })).toBe('[fd00::1]:80');
  });

  it('base32 is RFC 4648 (no padding)', () => {
    const enc = (s: string) => base32(new TextEncoder().encode(s));
    expect(['', 'f', 'fo', 'foo', 'foob', 'fooba', 'foobar'].map(enc)).toEqual(['', 'MY', 'MZXQ', 'MZXW6', 'MZXW6YQ', 'MZXW6YTB', 'MZXW6YTBOI']);
  });

  it('every per-service chain fits the 28-character limit and is recognised as one', () => {
    const names = serviceChains({ namespace: 'a'.repeat(63), name: 'b'.repeat(63), port: 'c'.repeat(15), protocol: 'sctp' });
    for (const n of Object.values(names)) {
      expect(n.length).toBeLessThanOrEqual(28);
      expect(isServiceChain(n)).toBe(true);
    }
    expect(isServiceChain('KUBE-SERVICES')).toBe(false);
  });

  it('probabilities are 1/n with 10 decimals', () => {
    expect([2, 3, 7, 10].map(probability)).toEqual(['0.5000000000', '0.3333333333', '0.1428571429', '0.1000000000']);
  });
});

describe('iptablesModeSpecs: a complete restore', () => {
  it('ClusterIP with three endpoints, and a LoadBalancer with eTP Local, source ranges, health check and affinity', () => {
    const rules = [
      serviceRules(svc({ name: { namespace: 'ns1', name: 'svc1', port: 'p80', protocol: 'tcp' }, clusterIPs: ['172.30.0.41'] }),
        [ep('10.180.0.1', '', 80), ep('10.180.0.2', '', 80), ep('10.180.0.3', '', 80)], ctx({ clusterCIDR: '10.0.0.0/8' }))!,
      serviceRules(svc({
        name: { namespace: 'ns2', name: 'lb', port: 'p80', protocol: 'tcp' }, type: 'LoadBalancer', clusterIPs: ['172.30.0.42'], nodePort: 30080,
        externalIPs: ['192.168.99.11'], loadBalancerIPs: ['1.2.3.4'], loadBalancerSourceRanges: ['192.168.0.0/24', '203.0.113.0/25'],
        externalPolicyLocal: true, healthCheckNodePort: 30000, sessionAffinitySeconds: 10800,
      }), [ep('10.180.0.4', 'L', 80), ep('10.180.0.5', '', 80)], ctx({ clusterCIDR: '10.0.0.0/8', nodeIPs: ['192.168.0.2'] }))!,
    ];
    expect(`\n${restoreText(iptablesModeSpecs(ctx({ clusterCIDR: '10.0.0.0/8' }), rules))}`).toBe(FULL);
  });

  it('jumps: filter INPUT/FORWARD/OUTPUT and nat PREROUTING/OUTPUT/POSTROUTING, only to owned chains', () => {
    for (const [table, jumps] of Object.entries(JUMPS)) {
      for (const j of jumps) expect(defaultIsOwned(j.rule[j.rule.length - 1]!, table as 'nat')).toBe(true);
    }
    expect(JUMPS.nat.map((j) => j.chain)).toEqual(['PREROUTING', 'OUTPUT', 'POSTROUTING']);
  });
});

describe('serviceRules: representative services', () => {
  it('a service without a cluster IP of the family gives nothing', () => {
    expect(serviceRules(svc({ clusterIPs: ['fd00:96::a'] }), [ep('fd00:244::2')], ctx())).toBeNull();
  });

  it("a service without endpoints: REJECT in filter for the cluster IP, external IPs and NodePort", () => {
    expect(lines(serviceRules(svc({ type: 'NodePort', nodePort: 30080, externalIPs: ['192.168.99.1'] }), [], ctx()))).toBe(`
filter: -A KUBE-SERVICES -m comment --comment "ns/web:http has no endpoints" -m tcp -p tcp -d 10.96.0.10 --dport 80 -j REJECT
filter: -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns/web:http has no endpoints" -m tcp -p tcp -d 192.168.99.1 --dport 80 -j REJECT
filter: -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns/web:http has no endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30080 -j REJECT
`);
  });

  it("eTP Local without a local endpoint: external traffic DROPped, pods and the node short-circuit to KUBE-SVC", () => {
    expect(lines(serviceRules(svc({ type: 'NodePort', nodePort: 30080, externalPolicyLocal: true }), [ep('10.244.1.2')], ctx()))).toBe(`
nat: -A KUBE-SERVICES -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 -j KUBE-SVC-HMALVVKA6APKJPPY
nat: -A KUBE-NODEPORTS -m comment --comment ns/web:http -m tcp -p tcp --dport 30080 -j KUBE-EXT-HMALVVKA6APKJPPY
filter: -A KUBE-EXTERNAL-SERVICES -m comment --comment "ns/web:http has no local endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 30080 -j DROP
:KUBE-EXT-HMALVVKA6APKJPPY
-A KUBE-EXT-HMALVVKA6APKJPPY -m comment --comment "pod traffic for ns/web:http external destinations" -s 10.244.0.0/16 -j KUBE-SVC-HMALVVKA6APKJPPY
-A KUBE-EXT-HMALVVKA6APKJPPY -m comment --comment "masquerade LOCAL traffic for ns/web:http external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
-A KUBE-EXT-HMALVVKA6APKJPPY -m comment --comment "route LOCAL traffic for ns/web:http external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-HMALVVKA6APKJPPY
:KUBE-SVC-HMALVVKA6APKJPPY
-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment "ns/web:http -> 10.244.1.2:8080" -j KUBE-SEP-DT6VVTARLVVOS44S
:KUBE-SEP-DT6VVTARLVVOS44S
-A KUBE-SEP-DT6VVTARLVVOS44S -m comment --comment ns/web:http -s 10.244.1.2 -j KUBE-MARK-MASQ
-A KUBE-SEP-DT6VVTARLVVOS44S -m comment --comment ns/web:http -m tcp -p tcp -j DNAT --to-destination 10.244.1.2:8080
`);
  });

  it("iTP Local without a local endpoint: the cluster IP is DROPped, no chain", () => {
    expect(lines(serviceRules(svc({ internalPolicyLocal: true }), [ep('10.244.1.2')], ctx()))).toBe(`
filter: -A KUBE-SERVICES -m comment --comment "ns/web:http has no local endpoints" -m tcp -p tcp -d 10.96.0.10 --dport 80 -j DROP
`);
  });

  it("iTP Local: the cluster IP goes to KUBE-SVL with the local endpoints only", () => {
    expect(lines(serviceRules(svc({ internalPolicyLocal: true }), [ep('10.244.1.2'), ep('10.244.0.5', 'L')], ctx()))).toBe(`
nat: -A KUBE-SERVICES -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 -j KUBE-SVL-HMALVVKA6APKJPPY
:KUBE-SVL-HMALVVKA6APKJPPY
-A KUBE-SVL-HMALVVKA6APKJPPY -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SVL-HMALVVKA6APKJPPY -m comment --comment "ns/web:http -> 10.244.0.5:8080" -j KUBE-SEP-TUSP4SJ2J567OW67
:KUBE-SEP-TUSP4SJ2J567OW67
-A KUBE-SEP-TUSP4SJ2J567OW67 -m comment --comment ns/web:http -s 10.244.0.5 -j KUBE-MARK-MASQ
-A KUBE-SEP-TUSP4SJ2J567OW67 -m comment --comment ns/web:http -m tcp -p tcp -j DNAT --to-destination 10.244.0.5:8080
`);
  });

  it("--masquerade-all, UDP, an unnamed port", () => {
    expect(lines(serviceRules(svc({ protocol: 'udp', name: { namespace: 'kube-system', name: 'dns', port: '', protocol: 'udp' }, port: 53 }), [ep('10.244.1.2', '', 53)], ctx({ masqueradeAll: true })))).toBe(`
nat: -A KUBE-SERVICES -m comment --comment "kube-system/dns cluster IP" -m udp -p udp -d 10.96.0.10 --dport 53 -j KUBE-SVC-UERY4RAZ7VIXJ7V4
:KUBE-SVC-UERY4RAZ7VIXJ7V4
-A KUBE-SVC-UERY4RAZ7VIXJ7V4 -m comment --comment "kube-system/dns cluster IP" -m udp -p udp -d 10.96.0.10 --dport 53 -j KUBE-MARK-MASQ
-A KUBE-SVC-UERY4RAZ7VIXJ7V4 -m comment --comment "kube-system/dns -> 10.244.1.2:53" -j KUBE-SEP-JQHKNUAHA6VVRQV4
:KUBE-SEP-JQHKNUAHA6VVRQV4
-A KUBE-SEP-JQHKNUAHA6VVRQV4 -m comment --comment kube-system/dns -s 10.244.1.2 -j KUBE-MARK-MASQ
-A KUBE-SEP-JQHKNUAHA6VVRQV4 -m comment --comment kube-system/dns -m udp -p udp -j DNAT --to-destination 10.244.1.2:53
`);
  });

  it("SCTP NodePort without --cluster-cidr: no cluster-IP masquerade rule, external traffic masqueraded", () => {
    expect(lines(serviceRules(svc({ protocol: 'sctp', name: { namespace: 'ns', name: 's', port: 'x', protocol: 'sctp' }, type: 'NodePort', nodePort: 30300 }), [ep('10.244.1.2')], ctx({ clusterCIDR: null })))).toBe(`
nat: -A KUBE-SERVICES -m comment --comment "ns/s:x cluster IP" -m sctp -p sctp -d 10.96.0.10 --dport 80 -j KUBE-SVC-5CU2VTEDJ77ZSDNC
nat: -A KUBE-NODEPORTS -m comment --comment ns/s:x -m sctp -p sctp --dport 30300 -j KUBE-EXT-5CU2VTEDJ77ZSDNC
:KUBE-EXT-5CU2VTEDJ77ZSDNC
-A KUBE-EXT-5CU2VTEDJ77ZSDNC -m comment --comment "masquerade traffic for ns/s:x external destinations" -j KUBE-MARK-MASQ
-A KUBE-EXT-5CU2VTEDJ77ZSDNC -j KUBE-SVC-5CU2VTEDJ77ZSDNC
:KUBE-SVC-5CU2VTEDJ77ZSDNC
-A KUBE-SVC-5CU2VTEDJ77ZSDNC -m comment --comment "ns/s:x -> 10.244.1.2:8080" -j KUBE-SEP-4XJXJEYH4VFW7G74
:KUBE-SEP-4XJXJEYH4VFW7G74
-A KUBE-SEP-4XJXJEYH4VFW7G74 -m comment --comment ns/s:x -s 10.244.1.2 -j KUBE-MARK-MASQ
-A KUBE-SEP-4XJXJEYH4VFW7G74 -m comment --comment ns/s:x -m sctp -p sctp -j DNAT --to-destination 10.244.1.2:8080
`);
  });

  it("IPv6 family of a dual-stack service: its own addresses, [ip]:port DNAT", () => {
    expect(lines(serviceRules(svc({ clusterIPs: ['10.96.0.10', 'fd00:96::a'], externalIPs: ['192.168.99.1', '2001:db8::1'] }), [ep('10.244.1.2'), ep('fd00:244::2')], ctx({ family: 'ipv6', clusterCIDR: 'fd00:244::/64', nodeIPs: [] })))).toBe(`
nat: -A KUBE-SERVICES -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d fd00:96::a --dport 80 -j KUBE-SVC-HMALVVKA6APKJPPY
nat: -A KUBE-SERVICES -m comment --comment "ns/web:http external IP" -m tcp -p tcp -d 2001:db8::1 --dport 80 -j KUBE-EXT-HMALVVKA6APKJPPY
:KUBE-EXT-HMALVVKA6APKJPPY
-A KUBE-EXT-HMALVVKA6APKJPPY -m comment --comment "masquerade traffic for ns/web:http external destinations" -j KUBE-MARK-MASQ
-A KUBE-EXT-HMALVVKA6APKJPPY -j KUBE-SVC-HMALVVKA6APKJPPY
:KUBE-SVC-HMALVVKA6APKJPPY
-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d fd00:96::a --dport 80 ! -s fd00:244::/64 -j KUBE-MARK-MASQ
-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment "ns/web:http -> [fd00:244::2]:8080" -j KUBE-SEP-OJ6S7NVQD2BP3BGJ
:KUBE-SEP-OJ6S7NVQD2BP3BGJ
-A KUBE-SEP-OJ6S7NVQD2BP3BGJ -m comment --comment ns/web:http -s fd00:244::2 -j KUBE-MARK-MASQ
-A KUBE-SEP-OJ6S7NVQD2BP3BGJ -m comment --comment ns/web:http -m tcp -p tcp -j DNAT --to-destination [fd00:244::2]:8080
`);
  });

  it("serving-terminating endpoints are used when none is ready; not-ready ones never", () => {
    expect(lines(serviceRules(svc(), [ep('10.244.1.2', 'T'), ep('10.244.1.3', 'N')], ctx()))).toBe(`
nat: -A KUBE-SERVICES -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 -j KUBE-SVC-HMALVVKA6APKJPPY
:KUBE-SVC-HMALVVKA6APKJPPY
-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment "ns/web:http -> 10.244.1.2:8080" -j KUBE-SEP-DT6VVTARLVVOS44S
:KUBE-SEP-DT6VVTARLVVOS44S
-A KUBE-SEP-DT6VVTARLVVOS44S -m comment --comment ns/web:http -s 10.244.1.2 -j KUBE-MARK-MASQ
-A KUBE-SEP-DT6VVTARLVVOS44S -m comment --comment ns/web:http -m tcp -p tcp -j DNAT --to-destination 10.244.1.2:8080
`);
  });

  it("large cluster mode: no per-endpoint comments; ClientIP affinity with recent", () => {
    expect(lines(serviceRules(svc({ sessionAffinitySeconds: 60 }), [ep('10.244.1.2'), ep('10.244.1.3')], ctx({ largeCluster: true })))).toBe(`
nat: -A KUBE-SERVICES -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 -j KUBE-SVC-HMALVVKA6APKJPPY
:KUBE-SVC-HMALVVKA6APKJPPY
-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SVC-HMALVVKA6APKJPPY -m recent --name KUBE-SEP-DT6VVTARLVVOS44S --rcheck --seconds 60 --reap -j KUBE-SEP-DT6VVTARLVVOS44S
-A KUBE-SVC-HMALVVKA6APKJPPY -m recent --name KUBE-SEP-ABALNOEURLVXWYPE --rcheck --seconds 60 --reap -j KUBE-SEP-ABALNOEURLVXWYPE
-A KUBE-SVC-HMALVVKA6APKJPPY -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-DT6VVTARLVVOS44S
-A KUBE-SVC-HMALVVKA6APKJPPY -j KUBE-SEP-ABALNOEURLVXWYPE
:KUBE-SEP-DT6VVTARLVVOS44S
-A KUBE-SEP-DT6VVTARLVVOS44S -s 10.244.1.2 -j KUBE-MARK-MASQ
-A KUBE-SEP-DT6VVTARLVVOS44S -m recent --name KUBE-SEP-DT6VVTARLVVOS44S --set -m tcp -p tcp -j DNAT --to-destination 10.244.1.2:8080
:KUBE-SEP-ABALNOEURLVXWYPE
-A KUBE-SEP-ABALNOEURLVXWYPE -s 10.244.1.3 -j KUBE-MARK-MASQ
-A KUBE-SEP-ABALNOEURLVXWYPE -m recent --name KUBE-SEP-ABALNOEURLVXWYPE --set -m tcp -p tcp -j DNAT --to-destination 10.244.1.3:8080
`);
  });
});

describe('fixedChains', () => {
  it('--nodeport-addresses: one NodePort jump per address of the family, loopback left out; no INVALID drop when conntrack is liberal', () => {
    const f = fixedChains(ctx({ family: 'ipv6', nodePortAddresses: ['fd00::1', '::1', '10.0.0.1'], dropInvalid: false, masqueradeMark: '0x1' }), []);
    const out = (['filter', 'nat'] as const).flatMap((t) => f[t].flatMap((c) => c.rules.map((r) => `${t}: ${renderCommand('-A', c.name, r)}`)));
    expect(`\n${out.join('\n')}\n`).toBe(FIXED);
  });

  it('the shared chains hold the services\' rules in the order given, the NodePort jump last', () => {
    const name = (n: string) => ({ namespace: n, name: n, port: '', protocol: 'tcp' as const });
    const a = serviceRules(svc({ name: name('a'), clusterIPs: ['10.96.0.1'] }), [ep('10.244.1.1')], ctx())!;
    const b = serviceRules(svc({ name: name('b'), clusterIPs: ['10.96.0.2'] }), [ep('10.244.1.2')], ctx())!;
    const services = fixedChains(ctx(), [b, a]).nat[0]!;
    expect(services.rules.map((r) => r[r.length - 1])).toEqual([serviceChains(name('b')).svc, serviceChains(name('a')).svc, 'KUBE-NODEPORTS']);
  });
});

const renderPartialRestore = (p: PartialRestore): string => renderSections(partialSections(p));

describe('partialSections', () => {
  it('rewrites the fixed chains, declares and fills the changed chains, flushes and deletes the gone ones', () => {
    const r = serviceRules(svc(), [ep('10.244.1.2')], ctx())!;
    const text = renderPartialRestore({ fixed: fixedChains(ctx({ dropInvalid: false }), [r]), changed: r.chains, deleted: ['KUBE-SEP-GONE0000GONE0000'] });
    expect(`\n${text}`).toBe(`
*filter
:KUBE-SERVICES - [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-HMALVVKA6APKJPPY - [0:0]
:KUBE-SEP-DT6VVTARLVVOS44S - [0:0]
:KUBE-SEP-GONE0000GONE0000 - [0:0]
-A KUBE-SERVICES -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 -j KUBE-SVC-HMALVVKA6APKJPPY
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment "ns/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SVC-HMALVVKA6APKJPPY -m comment --comment "ns/web:http -> 10.244.1.2:8080" -j KUBE-SEP-DT6VVTARLVVOS44S
-A KUBE-SEP-DT6VVTARLVVOS44S -m comment --comment ns/web:http -s 10.244.1.2 -j KUBE-MARK-MASQ
-A KUBE-SEP-DT6VVTARLVVOS44S -m comment --comment ns/web:http -m tcp -p tcp -j DNAT --to-destination 10.244.1.2:8080
-X KUBE-SEP-GONE0000GONE0000
COMMIT
`);
  });

  it('an untrusted service name cannot inject a command: comments are sanitised', () => {
    const r = serviceRules(svc({ name: { namespace: 'ns', name: 'evil\nCOMMIT', port: '"x', protocol: 'tcp' } }), [ep('10.244.1.2')], ctx())!;
    const text = renderPartialRestore({ fixed: fixedChains(ctx(), [r]), changed: r.chains, deleted: [] });
    expect(text.split('\n').filter((l) => l === 'COMMIT')).toHaveLength(2);
    expect(text).toContain('--comment "ns/evil_COMMIT:\\"x cluster IP"');
  });
});

const FULL = `
*filter
:KUBE-SERVICES - [0:0]
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
-I OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-I FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-I FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-I FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-I INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-I INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-I INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-NODEPORTS -m comment --comment "ns2/lb:p80 health check node port" -m tcp -p tcp --dport 30000 -j ACCEPT
-A KUBE-PROXY-FIREWALL -m comment --comment "ns2/lb:p80 traffic not accepted by KUBE-FW-CBV6GCPNOTAAC2XZ" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j DROP
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-SVC-XPGD46QRK7WJZT7O - [0:0]
:KUBE-SEP-SXIVWICOYRO3J4NJ - [0:0]
:KUBE-SEP-LXVODXWDISEETFEF - [0:0]
:KUBE-SEP-ICDUIKC33SFI6ZPR - [0:0]
:KUBE-EXT-CBV6GCPNOTAAC2XZ - [0:0]
:KUBE-FW-CBV6GCPNOTAAC2XZ - [0:0]
:KUBE-SVC-CBV6GCPNOTAAC2XZ - [0:0]
:KUBE-SVL-CBV6GCPNOTAAC2XZ - [0:0]
:KUBE-SEP-HQ7G7CCAZ5XLMAF5 - [0:0]
:KUBE-SEP-6BAHBFTS7IQHEJ6D - [0:0]
-I POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-I OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-I PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j KUBE-SVC-XPGD46QRK7WJZT7O
-A KUBE-SERVICES -m comment --comment "ns2/lb:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 -j KUBE-SVC-CBV6GCPNOTAAC2XZ
-A KUBE-SERVICES -m comment --comment "ns2/lb:p80 external IP" -m tcp -p tcp -d 192.168.99.11 --dport 80 -j KUBE-EXT-CBV6GCPNOTAAC2XZ
-A KUBE-SERVICES -m comment --comment "ns2/lb:p80 loadbalancer IP" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j KUBE-FW-CBV6GCPNOTAAC2XZ
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS
-A KUBE-NODEPORTS -m comment --comment ns2/lb:p80 -m tcp -p tcp --dport 30080 -j KUBE-EXT-CBV6GCPNOTAAC2XZ
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.1:80" -m statistic --mode random --probability 0.3333333333 -j KUBE-SEP-SXIVWICOYRO3J4NJ
-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-LXVODXWDISEETFEF
-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment "ns1/svc1:p80 -> 10.180.0.3:80" -j KUBE-SEP-ICDUIKC33SFI6ZPR
-A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ
-A KUBE-SEP-SXIVWICOYRO3J4NJ -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80
-A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -s 10.180.0.2 -j KUBE-MARK-MASQ
-A KUBE-SEP-LXVODXWDISEETFEF -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.2:80
-A KUBE-SEP-ICDUIKC33SFI6ZPR -m comment --comment ns1/svc1:p80 -s 10.180.0.3 -j KUBE-MARK-MASQ
-A KUBE-SEP-ICDUIKC33SFI6ZPR -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80
-A KUBE-EXT-CBV6GCPNOTAAC2XZ -m comment --comment "pod traffic for ns2/lb:p80 external destinations" -s 10.0.0.0/8 -j KUBE-SVC-CBV6GCPNOTAAC2XZ
-A KUBE-EXT-CBV6GCPNOTAAC2XZ -m comment --comment "masquerade LOCAL traffic for ns2/lb:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ
-A KUBE-EXT-CBV6GCPNOTAAC2XZ -m comment --comment "route LOCAL traffic for ns2/lb:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-SVC-CBV6GCPNOTAAC2XZ
-A KUBE-EXT-CBV6GCPNOTAAC2XZ -j KUBE-SVL-CBV6GCPNOTAAC2XZ
-A KUBE-FW-CBV6GCPNOTAAC2XZ -m comment --comment "ns2/lb:p80 loadbalancer IP" -s 192.168.0.0/24 -j KUBE-EXT-CBV6GCPNOTAAC2XZ
-A KUBE-FW-CBV6GCPNOTAAC2XZ -m comment --comment "ns2/lb:p80 loadbalancer IP" -s 203.0.113.0/25 -j KUBE-EXT-CBV6GCPNOTAAC2XZ
-A KUBE-FW-CBV6GCPNOTAAC2XZ -m comment --comment "ns2/lb:p80 loadbalancer IP" -s 1.2.3.4 -j KUBE-EXT-CBV6GCPNOTAAC2XZ
-A KUBE-FW-CBV6GCPNOTAAC2XZ -m comment --comment "other traffic to ns2/lb:p80 will be dropped by KUBE-PROXY-FIREWALL"
-A KUBE-SVC-CBV6GCPNOTAAC2XZ -m comment --comment "ns2/lb:p80 cluster IP" -m tcp -p tcp -d 172.30.0.42 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ
-A KUBE-SVC-CBV6GCPNOTAAC2XZ -m comment --comment "ns2/lb:p80 -> 10.180.0.4:80" -m recent --name KUBE-SEP-HQ7G7CCAZ5XLMAF5 --rcheck --seconds 10800 --reap -j KUBE-SEP-HQ7G7CCAZ5XLMAF5
-A KUBE-SVC-CBV6GCPNOTAAC2XZ -m comment --comment "ns2/lb:p80 -> 10.180.0.5:80" -m recent --name KUBE-SEP-6BAHBFTS7IQHEJ6D --rcheck --seconds 10800 --reap -j KUBE-SEP-6BAHBFTS7IQHEJ6D
-A KUBE-SVC-CBV6GCPNOTAAC2XZ -m comment --comment "ns2/lb:p80 -> 10.180.0.4:80" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-HQ7G7CCAZ5XLMAF5
-A KUBE-SVC-CBV6GCPNOTAAC2XZ -m comment --comment "ns2/lb:p80 -> 10.180.0.5:80" -j KUBE-SEP-6BAHBFTS7IQHEJ6D
-A KUBE-SVL-CBV6GCPNOTAAC2XZ -m comment --comment "ns2/lb:p80 -> 10.180.0.4:80" -m recent --name KUBE-SEP-HQ7G7CCAZ5XLMAF5 --rcheck --seconds 10800 --reap -j KUBE-SEP-HQ7G7CCAZ5XLMAF5
-A KUBE-SVL-CBV6GCPNOTAAC2XZ -m comment --comment "ns2/lb:p80 -> 10.180.0.4:80" -j KUBE-SEP-HQ7G7CCAZ5XLMAF5
-A KUBE-SEP-HQ7G7CCAZ5XLMAF5 -m comment --comment ns2/lb:p80 -s 10.180.0.4 -j KUBE-MARK-MASQ
-A KUBE-SEP-HQ7G7CCAZ5XLMAF5 -m comment --comment ns2/lb:p80 -m recent --name KUBE-SEP-HQ7G7CCAZ5XLMAF5 --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.4:80
-A KUBE-SEP-6BAHBFTS7IQHEJ6D -m comment --comment ns2/lb:p80 -s 10.180.0.5 -j KUBE-MARK-MASQ
-A KUBE-SEP-6BAHBFTS7IQHEJ6D -m comment --comment ns2/lb:p80 -m recent --name KUBE-SEP-6BAHBFTS7IQHEJ6D --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.5:80
COMMIT
`;

const FIXED = `
filter: -A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x1/0x1 -j ACCEPT
filter: -A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
nat: -A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -d fd00::1 -j KUBE-NODEPORTS
nat: -A KUBE-POSTROUTING -m mark ! --mark 0x1/0x1 -j RETURN
nat: -A KUBE-POSTROUTING -j MARK --xor-mark 0x1
nat: -A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
nat: -A KUBE-MARK-MASQ -j MARK --or-mark 0x1
`;
