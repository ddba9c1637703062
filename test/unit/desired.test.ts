import { describe, expect, it } from 'vitest';

import { ConfigSchema, type ConfigInput } from '../../src/config.js';
import { formatEntry, parseEntry } from '../../src/kernel/ipset/entry.js';
import { destinationSchema, serviceId, virtualServiceSchema } from '../../src/kernel/ipvs/types.js';
import type { EndpointInfo, ServicePortInfo } from '../../src/model/service.js';
import { desiredForService } from '../../src/proxy/ipvs/desired.js';
import { OWNED_SETS, ownedSet } from '../../src/proxy/ipvs/ipsets.js';
import type { DesiredContext, ServiceContribution } from '../../src/proxy/ipvs/types.js';

const NODE = 'node-a';
const NODE_V4 = '192.168.0.10';
const NODE_V6 = 'fd00:1::10';

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
    nodeName: flags.includes('L') ? NODE : 'node-b', zone: null, isLocal: flags.includes('L'),
  };
}

function ctx(config: ConfigInput = {}, nodePortAddresses = [NODE_V4, NODE_V6]): DesiredContext {
  return { config: ConfigSchema.parse(config), nodeName: NODE, nodePortAddresses };
}

/** Virtual servers as `id → "sched flags timeout/netmask: dests"`. */
function vss(c: ServiceContribution): Record<string, string> {
  return Object.fromEntries(
    c.virtualServers.map(({ service: s, destinations }) => [
      serviceId(s),
      `${s.scheduler} [${s.flags.join(',')}] ${s.timeout}/${s.netmask}: ${destinations.map((d) => `${d.address}:${d.port}`).join(' ')}`,
    ]),
  );
}
const dests = (c: ServiceContribution, id: string): string => vss(c)[id]!.split(': ')[1]!;
const entries = (c: ServiceContribution): string[] => c.ipsetEntries.map((e) => `${e.set} ${e.entry}`).sort();

const EPS = [ep('10.244.0.1', 'L'), ep('10.244.0.2'), ep('10.244.0.3', 'N')];

describe('desiredForService: ClusterIP', () => {
  it('one virtual server with the ready endpoints, kube-proxy sets, the address to bind', () => {
    const c = desiredForService(svc(), EPS, ctx());
    expect(c.key).toBe('ns/web:http/tcp');
    expect(vss(c)).toEqual({ 'tcp/10.96.0.10:80': 'rr [] 0/32: 10.244.0.1:8080 10.244.0.2:8080' });
    expect(c.virtualServers[0]!.destinations[0]).toEqual({ address: '10.244.0.1', port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0 });
    expect(entries(c)).toEqual([
      'KUBE-CLUSTER-IP 10.96.0.10,tcp:80',
      'KUBE-IPVS-IPS 10.96.0.10',
      'KUBE-LOOP-BACK 10.244.0.1,tcp:8080,10.244.0.1',
    ]);
    expect(c.addresses).toEqual(['10.96.0.10']);
    expect([c.healthCheck, c.errors]).toEqual([null, []]);
  });

  it('still creates the virtual server when there are no endpoints', () => {
    expect(vss(desiredForService(svc(), [], ctx()))).toEqual({ 'tcp/10.96.0.10:80': 'rr [] 0/32: ' });
  });

  it.each([
    ['tcp', 'tcp/10.96.0.10:53', 'KUBE-CLUSTER-IP 10.96.0.10,tcp:53'],
    ['udp', 'udp/10.96.0.10:53', 'KUBE-CLUSTER-IP 10.96.0.10,udp:53'],
    ['sctp', 'sctp/10.96.0.10:53', 'KUBE-CLUSTER-IP 10.96.0.10,sctp:53'],
  ] as const)('protocol %s', (protocol, id, entry) => {
    const c = desiredForService(svc({ protocol, port: 53 }), [], ctx());
    expect(Object.keys(vss(c))).toEqual([id]);
    expect(entries(c)).toContain(entry);
  });

  it.each([
    ['ready only', [ep('10.244.0.1'), ep('10.244.0.2', 'T'), ep('10.244.0.3', 'N')], '10.244.0.1:8080'],
    ['serving-terminating only when none is ready', [ep('10.244.0.2', 'T'), ep('10.244.0.3', 'N'), ep('10.244.0.4', 'T')], '10.244.0.2:8080 10.244.0.4:8080'],
    ['nothing usable', [ep('10.244.0.3', 'N')], ''],
  ])('endpoints: %s', (_n, list, want) => {
    expect(dests(desiredForService(svc(), list, ctx()), 'tcp/10.96.0.10:80')).toBe(want);
  });
});

describe('desiredForService: NodePort', () => {
  it.each([
    ['tcp', ['KUBE-NODE-PORT-TCP 30080']],
    ['udp', ['KUBE-NODE-PORT-UDP 30080']],
    ['sctp', ['KUBE-NODE-PORT-SCTP-HASH 192.168.0.10,sctp:30080', 'KUBE-NODE-PORT-SCTP-HASH 192.168.0.11,sctp:30080']],
  ] as const)('%s: one virtual server per node address of the family', (protocol, want) => {
    const c = desiredForService(svc({ type: 'NodePort', protocol, nodePort: 30080 }), EPS, ctx({}, [NODE_V4, '192.168.0.11', '127.0.0.1', NODE_V6]));
    expect(Object.keys(vss(c))).toEqual([`${protocol}/10.96.0.10:80`, `${protocol}/192.168.0.10:30080`, `${protocol}/192.168.0.11:30080`]);
    expect(dests(c, `${protocol}/192.168.0.10:30080`)).toBe('10.244.0.1:8080 10.244.0.2:8080');
    expect(entries(c).filter((e) => e.startsWith('KUBE-NODE-PORT'))).toEqual(want);
    expect(c.addresses).toEqual(['10.96.0.10']);
  });

  it('no node address of the family: no NodePort virtual server or entry', () => {
    const c = desiredForService(svc({ type: 'NodePort', nodePort: 30080 }), EPS, ctx({}, [NODE_V6]));
    expect(Object.keys(vss(c))).toEqual(['tcp/10.96.0.10:80']);
    expect(entries(c).some((e) => e.startsWith('KUBE-NODE-PORT'))).toBe(false);
  });
});

describe('desiredForService: external IPs and load balancers', () => {
  it('externalIPs: KUBE-EXTERNAL-IP, a virtual server, bound unless a node address; other family ignored', () => {
    const c = desiredForService(svc({ externalIPs: ['192.0.2.1', NODE_V4, '2001:db8::1'] }), EPS, ctx());
    expect(Object.keys(vss(c))).toEqual(['tcp/10.96.0.10:80', 'tcp/192.0.2.1:80', 'tcp/192.168.0.10:80']);
    expect(dests(c, 'tcp/192.0.2.1:80')).toBe('10.244.0.1:8080 10.244.0.2:8080');
    expect(entries(c).filter((e) => e.startsWith('KUBE-EXTERNAL'))).toEqual(['KUBE-EXTERNAL-IP 192.0.2.1,tcp:80', 'KUBE-EXTERNAL-IP 192.168.0.10,tcp:80']);
    expect(c.addresses).toEqual(['10.96.0.10', '192.0.2.1']);
  });

  it('load-balancer IPs: KUBE-LOAD-BALANCER, a virtual server, bound', () => {
    const c = desiredForService(svc({ type: 'LoadBalancer', loadBalancerIPs: ['198.51.100.1'] }), EPS, ctx());
    expect(Object.keys(vss(c))).toEqual(['tcp/10.96.0.10:80', 'tcp/198.51.100.1:80']);
    expect(entries(c)).toContain('KUBE-LOAD-BALANCER 198.51.100.1,tcp:80');
    expect(entries(c).some((e) => /FW|SOURCE|LOCAL/.test(e))).toBe(false);
    expect(c.addresses).toEqual(['10.96.0.10', '198.51.100.1']);
  });

  it.each([
    ['a range without the node', ['203.0.113.0/24'], ['KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.1,tcp:80,203.0.113.0/24'], true],
    ['a host range, a range with the node (SOURCE-IP)', ['203.0.113.9/32', '192.168.0.0/16', '2001:db8::/32'],
      ['KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.1,tcp:80,192.168.0.0/16', 'KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.1,tcp:80,203.0.113.9',
        'KUBE-LOAD-BALANCER-SOURCE-IP 198.51.100.1,tcp:80,198.51.100.1'], true],
    ['only ranges of the other family: no firewall', ['2001:db8::/32'], [], false],
    ['a /0 range: no firewall', ['203.0.113.0/24', '0.0.0.0/0'], [], false],
  ])('source ranges: %s', (_n, ranges, want, fw) => {
    const c = desiredForService(svc({ type: 'LoadBalancer', loadBalancerIPs: ['198.51.100.1'], loadBalancerSourceRanges: ranges }), EPS, ctx());
    expect(entries(c).filter((e) => e.includes('SOURCE'))).toEqual(want);
    expect(entries(c).includes('KUBE-LOAD-BALANCER-FW 198.51.100.1,tcp:80')).toBe(fw);
  });
});

describe('desiredForService: traffic policies', () => {
  const external = { type: 'LoadBalancer' as const, nodePort: 30080, externalIPs: ['192.0.2.1'], loadBalancerIPs: ['198.51.100.1'] };
  const EXT_IDS = ['tcp/192.0.2.1:80', 'tcp/198.51.100.1:80', 'tcp/192.168.0.10:30080'];

  it('eTP Local: external VIPs get local endpoints, the cluster IP all; -LOCAL sets; health check', () => {
    const c = desiredForService(svc({ ...external, externalPolicyLocal: true, healthCheckNodePort: 32000 }), EPS, ctx());
    expect(dests(c, 'tcp/10.96.0.10:80')).toBe('10.244.0.1:8080 10.244.0.2:8080');
    for (const id of EXT_IDS) expect(dests(c, id)).toBe('10.244.0.1:8080');
    expect(entries(c).filter((e) => /LOCAL|HEALTH|KUBE-EXTERNAL/.test(e))).toEqual([
      'KUBE-EXTERNAL-IP-LOCAL 192.0.2.1,tcp:80',
      'KUBE-HEALTH-CHECK-NODE-PORT 32000',
      'KUBE-LOAD-BALANCER-LOCAL 198.51.100.1,tcp:80',
      'KUBE-NODE-PORT-LOCAL-TCP 30080',
    ]);
    expect(c.healthCheck).toEqual({ port: 32000, service: 'ns/web', localEndpoints: 1 });
  });

  it('eTP Local without local endpoints: external and LB IPs get none, the node port falls back to cluster endpoints (kube-proxy #97081); health check reports 0', () => {
    const list = [ep('10.244.0.2'), ep('10.244.0.5', 'LN')];
    const c = desiredForService(svc({ ...external, externalPolicyLocal: true, healthCheckNodePort: 32000 }), list, ctx());
    expect(dests(c, 'tcp/192.0.2.1:80')).toBe('');
    expect(dests(c, 'tcp/198.51.100.1:80')).toBe('');
    expect(dests(c, 'tcp/192.168.0.10:30080')).toBe('10.244.0.2:8080');
    expect(dests(c, 'tcp/10.96.0.10:80')).toBe('10.244.0.2:8080');
    expect(c.healthCheck).toEqual({ port: 32000, service: 'ns/web', localEndpoints: 0 });
  });

  it('iTP Local: the cluster IP gets local endpoints only, external VIPs all', () => {
    const c = desiredForService(svc({ ...external, internalPolicyLocal: true }), EPS, ctx());
    expect(dests(c, 'tcp/10.96.0.10:80')).toBe('10.244.0.1:8080');
    for (const id of EXT_IDS) expect(dests(c, id)).toBe('10.244.0.1:8080 10.244.0.2:8080');
    expect(c.healthCheck).toBeNull();
  });

  it('iTP Local without local endpoints: the cluster IP has no real server', () => {
    const c = desiredForService(svc({ ...external, internalPolicyLocal: true }), [ep('10.244.0.2')], ctx());
    expect(dests(c, 'tcp/10.96.0.10:80')).toBe('');
    expect(dests(c, 'tcp/192.0.2.1:80')).toBe('10.244.0.2:8080');
  });

  it('iTP Local, local endpoint only serving-terminating: used', () => {
    const c = desiredForService(svc({ internalPolicyLocal: true }), [ep('10.244.0.1', 'LT'), ep('10.244.0.2')], ctx());
    expect(dests(c, 'tcp/10.96.0.10:80')).toBe('10.244.0.1:8080');
  });
});

describe('desiredForService: dual-stack', () => {
  const ds = svc({ type: 'NodePort', nodePort: 30080, clusterIPs: ['10.96.0.10', 'fd00::a'], externalIPs: ['192.0.2.1', '2001:db8::1'] });
  const list = [ep('10.244.0.1', 'L'), ep('fd00:244::1'), ep('fd00:244::2', 'L')];

  it('IPv4 endpoints to IPv4 VIPs, IPv6 to IPv6; KUBE-6- sets; both families bound', () => {
    const c = desiredForService(ds, list, ctx());
    expect(vss(c)).toEqual({
      'tcp/10.96.0.10:80': 'rr [] 0/32: 10.244.0.1:8080',
      'tcp/192.0.2.1:80': 'rr [] 0/32: 10.244.0.1:8080',
      'tcp/192.168.0.10:30080': 'rr [] 0/32: 10.244.0.1:8080',
      'tcp/[fd00::a]:80': 'rr [] 0/128: fd00:244::1:8080 fd00:244::2:8080',
      'tcp/[2001:db8::1]:80': 'rr [] 0/128: fd00:244::1:8080 fd00:244::2:8080',
      'tcp/[fd00:1::10]:30080': 'rr [] 0/128: fd00:244::1:8080 fd00:244::2:8080',
    });
    expect(entries(c)).toEqual([
      'KUBE-6-CLUSTER-IP fd00::a,tcp:80',
      'KUBE-6-EXTERNAL-IP 2001:db8::1,tcp:80',
      'KUBE-6-IPVS-IPS 2001:db8::1',
      'KUBE-6-IPVS-IPS fd00::a',
      'KUBE-6-LOOP-BACK fd00:244::2,tcp:8080,fd00:244::2',
      'KUBE-6-NODE-PORT-TCP 30080',
      'KUBE-CLUSTER-IP 10.96.0.10,tcp:80',
      'KUBE-EXTERNAL-IP 192.0.2.1,tcp:80',
      'KUBE-IPVS-IPS 10.96.0.10',
      'KUBE-IPVS-IPS 192.0.2.1',
      'KUBE-LOOP-BACK 10.244.0.1,tcp:8080,10.244.0.1',
      'KUBE-NODE-PORT-TCP 30080',
    ]);
    expect(c.addresses).toEqual(['10.96.0.10', '192.0.2.1', 'fd00::a', '2001:db8::1']);
  });

  it('categorises each family on its own (IPv6 falls back to serving-terminating while IPv4 is ready)', () => {
    const c = desiredForService(ds, [ep('10.244.0.1'), ep('fd00:244::1', 'T'), ep('fd00:244::2', 'N')], ctx());
    expect(dests(c, 'tcp/[fd00::a]:80')).toBe('fd00:244::1:8080');
  });

  it('a single-stack IPv6 Service gets nothing for IPv4 addresses', () => {
    const c = desiredForService(svc({ ...ds, clusterIPs: ['fd00::a'] }), list, ctx());
    expect(Object.keys(vss(c))).toEqual(['tcp/[fd00::a]:80', 'tcp/[2001:db8::1]:80', 'tcp/[fd00:1::10]:30080']);
  });
});

describe('desiredForService: session affinity and schedulers', () => {
  it('session affinity: persistent with the timeout and a full netmask, on every virtual server', () => {
    const c = desiredForService(svc({ clusterIPs: ['10.96.0.10', 'fd00::a'], sessionAffinitySeconds: 600, type: 'NodePort', nodePort: 30080 }), [], ctx());
    expect(Object.values(vss(c))).toEqual(['rr [persistent] 600/32: ', 'rr [persistent] 600/32: ', 'rr [persistent] 600/128: ', 'rr [persistent] 600/128: ']);
  });

  it.each([
    ['configured default', {}, {}, 'rr []'],
    ['--ipvs-scheduler lc', { ipvs: { scheduler: 'lc' } }, {}, 'lc []'],
    ['annotation wins', { ipvs: { scheduler: 'lc' } }, { scheduler: 'sh', schedulerFlags: ['sh-fallback', 'sh-port'] }, 'sh [sh-fallback,sh-port]'],
    ['flags with affinity', {}, { scheduler: 'mh', schedulerFlags: ['mh-fallback'], sessionAffinitySeconds: 10 }, 'mh [persistent,mh-fallback]'],
    ['--ipvs-scheduler mh adds mh-port as kube-proxy, and mh-fallback', { ipvs: { scheduler: 'mh' } }, {}, 'mh [mh-fallback,mh-port]'],
    ['annotated mh: mh-fallback only', {}, { scheduler: 'mh' }, 'mh [mh-fallback]'],
    ['default sh with annotated sh flags, and sh-fallback', { ipvs: { scheduler: 'sh' } }, { schedulerFlags: ['sh-port'] }, 'sh [sh-fallback,sh-port]'],
    ['annotated sh: sh-fallback always (a draining server must not refuse its hashed clients)', {}, { scheduler: 'sh' }, 'sh [sh-fallback]'],
  ] as const)('%s', (_n, config, o, want) => {
    const c = desiredForService(svc(o as Partial<ServicePortInfo>), [], ctx(config as ConfigInput));
    expect(vss(c)['tcp/10.96.0.10:80']!.split(' ').slice(0, 2).join(' ')).toBe(want);
  });

  it('flags that do not fit the default scheduler: an error and nothing programmed', () => {
    const c = desiredForService(svc({ schedulerFlags: ['sh-port'] }), EPS, ctx());
    expect(c.errors).toEqual([{ object: 'Service ns/web', reason: 'scheduler flag "sh-port" needs scheduler sh, not rr (annotation kube-ipvs-proxy.io/scheduler-flags)' }]);
    expect([c.virtualServers, c.ipsetEntries, c.addresses]).toEqual([[], [], []]);
  });
});

describe('desiredForService: internal clients of eTP Local external and LB IPs (kubernetes#93456, #115931)', () => {
  const base = { type: 'LoadBalancer' as const, nodePort: 30080, clusterIPs: ['10.96.0.10', 'fd00::a'], externalIPs: ['192.0.2.1', '2001:db8::1'], loadBalancerIPs: ['198.51.100.1', '2001:db8::2'] };
  const redirects = (c: ServiceContribution): string[] =>
    (c.redirects ?? []).map((r) => `${r.family} ${r.protocol} ${r.address}:${r.port} -> ${r.clusterIP}${r.sourceRanges ? ' ranges' : ''} (${r.service})`);
  const list = [ep('10.244.0.1', 'L'), ep('10.244.0.2'), ep('fd00:244::1'), ep('fd00:244::2')];

  const CASES: Array<[string, Partial<ServicePortInfo>, string[]]> = [
    ['eTP Cluster: none', {}, []],
    ['ClusterIP only, eTP Local (no external VIP): none', { type: 'ClusterIP', nodePort: null, externalIPs: [], loadBalancerIPs: [], externalPolicyLocal: true }, []],
    ['eTP Local: each external and LB IP of each family, to the cluster IP of its family (no node port)', { externalPolicyLocal: true }, [
      'ipv4 tcp 192.0.2.1:80 -> 10.96.0.10 (ns/web:http)',
      'ipv4 tcp 198.51.100.1:80 -> 10.96.0.10 (ns/web:http)',
      'ipv6 tcp 2001:db8::1:80 -> fd00::a (ns/web:http)',
      'ipv6 tcp 2001:db8::2:80 -> fd00::a (ns/web:http)',
    ]],
    ['eTP Local with source ranges: only LB IPs are marked', { externalPolicyLocal: true, clusterIPs: ['10.96.0.10'], loadBalancerSourceRanges: ['203.0.113.0/24'], protocol: 'udp' }, [
      'ipv4 udp 192.0.2.1:80 -> 10.96.0.10 (ns/web:http)',
      'ipv4 udp 198.51.100.1:80 -> 10.96.0.10 ranges (ns/web:http)',
    ]],
    ['an IP both external and LB: once', { externalPolicyLocal: true, clusterIPs: ['10.96.0.10'], externalIPs: ['192.0.2.1', '192.0.2.1'], loadBalancerIPs: ['192.0.2.1'] }, [
      'ipv4 tcp 192.0.2.1:80 -> 10.96.0.10 (ns/web:http)',
    ]],
    ['an IP both external and LB with source ranges: once, held to the ranges', { externalPolicyLocal: true, clusterIPs: ['10.96.0.10'], externalIPs: ['192.0.2.1'], loadBalancerIPs: ['192.0.2.1'], loadBalancerSourceRanges: ['203.0.113.0/24'] }, [
      'ipv4 tcp 192.0.2.1:80 -> 10.96.0.10 ranges (ns/web:http)',
    ]],
  ];
  it.each(CASES)('%s', (_, o, want) => {
    expect(redirects(desiredForService(svc({ ...base, ...o }), list, ctx()))).toEqual(want);
  });

  it('eTP Local: the VIPs keep the local endpoints (none here for IPv6), the cluster IPs every endpoint the redirect lands on', () => {
    const c = desiredForService(svc({ ...base, externalPolicyLocal: true }), list, ctx());
    expect(dests(c, 'tcp/10.96.0.10:80')).toBe('10.244.0.1:8080 10.244.0.2:8080');
    expect(dests(c, 'tcp/[fd00::a]:80')).toBe('fd00:244::1:8080 fd00:244::2:8080');
    for (const id of ['tcp/192.0.2.1:80', 'tcp/198.51.100.1:80']) expect(dests(c, id)).toBe('10.244.0.1:8080');
    for (const id of ['tcp/[2001:db8::1]:80', 'tcp/[2001:db8::2]:80']) expect(dests(c, id)).toBe('');
  });
});

describe('desiredForService: output is valid kernel input', () => {
  const everything = svc({
    type: 'LoadBalancer', clusterIPs: ['10.96.0.10', 'fd00::a'], nodePort: 30080, healthCheckNodePort: 32000,
    externalIPs: ['192.0.2.1', '2001:db8::1'], loadBalancerIPs: ['198.51.100.1', '2001:db8::2'],
    loadBalancerSourceRanges: ['192.168.0.0/16', '203.0.113.0/24', '2001:db8:1::/48', 'fd00:1::10/128'],
    externalPolicyLocal: true, sessionAffinitySeconds: 300,
  });
  const list = [ep('10.244.0.1', 'L'), ep('10.244.0.2'), ep('fd00:244::1', 'L'), ep('fd00:244::2', 'T')];

  it('fills every owned set of both families; every entry parses for its set and is printed back identically', () => {
    const touched = new Set<string>();
    for (const protocol of ['tcp', 'udp', 'sctp'] as const) {
      for (const externalPolicyLocal of [false, true]) {
        const c = desiredForService({ ...everything, protocol, externalPolicyLocal, name: { ...everything.name, protocol } }, list, ctx());
        for (const { set, entry } of c.ipsetEntries) {
          const owned = ownedSet(set);
          expect(owned, set).toBeDefined();
          const { type, family = 'inet' } = owned!.spec;
          expect(formatEntry(type, parseEntry(type, family, entry)), `${set} ${entry}`).toBe(entry);
          touched.add(set);
        }
      }
    }
    expect([...touched].sort()).toEqual(OWNED_SETS.map((s) => s.spec.name).sort());
  });

  it('every virtual server and real server passes the IPVS client validation', () => {
    const c = desiredForService(everything, list, ctx());
    expect(c.virtualServers).toHaveLength(8); // per family: cluster IP, external IP, LB IP, one NodePort address
    for (const { service, destinations } of c.virtualServers) {
      expect(virtualServiceSchema.safeParse(service).success, serviceId(service)).toBe(true);
      for (const d of destinations) expect(destinationSchema.safeParse(d).success).toBe(true);
    }
  });

  it('is pure: the same input gives the same output and inputs are not modified', () => {
    const frozen = structuredClone(everything);
    const a = desiredForService(everything, list, ctx());
    const b = desiredForService(everything, list, ctx());
    expect(a).toEqual(b);
    expect(everything).toEqual(frozen);
  });
});
