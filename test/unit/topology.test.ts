import { describe, expect, it } from 'vitest';

import type { EndpointInfo, ServicePortInfo } from '../../src/model/service.js';
import { categorizeEndpoints, externallyAccessible, usesClusterEndpoints, usesLocalEndpoints } from '../../src/proxy/topology.js';

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
