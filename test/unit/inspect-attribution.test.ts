// inspect's attribution: the /desired document, its join with the kernel dump, filters, table.
import { describe, expect, it } from 'vitest';

import { main } from '../../src/cli.js';
import { formatInspect, gatherInspect, type InspectReport, type InspectSources } from '../../src/inspect.js';
import { filterServices, joinDesired, type InspectService } from '../../src/inspect/join.js';
import type { ServiceWithDestinations } from '../../src/kernel/ipvs/client.js';
import type { Destination, VirtualService } from '../../src/kernel/ipvs/types.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import type { EndpointInfo, ServicePortInfo } from '../../src/model/service.js';
import { desiredStateDoc, parsePortKey, type DesiredView } from '../../src/server/desired.js';

const svc = (name: string, over: Partial<ServicePortInfo> = {}): ServicePortInfo => ({
  name: { namespace: 'demo', name, port: 'http', protocol: 'tcp' }, type: 'ClusterIP', clusterIPs: ['10.96.0.10'], port: 80, protocol: 'tcp',
  nodePort: null, externalIPs: [], loadBalancerIPs: [], loadBalancerSourceRanges: [], externalPolicyLocal: false, internalPolicyLocal: false,
  healthCheckNodePort: null, sessionAffinitySeconds: null, scheduler: null, schedulerFlags: [], ...over,
});
const ep = (address: string, over: Partial<EndpointInfo> = {}): EndpointInfo => ({
  address, port: 8080, family: 'ipv4', ready: true, serving: true, terminating: false, nodeName: 'node-a', zone: null, isLocal: true, ...over,
});
const vs = (address: string, port: number, scheduler = 'rr'): VirtualService => ({
  family: 'ipv4', protocol: 'tcp', address, port, fwmark: null, scheduler, flags: [], timeout: 0, netmask: 32,
});
const dest = (address: string, weight = 1): Destination => ({ address, port: 8080, forward: 'masq', weight, upperThreshold: 0, lowerThreshold: 0 });

/** web: NodePort 30080 + external IP, annotated wlc; term: one serving-terminating endpoint; 10.244.2.2 of web drains. */
function view(): DesiredView {
  const web = svc('web', { type: 'NodePort', nodePort: 30080, externalIPs: ['10.250.0.100'], externalPolicyLocal: true, scheduler: 'wlc' });
  const term = svc('term', { clusterIPs: ['10.96.0.11'], sessionAffinitySeconds: 600 });
  const webKey = 'demo/web:http/tcp';
  const termKey = 'demo/term:http/tcp';
  const vsOf = (v: VirtualService, d: Destination[], owner: string) => ({ service: v, destinations: d, owner });
  return {
    virtualServers: new Map([
      ['tcp/10.96.0.10:80', vsOf(vs('10.96.0.10', 80, 'wlc'), [dest('10.244.1.2'), dest('10.244.3.2')], webKey)],
      ['tcp/10.250.0.100:80', vsOf(vs('10.250.0.100', 80, 'wlc'), [dest('10.244.1.2')], webKey)],
      ['tcp/10.250.0.1:30080', vsOf(vs('10.250.0.1', 30080, 'wlc'), [dest('10.244.1.2')], webKey)],
      ['tcp/10.96.0.11:80', vsOf({ ...vs('10.96.0.11', 80), flags: ['persistent'], timeout: 600 }, [dest('10.244.1.2')], termKey)],
    ]),
    state: {
      services: new Map([[webKey, web], [termKey, term]]),
      endpoints: new Map([
        [webKey, [ep('10.244.1.2'), ep('10.244.3.2', { nodeName: 'node-b', isLocal: false })]],
        [termKey, [ep('10.244.1.2', { ready: false, terminating: true })]],
      ]),
      node: null,
    },
    draining: new Map([['tcp/10.96.0.10:80', new Map([['10.244.2.2:8080', { since: 1_700_000_000_000 }]])]]),
  };
}

const kdest = (address: string, weight = 1, active = 0): ServiceWithDestinations['destinations'][number] => ({
  ...dest(address, weight), activeConns: active, inactiveConns: 0, persistConns: 0,
});

/** The kernel: web's cluster IP with its draining server and wrong weight on 10.244.3.2; the node port under rr; no external IP; a stray VS. */
function kernel(): ServiceWithDestinations[] {
  return [
    { ...vs('10.96.0.10', 80, 'wlc'), destinations: [kdest('10.244.1.2'), kdest('10.244.2.2', 0, 1), kdest('10.244.3.2', 5)] },
    { ...vs('10.250.0.1', 30080, 'rr'), destinations: [kdest('10.244.1.2')] },
    { ...vs('10.96.0.11', 80), flags: ['persistent'], timeout: 600, destinations: [kdest('10.244.1.2')] },
    { ...vs('10.96.9.9', 53), destinations: [kdest('10.244.9.9')] },
  ];
}

function sources(desired: InspectSources['desired']): InspectSources {
  return {
    ipvs: async () => ({ available: true, client: { info: async () => ({ version: '1.2.1', connTableSize: 4096 }), dumpAll: async () => kernel(), close: () => {} } as never }),
    ipset: async () => ({ list: async () => [], close: () => {} }) as never,
    link: () => new FakeLinkClient(),
    iptables: async () => ({ backend: 'legacy', nat: [], filter: [] }),
    ...(desired ? { desired } : {}),
  };
}

const fromView = { source: 'http://127.0.0.1:10249/desired', read: async () => JSON.parse(JSON.stringify(desiredStateDoc(view(), 'node-a', 'rr'))) };

describe('the /desired document', () => {
  it('attributes each virtual server: Service port, type, VIP role, policies, scheduler origin, endpoint states, draining', () => {
    const doc = desiredStateDoc(view(), 'node-a', 'rr');
    expect(doc).toMatchObject({ kind: 'DesiredState', version: 1, node: 'node-a', defaultScheduler: 'rr' });
    expect(doc.virtualServers.map((v) => [v.id, v.owner?.vip])).toEqual([
      ['tcp/10.250.0.100:80', 'externalIP'], ['tcp/10.250.0.1:30080', 'nodePort'], ['tcp/10.96.0.10:80', 'clusterIP'], ['tcp/10.96.0.11:80', 'clusterIP'],
    ]);
    const web = doc.virtualServers.find((v) => v.id === 'tcp/10.96.0.10:80')!;
    expect(web.owner).toEqual({
      service: 'demo/web:http', namespace: 'demo', name: 'web', portName: 'http', protocol: 'tcp', type: 'NodePort', vip: 'clusterIP',
      externalTrafficPolicy: 'Local', internalTrafficPolicy: 'Cluster', scheduler: 'wlc', schedulerSource: 'annotation', sessionAffinitySeconds: null,
    });
    expect(web.destinations.map((d) => [d.address, d.state, d.node, d.local])).toEqual([['10.244.1.2', 'ready', 'node-a', true], ['10.244.3.2', 'ready', 'node-b', false]]);
    expect(web.draining).toEqual([{ address: '10.244.2.2', port: 8080, since: 1_700_000_000_000 }]);
    const term = doc.virtualServers.find((v) => v.id === 'tcp/10.96.0.11:80')!;
    expect(term.owner).toMatchObject({ scheduler: 'rr', schedulerSource: 'flag', sessionAffinitySeconds: 600, service: 'demo/term:http' });
    expect(term.destinations[0]!.state).toBe('serving-terminating');
  });

  it('port keys split back into their parts', () => {
    expect(parsePortKey('kube-system/kube-dns:dns-tcp/tcp')).toEqual({ namespace: 'kube-system', name: 'kube-dns', portName: 'dns-tcp', protocol: 'tcp' });
    expect(parsePortKey('a/b:/udp')).toEqual({ namespace: 'a', name: 'b', portName: '', protocol: 'udp' });
  });
});

describe('joining the kernel with the desired state', () => {
  it('reports missing, extra and different, and a draining server as expected', async () => {
    const r = await gatherInspect(sources(fromView));
    expect(r.desired).toEqual({ available: true, source: 'http://127.0.0.1:10249/desired', node: 'node-a', defaultScheduler: 'rr' });
    const byAddr = new Map((r.ipvs.available ? r.ipvs.services : []).map((s) => [`${s.address}:${s.port}`, s]));
    expect([...byAddr.keys()]).toEqual(['10.250.0.100:80', '10.250.0.1:30080', '10.96.0.10:80', '10.96.0.11:80', '10.96.9.9:53']);
    expect(byAddr.get('10.250.0.100:80')).toMatchObject({ status: 'missing', destinations: [{ address: '10.244.1.2', status: 'missing', state: 'ready' }] });
    expect(byAddr.get('10.250.0.1:30080')).toMatchObject({ status: 'different', differences: ['scheduler: want wlc, kernel rr'] });
    expect(byAddr.get('10.96.0.10:80')!.destinations).toEqual([
      { address: '10.244.1.2', port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, state: 'ready', node: 'node-a', local: true, status: 'ok' },
      { address: '10.244.3.2', port: 8080, forward: 'masq', weight: 5, upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, state: 'ready', node: 'node-b', local: false, status: 'different', differences: ['weight: want 1, kernel 5'] },
      { address: '10.244.2.2', port: 8080, forward: 'masq', weight: 0, upperThreshold: 0, lowerThreshold: 0, activeConns: 1, inactiveConns: 0, state: 'draining', drainingSince: 1_700_000_000_000, status: 'ok' },
    ]);
    expect(byAddr.get('10.96.0.10:80')!.status).toBe('different');
    expect(byAddr.get('10.96.0.11:80')).toMatchObject({ status: 'ok', owner: { service: 'demo/term:http' } });
    expect(byAddr.get('10.96.9.9:53')).toMatchObject({ status: 'extra', owner: null, destinations: [{ status: 'extra' }] });
  });

  it('scheduler flags compare as the kernel bits they are', () => {
    const want = { ...vs('10.0.0.1', 80, 'sh'), flags: ['sh-port' as const] };
    const doc = { kind: 'DesiredState' as const, version: 1 as const, node: 'n', defaultScheduler: 'rr', virtualServers: [{ id: 'tcp/10.0.0.1:80', service: want, owner: null, destinations: [], draining: [] }] };
    const have: InspectService = { ...vs('10.0.0.1', 80, 'sh'), flags: ['flag-2'], destinations: [] };
    expect(joinDesired([have], doc)[0]!.status).toBe('ok');
  });

  it('filters by Service and by VIP (with or without port)', async () => {
    const r = await gatherInspect(sources(fromView), { service: 'demo/term' });
    expect(r.ipvs.available && r.ipvs.services.map((s) => s.address)).toEqual(['10.96.0.11']);
    const all = joinDesired((await gatherInspect(sources(undefined))).ipvs.available ? kernel().map((s) => ({ ...s, destinations: [] })) : [], desiredStateDoc(view(), 'n', 'rr'));
    expect(filterServices(all, { vip: { address: '10.250.0.1', port: null } }).map((s) => s.port)).toEqual([30080]);
    expect(filterServices(all, { vip: { address: '10.96.0.10', port: 81 } })).toEqual([]);
  });

  it('without the daemon: the kernel view as before, and why', async () => {
    const down = { source: 'http://127.0.0.1:1/desired', read: async () => { throw new Error('http://127.0.0.1:1/desired: ECONNREFUSED'); } };
    const r = await gatherInspect(sources(down));
    expect(r.desired).toEqual({ available: false, source: 'http://127.0.0.1:1/desired', reason: 'http://127.0.0.1:1/desired: ECONNREFUSED' });
    const s = r.ipvs.available ? r.ipvs.services : [];
    expect(s).toHaveLength(4);
    expect(s.every((v) => v.owner === undefined && v.status === undefined && v.destinations.every((d) => d.state === undefined))).toBe(true);
    expect(formatInspect(r)).toContain('desired state: unavailable (http://127.0.0.1:1/desired: ECONNREFUSED); kernel view only\n');
    const filtered = await gatherInspect(sources(down), { service: 'demo/web' });
    expect(filtered.ipvs.available && filtered.ipvs.services).toEqual([]);
    expect(filtered.errors).toEqual([{ section: 'filter', message: "--service demo/web: needs the daemon's desired state, which is unavailable" }]);
  });

  it('the table shows owner, endpoint state and disagreements; --json the same as data', async () => {
    const text = formatInspect(await gatherInspect(sources(fromView)), { ipvsOnly: true });
    expect(text).toContain('TCP  10.96.0.10:80 wlc  demo/web:http NodePort clusterIP eTP=Local iTP=Cluster scheduler=wlc(annotation)  [DIFFERENT]\n');
    expect(text).toContain('  -> 10.244.3.2:8080              Masq    5      0          0  ready remote(node-b)  [DIFFERENT: weight: want 1, kernel 5]\n');
    expect(text).toContain('  -> 10.244.2.2:8080              Masq    0      1          0  draining since 2023-11-14T22:13:20.000Z, 1 conns left\n');
    expect(text).toContain('TCP  10.250.0.100:80 wlc  demo/web:http NodePort externalIP eTP=Local iTP=Cluster scheduler=wlc(annotation)  [MISSING: wanted, not in the kernel]\n');
    expect(text).toContain('TCP  10.96.9.9:53 rr  (no owner)  [EXTRA: not wanted by the daemon]\n');
    expect(text).not.toContain('ipsets');
    const out: string[] = [];
    expect(await main(['inspect', '--json', '--vip', '10.96.0.11'], { stdout: (t) => out.push(t), stderr: () => {}, inspectSources: sources(fromView) })).toBe(0);
    const r = JSON.parse(out.join('')) as InspectReport;
    expect(r.ipvs.available && r.ipvs.services).toEqual([{
      family: 'ipv4', protocol: 'tcp', address: '10.96.0.11', port: 80, fwmark: null, scheduler: 'rr', flags: ['persistent'], timeout: 600, netmask: 32,
      destinations: [{ address: '10.244.1.2', port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0, state: 'serving-terminating', node: 'node-a', local: true, status: 'ok' }],
      owner: { service: 'demo/term:http', namespace: 'demo', name: 'term', portName: 'http', protocol: 'tcp', type: 'ClusterIP', vip: 'clusterIP', externalTrafficPolicy: 'Cluster', internalTrafficPolicy: 'Cluster', scheduler: 'rr', schedulerSource: 'flag', sessionAffinitySeconds: 600 },
      status: 'ok',
    }]);
  });
});
