import { describe, expect, it } from 'vitest';

import { ConfigSchema } from '../../src/config.js';
import { endpointSliceSchema, nodeSchema, serviceSchema } from '../../src/model/k8s-schemas.js';
import type { EndpointInfo, ServicePortInfo } from '../../src/model/service.js';
import { ChangeTracker } from '../../src/proxy/changetracker.js';
import { serviceRules } from '../../src/proxy/iptables/rules.js';
import { desiredForService } from '../../src/proxy/ipvs/desired.js';
import {
  categorizeEndpoints,
  externallyAccessible,
  nodeZone,
  topologyMode,
  topologyRequested,
  usesClusterEndpoints,
  usesLocalEndpoints,
} from '../../src/proxy/topology.js';

const NODE = 'node-a';

function svc(o: Partial<ServicePortInfo> = {}): ServicePortInfo {
  return {
    name: { namespace: 'default', name: 'web', port: 'http', protocol: 'tcp' },
    type: 'ClusterIP', clusterIPs: ['10.96.0.10'], port: 80, protocol: 'tcp', nodePort: null,
    externalIPs: [], loadBalancerIPs: [], loadBalancerSourceRanges: [],
    externalPolicyLocal: false, internalPolicyLocal: false, healthCheckNodePort: null,
    sessionAffinitySeconds: null, scheduler: null, schedulerFlags: [], ...o,
  };
}

/** `r` ready, `t` serving-terminating, `x` terminating not serving, `n` not ready; `L` local. */
function eps(spec: string): EndpointInfo[] {
  return spec.split(' ').filter(Boolean).map((s, i) => {
    const [state, where] = [s[0]!, s[1]];
    const local = where === 'L';
    return {
      address: `10.244.0.${i + 1}`, port: 8080, family: 'ipv4',
      ready: state === 'r', serving: state === 'r' || state === 't', terminating: state === 't' || state === 'x',
      nodeName: local ? NODE : 'node-b', zone: null, isLocal: local,
    };
  });
}

const addrs = (list: readonly EndpointInfo[]): string => list.map((e) => e.address.split('.').pop()).join(',');

describe('traffic policy predicates', () => {
  it.each([
    ['ClusterIP only', {}, false, true, false],
    ['NodePort', { nodePort: 30080 }, true, true, false],
    ['externalIP', { externalIPs: ['1.2.3.4'] }, true, true, false],
    ['LB', { loadBalancerIPs: ['5.6.7.8'] }, true, true, false],
    ['iTP Local, internal only', { internalPolicyLocal: true }, false, false, true],
    ['iTP Local, NodePort', { internalPolicyLocal: true, nodePort: 30080 }, true, true, true],
    ['eTP Local, NodePort', { externalPolicyLocal: true, nodePort: 30080 }, true, true, true],
    ['eTP Local, not reachable externally', { externalPolicyLocal: true }, false, true, false],
  ] as const)('%s', (_n, o, ext, cluster, local) => {
    const s = svc(o as Partial<ServicePortInfo>);
    expect([externallyAccessible(s), usesClusterEndpoints(s), usesLocalEndpoints(s)]).toEqual([ext, cluster, local]);
  });
});

describe('categorizeEndpoints', () => {
  // [name, service, endpoints, cluster, local, allReachable, hasAny, hasLocalReady, hasLocalServingTerminating]
  const cases: Array<[string, Partial<ServicePortInfo>, string, string, string, string, boolean, boolean, boolean]> = [
    ['ready only', {}, 'r r n', '1,2', '', '1,2', true, false, false],
    ['ready win over serving-terminating', {}, 'r t', '1', '', '1', true, false, false],
    ['serving-terminating when none ready', {}, 't n t x', '1,3', '', '1,3', true, false, false],
    ['nothing usable', {}, 'n x', '', '', '', false, false, false],
    ['no endpoints', {}, '', '', '', '', false, false, false],
    ['iTP Local: local ready only', { internalPolicyLocal: true }, 'rL r nL', '', '1', '1', true, true, false],
    ['iTP Local: no local → empty, still hasAny', { internalPolicyLocal: true }, 'r r', '', '', '', true, false, false],
    ['iTP Local: local serving-terminating fallback', { internalPolicyLocal: true }, 'tL r', '', '1', '1', true, false, true],
    ['iTP Local: local ready beats local terminating', { internalPolicyLocal: true }, 'tL rL', '', '2', '2', true, true, false],
    ['eTP Local NodePort: both lists', { externalPolicyLocal: true, nodePort: 30080 }, 'rL r nL', '1,2', '1', '1,2', true, true, false],
    ['eTP Local: cluster ready, local only terminating → union', { externalPolicyLocal: true, nodePort: 30080 }, 'tL r', '2', '1', '2,1', true, false, true],
    ['eTP Local: cluster falls back per list', { externalPolicyLocal: true, nodePort: 30080 }, 't tL', '1,2', '2', '1,2', true, false, true],
  ];
  it.each(cases)('%s', (_n, o, spec, cluster, local, all, any, lr, lst) => {
    const r = categorizeEndpoints(eps(spec), svc(o), NODE);
    expect([addrs(r.clusterEndpoints), addrs(r.localEndpoints), addrs(r.allReachable)]).toEqual([cluster, local, all]);
    expect([r.hasAnyEndpoints, r.hasLocalReady, r.hasLocalServingTerminating]).toEqual([any, lr, lst]);
  });

  it('treats an endpoint on nodeName as local even when isLocal was not set', () => {
    const list = eps('r r').map((e, i) => ({ ...e, isLocal: false, nodeName: i === 1 ? NODE : 'other' }));
    const r = categorizeEndpoints(list, svc({ internalPolicyLocal: true }), NODE);
    expect(addrs(r.localEndpoints)).toBe('2');
  });
});

/** An endpoint `ip:80` with optional hints; ready unless told otherwise. */
function e(ip: string, o: { zones?: string[]; nodes?: string[]; ready?: boolean; serving?: boolean; terminating?: boolean; local?: boolean } = {}): EndpointInfo {
  const ready = o.ready ?? true;
  return {
    address: ip, port: 80, family: 'ipv4', ready, serving: o.serving ?? ready, terminating: o.terminating ?? false,
    nodeName: o.local ? NODE : 'node-b', zone: null, isLocal: o.local ?? false, zoneHints: o.zones ?? [], nodeHints: o.nodes ?? [],
  };
}
const ids = (list: readonly EndpointInfo[]): string[] => list.map((x) => `${x.address}:${x.port}`).sort();
const ZA = ['zone-a'];
const ZB = ['zone-b'];
const ZC = ['zone-c'];
const FOUR = (o = {}) => [e('10.1.2.3', { zones: ZA, ...o }), e('10.1.2.4', { zones: ZB, ...o }), e('10.1.2.5', { zones: ZC, ...o }), e('10.1.2.6', { zones: ZA, ...o })];
const AUTO = { hintsAnnotation: 'Auto' };

interface TopologyCase {
  name: string;
  zone?: string;
  svc: Partial<ServicePortInfo>;
  eps: EndpointInfo[];
  /** null: the service never uses this kind of endpoints. */
  cluster: string[] | null;
  local: string[] | null;
  /** Only when both lists are in use. */
  all?: string[];
  onlyRemote?: boolean;
}

// kube-proxy's TestCategorizeEndpoints (pkg/proxy/topology_test.go), the topology cases, with the
// Service asking for topology (annotation or trafficDistribution) as kube-proxy <= 1.32 requires.
const TOPOLOGY: TopologyCase[] = [
  { name: 'all endpoints hinted, node zone labelled, endpoints for the zone', zone: 'zone-a', svc: AUTO, eps: FOUR(), cluster: ['10.1.2.3:80', '10.1.2.6:80'], local: null },
  { name: 'annotation auto', zone: 'zone-a', svc: { hintsAnnotation: 'auto' }, eps: FOUR(), cluster: ['10.1.2.3:80', '10.1.2.6:80'], local: null },
  { name: 'any other non-empty annotation value', zone: 'zone-a', svc: { hintsAnnotation: 'PreferZone' }, eps: FOUR(), cluster: ['10.1.2.3:80', '10.1.2.6:80'], local: null },
  { name: 'annotation disabled: hints ignored', zone: 'zone-a', svc: { hintsAnnotation: 'disabled' }, eps: FOUR(), cluster: ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.5:80', '10.1.2.6:80'], local: null },
  { name: 'annotation Disabled: hints ignored', zone: 'zone-a', svc: { hintsAnnotation: 'Disabled' }, eps: FOUR(), cluster: ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.5:80', '10.1.2.6:80'], local: null },
  { name: 'no annotation, no trafficDistribution: hints ignored', zone: 'zone-a', svc: {}, eps: FOUR(), cluster: ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.5:80', '10.1.2.6:80'], local: null },
  { name: 'trafficDistribution PreferClose', zone: 'zone-a', svc: { trafficDistribution: 'PreferClose' }, eps: FOUR(), cluster: ['10.1.2.3:80', '10.1.2.6:80'], local: null },
  { name: 'trafficDistribution PreferSameZone', zone: 'zone-a', svc: { trafficDistribution: 'PreferSameZone' }, eps: FOUR(), cluster: ['10.1.2.3:80', '10.1.2.6:80'], local: null },
  { name: 'trafficDistribution overrides a disabled annotation', zone: 'zone-a', svc: { trafficDistribution: 'PreferClose', hintsAnnotation: 'disabled' }, eps: FOUR(), cluster: ['10.1.2.3:80', '10.1.2.6:80'], local: null },
  {
    name: 'externalTrafficPolicy: Local, topology ignored for Local endpoints', zone: 'zone-a', svc: { ...AUTO, externalPolicyLocal: true, nodePort: 8080 },
    eps: [e('10.1.2.3', { zones: ZA, local: true }), e('10.1.2.4', { zones: ZB, local: true }), e('10.1.2.5', { zones: ZC }), e('10.1.2.6', { zones: ZA })],
    cluster: ['10.1.2.3:80', '10.1.2.6:80'], local: ['10.1.2.3:80', '10.1.2.4:80'], all: ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.6:80'],
  },
  {
    name: 'internalTrafficPolicy: Local, topology ignored for Local endpoints', zone: 'zone-a', svc: { ...AUTO, internalPolicyLocal: true, nodePort: 8080 },
    eps: [e('10.1.2.3', { zones: ZA, local: true }), e('10.1.2.4', { zones: ZB, local: true }), e('10.1.2.5', { zones: ZC }), e('10.1.2.6', { zones: ZA })],
    cluster: ['10.1.2.3:80', '10.1.2.6:80'], local: ['10.1.2.3:80', '10.1.2.4:80'], all: ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.6:80'],
  },
  { name: 'empty node labels', svc: AUTO, eps: [e('10.1.2.3', { zones: ZA })], cluster: ['10.1.2.3:80'], local: null },
  { name: 'empty zone label', zone: '', svc: AUTO, eps: [e('10.1.2.3', { zones: ZA })], cluster: ['10.1.2.3:80'], local: null },
  { name: 'node in different zone, no endpoint filtering', zone: 'zone-b', svc: AUTO, eps: [e('10.1.2.3', { zones: ZA })], cluster: ['10.1.2.3:80'], local: null },
  {
    name: 'unready endpoint', zone: 'zone-a', svc: AUTO,
    eps: [e('10.1.2.3', { zones: ZA }), e('10.1.2.4', { zones: ZB }), e('10.1.2.5', { zones: ZC }), e('10.1.2.6', { zones: ZA, ready: false })],
    cluster: ['10.1.2.3:80'], local: null,
  },
  {
    name: 'only unready endpoints in same zone (should not filter)', zone: 'zone-a', svc: AUTO,
    eps: [e('10.1.2.3', { zones: ZA, ready: false }), e('10.1.2.4', { zones: ZB }), e('10.1.2.5', { zones: ZC }), e('10.1.2.6', { zones: ZA, ready: false })],
    cluster: ['10.1.2.4:80', '10.1.2.5:80'], local: null,
  },
  {
    name: 'missing hints, no filtering applied', zone: 'zone-a', svc: AUTO,
    eps: [e('10.1.2.3', { zones: ZA }), e('10.1.2.4', { zones: ZB }), e('10.1.2.5'), e('10.1.2.6', { zones: ZA })],
    cluster: ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.5:80', '10.1.2.6:80'], local: null,
  },
  {
    name: 'an unready endpoint without hints does not stop filtering', zone: 'zone-a', svc: AUTO,
    eps: [e('10.1.2.3', { zones: ZA }), e('10.1.2.4', { zones: ZB }), e('10.1.2.5', { ready: false })],
    cluster: ['10.1.2.3:80'], local: null,
  },
  {
    name: 'multiple hints per endpoint, filtering includes any endpoint with zone included', zone: 'zone-c', svc: AUTO,
    eps: [
      e('10.1.2.3', { zones: ['zone-a', 'zone-b', 'zone-c'] }), e('10.1.2.4', { zones: ['zone-b', 'zone-c'] }),
      e('10.1.2.5', { zones: ['zone-b', 'zone-d'] }), e('10.1.2.6', { zones: ZC }),
    ],
    cluster: ['10.1.2.3:80', '10.1.2.4:80', '10.1.2.6:80'], local: null,
  },
  {
    name: 'conflicting topology and localness require merging allEndpoints', zone: 'zone-a', svc: { ...AUTO, externalPolicyLocal: true, nodePort: 8080 },
    eps: [e('10.0.0.0', { zones: ZA, local: true }), e('10.0.0.1', { zones: ZB, local: true }), e('10.0.0.2', { zones: ZA }), e('10.0.0.3', { zones: ZB })],
    cluster: ['10.0.0.0:80', '10.0.0.2:80'], local: ['10.0.0.0:80', '10.0.0.1:80'], all: ['10.0.0.0:80', '10.0.0.1:80', '10.0.0.2:80'],
  },
  {
    name: 'no ready endpoint: serving-terminating ones, hints ignored', zone: 'zone-a', svc: AUTO,
    eps: [e('10.1.2.3', { zones: ZA, ready: false, serving: true, terminating: true }), e('10.1.2.4', { zones: ZB, ready: false, serving: true, terminating: true })],
    cluster: ['10.1.2.3:80', '10.1.2.4:80'], local: null,
  },
  // PreferSameNode (kube-proxy 1.33+): node hints first, then zone hints.
  {
    name: 'every ready endpoint has node hints, one for this node: only it', zone: 'zone-a', svc: { trafficDistribution: 'PreferSameNode' },
    eps: [e('10.1.2.3', { zones: ZA, nodes: [NODE] }), e('10.1.2.4', { zones: ZA, nodes: ['node-b'] }), e('10.1.2.5', { zones: ZB, nodes: ['node-c'] })],
    cluster: ['10.1.2.3:80'], local: null,
  },
  {
    name: 'node hints but none for this node: zone hints', zone: 'zone-a', svc: { trafficDistribution: 'PreferSameNode' },
    eps: [e('10.1.2.3', { zones: ZA, nodes: ['node-x'] }), e('10.1.2.4', { zones: ZA, nodes: ['node-b'] }), e('10.1.2.5', { zones: ZB, nodes: ['node-c'] })],
    cluster: ['10.1.2.3:80', '10.1.2.4:80'], local: null,
  },
  {
    name: 'a node hint missing: zone hints', zone: 'zone-b', svc: { trafficDistribution: 'PreferSameNode' },
    eps: [e('10.1.2.3', { zones: ZA, nodes: [NODE] }), e('10.1.2.4', { zones: ZA }), e('10.1.2.5', { zones: ZB, nodes: ['node-c'] })],
    cluster: ['10.1.2.5:80'], local: null,
  },
  {
    name: 'node hints only, none for this node: every endpoint', zone: 'zone-a', svc: { trafficDistribution: 'PreferSameNode' },
    eps: [e('10.1.2.3', { nodes: ['node-x'] }), e('10.1.2.4', { nodes: ['node-b'] })],
    cluster: ['10.1.2.3:80', '10.1.2.4:80'], local: null,
  },
  {
    name: 'node hints and eTP Local: the local endpoint outside the hints is still reachable', zone: 'zone-a', svc: { trafficDistribution: 'PreferSameNode', externalPolicyLocal: true, nodePort: 8080 },
    eps: [e('10.1.2.3', { nodes: [NODE], local: true }), e('10.1.2.4', { nodes: ['node-b'], local: true }), e('10.1.2.5', { nodes: ['node-c'] })],
    cluster: ['10.1.2.3:80'], local: ['10.1.2.3:80', '10.1.2.4:80'], all: ['10.1.2.3:80', '10.1.2.4:80'],
  },
];

describe('categorizeEndpoints with topology hints (kube-proxy table)', () => {
  it.each(TOPOLOGY.map((c) => [c.name, c] as const))('%s', (_n, c) => {
    const r = categorizeEndpoints(c.eps, svc(c.svc), NODE, c.zone);
    expect(ids(r.clusterEndpoints)).toEqual(c.cluster ?? []);
    expect(ids(r.localEndpoints)).toEqual(c.local ?? []);
    const all = c.local === null ? c.cluster! : c.cluster === null ? c.local : c.all!;
    expect(ids(r.allReachable)).toEqual(all);
    expect(r.hasAnyEndpoints).toBe(all.length > 0 || Boolean(c.onlyRemote));
    expect(new Set(r.allReachable).size).toBe(r.allReachable.length);
  });

  it('topologyMode names the hints in use', () => {
    const s = svc({ trafficDistribution: 'PreferSameNode' });
    expect(topologyMode(s, [e('10.0.0.1', { zones: ZA, nodes: [NODE] })], NODE, 'zone-a')).toBe('PreferSameNode');
    expect(topologyMode(s, [e('10.0.0.1', { zones: ZA, nodes: ['x'] })], NODE, 'zone-a')).toBe('PreferSameZone');
    expect(topologyMode(s, [e('10.0.0.1', { zones: ZA, ready: false })], NODE, 'zone-a')).toBe('');
    expect(topologyMode(svc(), [e('10.0.0.1', { zones: ZA })], NODE, 'zone-a')).toBe('');
  });

  it('nodeZone reads topology.kubernetes.io/zone', () => {
    expect(nodeZone(null)).toBe('');
    expect(nodeZone({ name: NODE, addresses: [], labels: {} })).toBe('');
    expect(nodeZone({ name: NODE, addresses: [], labels: { 'topology.kubernetes.io/zone': 'zone-a' } })).toBe('zone-a');
  });

  it.each([
    ['Auto', undefined, true],
    ['', undefined, false],
    ['disabled', undefined, false],
    ['', 'PreferClose', true],
    ['', null, false],
  ] as const)('topologyRequested(annotation %j, trafficDistribution %j) = %s', (a, td, want) => {
    expect(topologyRequested(svc({ hintsAnnotation: a, ...(td !== undefined ? { trafficDistribution: td } : {}) }))).toBe(want);
  });
});

describe('the change tracker carries topology', () => {
  const service = (annotations: Record<string, string>, spec: Record<string, unknown> = {}) =>
    serviceSchema.parse({ metadata: { name: 'web', namespace: 'ns', annotations }, spec: { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }], ...spec } });
  const hinted = (zones: string[][], nodes: string[][] = []) =>
    endpointSliceSchema.parse({
      metadata: { name: 'web-1', namespace: 'ns', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      ports: [{ name: 'http', port: 8080 }],
      endpoints: zones.map((z, i) => ({
        addresses: [`10.244.0.${i + 1}`],
        hints: { forZones: z.map((name) => ({ name })), ...(nodes[i] ? { forNodes: nodes[i]!.map((name) => ({ name })) } : {}) },
      })),
    });
  const node = (zone: string | null, name = NODE) =>
    nodeSchema.parse({ metadata: { name, labels: zone === null ? {} : { 'topology.kubernetes.io/zone': zone } } });
  const KEY = 'ns/web:http/tcp';

  it('reads hints (sorted, deduplicated), trafficDistribution and the annotations (the deprecated one wins)', () => {
    const t = new ChangeTracker(NODE);
    t.onService('ns/web', service({ 'service.kubernetes.io/topology-mode': 'Auto', 'service.kubernetes.io/topology-aware-hints': 'disabled' }, { trafficDistribution: 'PreferClose' }));
    t.onEndpointSlice('ns/web-1', hinted([['zone-b', 'zone-a', 'zone-b'], []], [[NODE]]));
    const s = t.state().services.get(KEY)!;
    expect([s.hintsAnnotation, s.trafficDistribution]).toEqual(['disabled', 'PreferClose']);
    expect(t.state().endpoints.get(KEY)!.map((x) => [x.zoneHints, x.nodeHints])).toEqual([[['zone-a', 'zone-b'], [NODE]], [[], []]]);
    t.onService('ns/web', service({ 'service.kubernetes.io/topology-mode': 'Auto' }));
    expect([t.state().services.get(KEY)!.hintsAnnotation, t.state().services.get(KEY)!.trafficDistribution]).toEqual(['Auto', null]);
  });

  it('a change of the zone label re-syncs the hinted services only', () => {
    const t = new ChangeTracker(NODE);
    t.onService('ns/web', service({ 'service.kubernetes.io/topology-mode': 'Auto' }));
    t.onEndpointSlice('ns/web-1', hinted([['zone-a'], ['zone-b']]));
    t.onService('ns/plain', serviceSchema.parse({ metadata: { name: 'plain', namespace: 'ns' }, spec: { clusterIP: '10.96.0.11', ports: [{ name: 'http', port: 80 }] } }));
    t.onEndpointSlice('ns/plain-1', endpointSliceSchema.parse({
      metadata: { name: 'plain-1', namespace: 'ns', labels: { 'kubernetes.io/service-name': 'plain' } },
      addressType: 'IPv4', ports: [{ name: 'http', port: 8080 }], endpoints: [{ addresses: ['10.244.1.1'] }],
    }));
    t.takeChanged();
    t.onNode(node('zone-a'));
    expect([...t.takeChanged()]).toEqual([KEY]);
    t.onNode(node('zone-a'));
    t.onNode(node('zone-x', 'other-node'));
    expect([...t.takeChanged()]).toEqual([]);
    t.onNode(node('zone-b'));
    expect([...t.takeChanged()]).toEqual([KEY]);
    t.onNode(null);
    expect([...t.takeChanged()]).toEqual([KEY]);
  });
});

describe('both modes pick cluster endpoints by zone', () => {
  const s = svc({ ...AUTO, nodePort: 30080 });
  const list = [e('10.1.2.3', { zones: ZA }), e('10.1.2.4', { zones: ZA }), e('10.1.2.5', { zones: ZB })];
  const ipvs = (zone?: string) => {
    const c = desiredForService(s, list, { config: ConfigSchema.parse({}), nodeName: NODE, nodePortAddresses: ['192.168.0.10'], ...(zone !== undefined ? { zone } : {}) });
    return c.virtualServers.map((v) => v.destinations.map((d) => d.address).join(','));
  };
  const sepChains = (zone?: string) => {
    const r = serviceRules(s, list, {
      family: 'ipv4', nodeName: NODE, masqueradeAll: false, masqueradeMark: '0x4000', clusterCIDR: null,
      nodePortAddresses: null, nodeIPs: ['192.168.0.10'], largeCluster: false, dropInvalid: true, ...(zone !== undefined ? { zone } : {}),
    })!;
    return r.chains.filter((c) => c.name.startsWith('KUBE-SEP-')).length;
  };

  it('IPVS: every virtual server (cluster IP and NodePort) gets only the zone\'s real servers', () => {
    expect(ipvs('zone-a')).toEqual(['10.1.2.3,10.1.2.4', '10.1.2.3,10.1.2.4']);
    expect(ipvs('zone-b')).toEqual(['10.1.2.5', '10.1.2.5']);
    expect(ipvs('zone-c')).toEqual(['10.1.2.3,10.1.2.4,10.1.2.5', '10.1.2.3,10.1.2.4,10.1.2.5']);
    expect(ipvs()).toEqual(['10.1.2.3,10.1.2.4,10.1.2.5', '10.1.2.3,10.1.2.4,10.1.2.5']);
  });

  it('iptables: one KUBE-SEP chain per endpoint of the zone', () => {
    expect([sepChains('zone-a'), sepChains('zone-b'), sepChains('zone-c'), sepChains()]).toEqual([2, 1, 3, 3]);
  });
});
