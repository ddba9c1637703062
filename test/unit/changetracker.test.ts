import { describe, expect, it } from 'vitest';

import { type EndpointSlice, type Service } from '../../src/model/k8s.js';
import { endpointSliceSchema, nodeSchema, serviceSchema } from '../../src/model/k8s-schemas.js';
import { native } from '../../src/native/binding.js';
import { ChangeTracker } from '../../src/proxy/changetracker.js';
import { servicePortsOf } from '../../src/proxy/service-ports.js';
import { endpointsForService, sliceErrors } from '../../src/proxy/slice-endpoints.js';

const NODE = 'node-a';

type SpecIn = Record<string, unknown>;
function service(name: string, spec: SpecIn = {}, extra: { annotations?: Record<string, string>; status?: unknown } = {}): Service {
  return serviceSchema.parse({
    metadata: { name, namespace: 'ns', annotations: extra.annotations ?? {} },
    spec: { clusterIP: '10.96.0.10', ports: [{ name: 'http', port: 80 }], ...spec },
    status: extra.status,
  });
}

interface EpIn { ip: string; node?: string; ready?: boolean; serving?: boolean; terminating?: boolean; more?: string[] }
function slice(name: string, svc: string | null, endpoints: EpIn[], ports: unknown[] = [{ name: 'http', port: 8080 }], addressType = 'IPv4'): EndpointSlice {
  return endpointSliceSchema.parse({
    metadata: { name, namespace: 'ns', labels: svc === null ? {} : { 'kubernetes.io/service-name': svc } },
    addressType,
    ports,
    endpoints: endpoints.map((e) => ({
      addresses: [e.ip, ...(e.more ?? [])],
      nodeName: e.node,
      conditions: { ready: e.ready, serving: e.serving, terminating: e.terminating },
    })),
  });
}

describe('servicePortsOf', () => {
  it('gives one ServicePortInfo per port with kube-proxy defaults', () => {
    const { ports, errors } = servicePortsOf(
      service('web', { ports: [{ name: 'http', port: 80 }, { name: 'dns', port: 53, protocol: 'UDP' }, { name: 's', port: 9, protocol: 'SCTP' }] }),
    );
    expect(errors).toEqual([]);
    expect(ports.map((p) => [p.name, p.protocol, p.port])).toEqual([
      [{ namespace: 'ns', name: 'web', port: 'http', protocol: 'tcp' }, 'tcp', 80],
      [{ namespace: 'ns', name: 'web', port: 'dns', protocol: 'udp' }, 'udp', 53],
      [{ namespace: 'ns', name: 'web', port: 's', protocol: 'sctp' }, 'sctp', 9],
    ]);
    expect(ports[0]).toMatchObject({
      type: 'ClusterIP', clusterIPs: ['10.96.0.10'], nodePort: null, externalIPs: [], loadBalancerIPs: [],
      externalPolicyLocal: false, internalPolicyLocal: false, healthCheckNodePort: null,
      sessionAffinitySeconds: null, scheduler: null, schedulerFlags: [],
    });
  });

  it.each([
    ['headless (None)', { clusterIP: 'None' }],
    ['no cluster IP', { clusterIP: undefined }],
    ['empty cluster IP', { clusterIP: '' }],
    ['ExternalName', { type: 'ExternalName', externalName: 'example.com' }],
  ])('skips %s Services entirely, without error', (_n, spec) => {
    expect(servicePortsOf(service('x', spec))).toEqual({ ports: [], errors: [] });
  });

  it('takes both cluster IPs of a dual-stack Service, canonical', () => {
    const { ports } = servicePortsOf(service('ds', { clusterIPs: ['10.96.0.10', 'FD00:0:0::A'] }));
    expect(ports[0]!.clusterIPs).toEqual(['10.96.0.10', 'fd00::a']);
  });

  it.each([
    ['an invalid cluster IP', { clusterIP: '10.96.0.300' }, 'invalid cluster IP "10.96.0.300"'],
    ['two IPv4 cluster IPs', { clusterIPs: ['10.96.0.1', '10.96.0.2'] }, 'more than one ipv4 cluster IP'],
    ['an invalid source range', { type: 'LoadBalancer', loadBalancerSourceRanges: ['10.0.0.0/33'] }, 'invalid loadBalancerSourceRanges entry "10.0.0.0/33"'],
  ])('reports %s and gives no ports', (_n, spec, reason) => {
    expect(servicePortsOf(service('bad', spec))).toEqual({ ports: [], errors: [{ object: 'Service ns/bad', reason }] });
  });

  it('session affinity: default 10800 s, or the configured timeout', () => {
    expect(servicePortsOf(service('a', { sessionAffinity: 'ClientIP' })).ports[0]!.sessionAffinitySeconds).toBe(10800);
    const cfg = { sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } } };
    expect(servicePortsOf(service('a', cfg)).ports[0]!.sessionAffinitySeconds).toBe(60);
  });

  it('NodePort, externalIPs, LB ingress IPs and canonical source ranges', () => {
    const svc = service(
      'lb',
      {
        type: 'LoadBalancer', ports: [{ name: 'http', port: 80, nodePort: 30080 }], externalIPs: ['192.0.2.1', '192.0.2.1'],
        loadBalancerSourceRanges: [' 203.0.113.7/24', '2001:DB8::/32'], externalTrafficPolicy: 'Local', healthCheckNodePort: 32000,
      },
      { status: { loadBalancer: { ingress: [{ ip: '198.51.100.1' }, { hostname: 'lb.example.com' }, { ip: '2001:db8::1' }] } } },
    );
    const [p] = servicePortsOf(svc).ports;
    expect(p).toMatchObject({
      type: 'LoadBalancer', nodePort: 30080, externalIPs: ['192.0.2.1'], loadBalancerIPs: ['198.51.100.1', '2001:db8::1'],
      loadBalancerSourceRanges: ['203.0.113.0/24', '2001:db8::/32'], externalPolicyLocal: true, healthCheckNodePort: 32000,
    });
  });

  it.each([
    ['ClusterIP: nodePort ignored', { ports: [{ name: 'http', port: 80, nodePort: 30080 }] }, { nodePort: null }],
    ['NodePort eTP Local: no health check (LB only)', { type: 'NodePort', externalTrafficPolicy: 'Local', healthCheckNodePort: 32000 }, { externalPolicyLocal: true, healthCheckNodePort: null }],
    ['ClusterIP eTP Local without externalIPs: not local', { externalTrafficPolicy: 'Local' }, { externalPolicyLocal: false }],
    ['ClusterIP eTP Local with externalIPs: local', { externalTrafficPolicy: 'Local', externalIPs: ['192.0.2.1'] }, { externalPolicyLocal: true }],
    ['LB eTP Cluster: no health check', { type: 'LoadBalancer', healthCheckNodePort: 32000 }, { healthCheckNodePort: null }],
    ['iTP Local', { internalTrafficPolicy: 'Local' }, { internalPolicyLocal: true }],
  ])('%s', (_n, spec, want) => {
    expect(servicePortsOf(service('s', spec)).ports[0]).toMatchObject(want);
  });

  it('skips an LB ingress IP with ipMode Proxy, as kube-proxy', () => {
    const svc = service('lb', { type: 'LoadBalancer' }, { status: { loadBalancer: { ingress: [{ ip: '198.51.100.1', ipMode: 'Proxy' }, { ip: '198.51.100.2', ipMode: 'VIP' }] } } });
    expect(servicePortsOf(svc).ports[0]!.loadBalancerIPs).toEqual(['198.51.100.2']);
  });

  it('ignores LB ingress IPs on a Service that is not a LoadBalancer', () => {
    const svc = service('np', { type: 'NodePort' }, { status: { loadBalancer: { ingress: [{ ip: '198.51.100.1' }] } } });
    expect(servicePortsOf(svc).ports[0]!.loadBalancerIPs).toEqual([]);
  });
});

describe('servicePortsOf: scheduler annotations', () => {
  const OURS = 'kube-ipvs-proxy.io/scheduler';
  const ROUTER = 'kube-router.io/service.scheduler';
  const FLAGS = 'kube-ipvs-proxy.io/scheduler-flags';
  const run = (annotations: Record<string, string>) => servicePortsOf(service('s', {}, { annotations }));

  it.each([
    ['none: configured default', {}, null, []],
    ['ours', { [OURS]: 'lc' }, 'lc', []],
    ['kube-router alias', { [ROUTER]: 'sh' }, 'sh', []],
    ['ours wins over kube-router', { [OURS]: 'wrr', [ROUTER]: 'sh' }, 'wrr', []],
    ['empty annotation ignored', { [OURS]: ' ', [ROUTER]: 'dh' }, 'dh', []],
    ['sh flags, sorted and deduplicated', { [OURS]: 'sh', [FLAGS]: 'sh-port, sh-fallback,sh-port' }, 'sh', ['sh-fallback', 'sh-port']],
    ['mh flags', { [OURS]: 'mh', [FLAGS]: 'mh-port' }, 'mh', ['mh-port']],
    ['flags without a scheduler annotation: checked later against the default', { [FLAGS]: 'sh-port' }, null, ['sh-port']],
  ])('%s', (_n, annotations, scheduler, flags) => {
    const r = run(annotations as Record<string, string>);
    expect(r.errors).toEqual([]);
    expect([r.ports[0]!.scheduler, r.ports[0]!.schedulerFlags]).toEqual([scheduler, flags]);
  });

  it.each([
    ['unknown scheduler', { [OURS]: 'foo' }, 'unknown scheduler "foo" (annotation kube-ipvs-proxy.io/scheduler)'],
    ['unknown scheduler via kube-router', { [ROUTER]: 'bar' }, 'unknown scheduler "bar" (annotation kube-router.io/service.scheduler)'],
    ['unknown flag', { [OURS]: 'sh', [FLAGS]: 'sh-port,turbo' }, 'unknown scheduler flag "turbo" (annotation kube-ipvs-proxy.io/scheduler-flags; valid: sh-fallback, sh-port, mh-fallback, mh-port)'],
    ['sh flag with mh', { [OURS]: 'mh', [FLAGS]: 'sh-port' }, 'scheduler flag "sh-port" needs scheduler sh, not mh (annotation kube-ipvs-proxy.io/scheduler-flags)'],
    ['mh flag with rr', { [OURS]: 'rr', [FLAGS]: 'mh-fallback' }, 'scheduler flag "mh-fallback" needs scheduler mh, not rr (annotation kube-ipvs-proxy.io/scheduler-flags)'],
  ])('%s: error, no ports', (_n, annotations, reason) => {
    expect(run(annotations as Record<string, string>)).toEqual({ ports: [], errors: [{ object: 'Service ns/s', reason }] });
  });

  it('formats the unknown-scheduler error as the issue asks', () => {
    const [e] = run({ [OURS]: 'foo' }).errors;
    expect(`${e!.object}: ${e!.reason}`).toBe('Service ns/s: unknown scheduler "foo" (annotation kube-ipvs-proxy.io/scheduler)');
  });
});

describe('endpointsForService', () => {
  const key = 'ns/web:http/tcp';

  it('merges slices, deduplicates, sorts, and sets isLocal', () => {
    const m = endpointsForService('ns', 'web', [
      slice('web-1', 'web', [{ ip: '10.244.0.3', node: NODE }, { ip: '10.244.0.1' }]),
      slice('web-2', 'web', [{ ip: '10.244.0.2', node: 'node-b' }, { ip: '10.244.0.1' }]),
    ], NODE);
    expect([...m.keys()]).toEqual([key]);
    expect(m.get(key)!.map((e) => [e.address, e.port, e.isLocal])).toEqual([
      ['10.244.0.1', 8080, false], ['10.244.0.2', 8080, false], ['10.244.0.3', 8080, true],
    ]);
  });

  it('matches slice ports by name and protocol; a port without number is ignored', () => {
    const ports = [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }, { name: 'dns', port: 5354 }, { name: 'none' }];
    const m = endpointsForService('ns', 'web', [slice('s', 'web', [{ ip: '10.244.0.1' }], ports)], NODE);
    expect([...m].map(([k, eps]) => [k, eps[0]!.port])).toEqual([
      ['ns/web:http/tcp', 8080], ['ns/web:dns/udp', 5353], ['ns/web:dns/tcp', 5354],
    ]);
  });

  it.each([
    ['all unset', {}, [true, true, false]],
    ['not ready, serving unset → not serving', { ready: false }, [false, false, false]],
    ['serving-terminating', { ready: false, serving: true, terminating: true }, [false, true, true]],
    ['ready unset, serving false', { serving: false }, [true, false, false]],
  ])('conditions: %s', (_n, c, want) => {
    const [e] = endpointsForService('ns', 'web', [slice('s', 'web', [{ ip: '10.244.0.1', ...c }])], NODE).get(key)!;
    expect([e!.ready, e!.serving, e!.terminating]).toEqual(want);
  });

  it('a duplicate keeps the non-terminating endpoint', () => {
    const m = endpointsForService('ns', 'web', [
      slice('a', 'web', [{ ip: '10.244.0.1', ready: false, serving: true, terminating: true }]),
      slice('b', 'web', [{ ip: '10.244.0.1', ready: true }]),
      slice('c', 'web', [{ ip: '10.244.0.1', ready: false, serving: true, terminating: true }]),
    ], NODE);
    expect(m.get(key)!.map((e) => e.ready)).toEqual([true]);
  });

  it('uses the first address, canonical IPv6, ignores FQDN slices and addresses of the wrong family', () => {
    const m = endpointsForService('ns', 'web', [
      slice('v6', 'web', [{ ip: 'FD00::0001', more: ['fd00::99'] }, { ip: '10.244.0.9' }], undefined, 'IPv6'),
      slice('v4', 'web', [{ ip: 'fd00::5' }, { ip: '10.244.0.1' }]),
      slice('f', 'web', [{ ip: 'web.example.com' }], undefined, 'FQDN'),
    ], NODE);
    expect(m.get(key)!.map((e) => `${e.family} ${e.address}`)).toEqual(['ipv4 10.244.0.1', 'ipv6 fd00::1']);
  });

  it('gives no key for a port with no endpoints', () => {
    expect(endpointsForService('ns', 'web', [slice('s', 'web', [])], NODE).size).toBe(0);
  });
});

describe('sliceErrors', () => {
  it('reports a missing service-name label and wrong-family addresses', () => {
    expect(sliceErrors(slice('orphan', null, [{ ip: '10.0.0.1' }]))).toEqual([
      { object: 'EndpointSlice ns/orphan', reason: 'no kubernetes.io/service-name label' },
    ]);
    expect(sliceErrors(slice('mixed', 'web', [{ ip: 'fd00::1' }]))).toEqual([
      { object: 'EndpointSlice ns/mixed', reason: 'endpoint address "fd00::1" is not an IPv4 address' },
    ]);
    expect(sliceErrors(slice('f', null, [{ ip: 'x.example' }], undefined, 'FQDN'))).toEqual([]);
  });
});

describe('ChangeTracker', () => {
  const keys = (t: ChangeTracker): string[] => [...t.takeChanged()].sort();

  it('marks the ports of an added, changed and deleted Service, and nothing on a no-op update', () => {
    const t = new ChangeTracker(NODE);
    t.onService('ns/web', service('web', { ports: [{ name: 'http', port: 80 }, { name: 'https', port: 443 }] }));
    expect(keys(t)).toEqual(['ns/web:http/tcp', 'ns/web:https/tcp']);
    expect(keys(t)).toEqual([]);
    t.onService('ns/web', service('web', { ports: [{ name: 'http', port: 80 }, { name: 'https', port: 443 }] }));
    expect(keys(t)).toEqual([]);
    t.onService('ns/web', service('web', { ports: [{ name: 'http', port: 8000 }] }));
    expect(keys(t)).toEqual(['ns/web:http/tcp', 'ns/web:https/tcp']);
    expect([...t.state().services.keys()]).toEqual(['ns/web:http/tcp']);
    t.onService('ns/web', null);
    expect(keys(t)).toEqual(['ns/web:http/tcp']);
    expect(t.state().services.size).toBe(0);
  });

  it('keeps each Service\'s uid (also of one whose ports are rejected) until it is deleted', () => {
    const t = new ChangeTracker(NODE);
    const withUid = (svc: Service, uid: string): Service => ({ ...svc, metadata: { ...svc.metadata, uid } });
    t.onService('ns/web', withUid(service('web'), 'uid-1'));
    t.onService('ns/bad', withUid(service('bad', { clusterIP: '10.96.0.300' }), 'uid-2'));
    expect([t.uidOf('ns/web'), t.uidOf('ns/bad'), t.uidOf('ns/none')]).toEqual(['uid-1', 'uid-2', undefined]);
    t.onService('ns/web', service('web'));
    t.onService('ns/bad', null);
    expect([t.uidOf('ns/web'), t.uidOf('ns/bad')]).toEqual([undefined, undefined]);
  });

  it('keeps the unchanged endpoints of an updated slice as the objects it had (one copy per endpoint)', () => {
    const t = new ChangeTracker(NODE);
    t.onService('ns/web', service('web'));
    t.onEndpointSlice('ns/web-1', slice('web-1', 'web', [{ ip: '10.244.0.1' }, { ip: '10.244.0.2' }, { ip: '10.244.0.3', node: NODE }]));
    const before = t.state().endpoints.get('ns/web:http/tcp')!;
    t.takeChanged();
    // A fresh decode: one endpoint replaced, one with a changed condition, one as it was.
    t.onEndpointSlice('ns/web-1', slice('web-1', 'web', [{ ip: '10.244.0.1' }, { ip: '10.244.0.2', ready: false }, { ip: '10.244.0.9', node: NODE }]));
    expect(keys(t)).toEqual(['ns/web:http/tcp']);
    const after = t.state().endpoints.get('ns/web:http/tcp')!;
    expect(after.map((ep) => [ep.address, ep.ready])).toEqual([['10.244.0.1', true], ['10.244.0.2', false], ['10.244.0.9', true]]);
    expect(after[0]).toBe(before[0]);
    expect(after[1]).not.toBe(before[1]);
    expect(after[2]).not.toBe(before[2]);
    // The same slice again: every object kept, nothing marked.
    t.onEndpointSlice('ns/web-1', slice('web-1', 'web', [{ ip: '10.244.0.1' }, { ip: '10.244.0.2', ready: false }, { ip: '10.244.0.9', node: NODE }]));
    expect(keys(t)).toEqual([]);
    expect(t.state().endpoints.get('ns/web:http/tcp')!.every((ep, i) => ep === after[i])).toBe(true);
  });

  it('a change to one Service among many marks only that Service', () => {
    const t = new ChangeTracker(NODE);
    for (let i = 0; i < 500; i++) {
      t.onService(`ns/s${i}`, service(`s${i}`, { clusterIP: `10.96.${i >> 8}.${i & 255}` }));
      t.onEndpointSlice(`ns/s${i}-1`, slice(`s${i}-1`, `s${i}`, [{ ip: `10.244.${i >> 8}.${i & 255}` }]));
    }
    expect(t.takeChanged().size).toBe(500);
    t.onService('ns/s7', service('s7', { clusterIP: '10.96.0.7', sessionAffinity: 'ClientIP' }));
    expect(keys(t)).toEqual(['ns/s7:http/tcp']);
    t.onEndpointSlice('ns/s9-1', slice('s9-1', 's9', [{ ip: '10.244.0.9' }, { ip: '10.244.9.9' }]));
    expect(keys(t)).toEqual(['ns/s9:http/tcp']);
    expect(t.state().endpoints.get('ns/s9:http/tcp')!.length).toBe(2);
  });

  it('tracks slices: add, update, delete, and a slice moving to another Service', () => {
    const t = new ChangeTracker(NODE);
    t.onEndpointSlice('ns/a-1', slice('a-1', 'a', [{ ip: '10.244.0.1' }]));
    t.onEndpointSlice('ns/a-2', slice('a-2', 'a', [{ ip: '10.244.0.2' }]));
    expect(keys(t)).toEqual(['ns/a:http/tcp']);
    expect(t.state().endpoints.get('ns/a:http/tcp')!.map((e) => e.address)).toEqual(['10.244.0.1', '10.244.0.2']);
    t.onEndpointSlice('ns/a-2', slice('a-2', 'a', [{ ip: '10.244.0.2' }]));
    expect(keys(t)).toEqual([]);
    t.onEndpointSlice('ns/a-2', slice('a-2', 'b', [{ ip: '10.244.0.2' }]));
    expect(keys(t)).toEqual(['ns/a:http/tcp', 'ns/b:http/tcp']);
    t.onEndpointSlice('ns/a-1', null);
    expect(keys(t)).toEqual(['ns/a:http/tcp']);
    expect(t.state().endpoints.has('ns/a:http/tcp')).toBe(false);
    expect(t.state().endpoints.get('ns/b:http/tcp')!.map((e) => e.address)).toEqual(['10.244.0.2']);
  });

  it('merges several slices as endpointsForService does (duplicates across slices, two ports), one delete at a time', () => {
    const ports = [{ name: 'http', port: 8080 }, { name: 'dns', port: 53, protocol: 'UDP' }];
    const slices = [
      slice('w-1', 'web', [{ ip: '10.244.0.3' }, { ip: '10.244.0.1', ready: false, serving: true, terminating: true }], ports),
      slice('w-2', 'web', [{ ip: '10.244.0.1' }, { ip: '10.244.0.2', node: NODE }], ports),
      slice('w-3', 'web', [{ ip: '10.244.0.2', ready: false, terminating: true }, { ip: '10.244.0.4' }], [{ name: 'http', port: 8080 }]),
    ];
    const t = new ChangeTracker(NODE);
    slices.forEach((sl) => t.onEndpointSlice(`ns/${sl.metadata.name}`, sl));
    for (let n = slices.length; n > 0; n--) {
      const want = endpointsForService('ns', 'web', slices.slice(0, n), NODE);
      expect(new Map(t.state().endpoints)).toEqual(want);
      t.onEndpointSlice(`ns/${slices[n - 1]!.metadata.name}`, null);
    }
    expect(t.state().endpoints.size).toBe(0);
  });

  it('keeps what it needs of a slice, not the slice object', async () => {
    const t = new ChangeTracker(NODE);
    let ref: WeakRef<object> | undefined;
    (() => {
      const sl = slice('a-1', 'a', [{ ip: '10.244.0.1' }]);
      ref = new WeakRef(sl);
      t.onEndpointSlice('ns/a-1', sl);
    })();
    await new Promise((r) => setTimeout(r, 0));
    native.releaseMemory(true); // a full GC
    expect(ref!.deref()).toBeUndefined();
    expect(t.state().endpoints.get('ns/a:http/tcp')!.map((e) => e.address)).toEqual(['10.244.0.1']);
  });

  it('a condition change is a change; marks the local endpoint', () => {
    const t = new ChangeTracker(NODE);
    t.onEndpointSlice('ns/a-1', slice('a-1', 'a', [{ ip: '10.244.0.1', node: NODE }]));
    t.takeChanged();
    t.onEndpointSlice('ns/a-1', slice('a-1', 'a', [{ ip: '10.244.0.1', node: NODE, ready: false, serving: true, terminating: true }]));
    expect(keys(t)).toEqual(['ns/a:http/tcp']);
    expect(t.state().endpoints.get('ns/a:http/tcp')![0]).toMatchObject({ isLocal: true, ready: false, serving: true, terminating: true });
  });

  it('an unknown scheduler is an error for that Service only; the last good version stays', () => {
    const t = new ChangeTracker(NODE);
    const bad = { annotations: { 'kube-ipvs-proxy.io/scheduler': 'foo' } };
    t.onService('ns/good', service('good'));
    t.onService('ns/new', service('new', {}, bad));
    expect(keys(t)).toEqual(['ns/good:http/tcp']);
    expect(t.errors()).toEqual([{ object: 'Service ns/new', reason: 'unknown scheduler "foo" (annotation kube-ipvs-proxy.io/scheduler)' }]);
    t.onService('ns/good', service('good', { ports: [{ name: 'http', port: 81 }] }, bad));
    expect(keys(t)).toEqual([]);
    expect(t.state().services.get('ns/good:http/tcp')!.port).toBe(80);
    expect(t.errors().map((e) => e.object)).toEqual(['Service ns/new', 'Service ns/good']);
    t.onService('ns/good', service('good', { ports: [{ name: 'http', port: 81 }] }));
    t.onService('ns/new', null);
    expect(keys(t)).toEqual(['ns/good:http/tcp']);
    expect(t.errors()).toEqual([]);
  });

  it('reports slice errors while the slice exists', () => {
    const t = new ChangeTracker(NODE);
    t.onEndpointSlice('ns/orphan', slice('orphan', null, [{ ip: '10.244.0.1' }]));
    expect(keys(t)).toEqual([]);
    expect(t.errors()).toHaveLength(1);
    t.onEndpointSlice('ns/orphan', null);
    expect(t.errors()).toEqual([]);
  });

  it('keeps this node and ignores others', () => {
    const t = new ChangeTracker(NODE);
    const node = (name: string) => nodeSchema.parse({ metadata: { name, labels: { zone: 'z1' } }, status: { addresses: [{ type: 'InternalIP', address: '192.168.0.10' }] } });
    t.onNode(node('other'));
    expect(t.state().node).toBeNull();
    t.onNode(node(NODE));
    expect(t.state().node).toEqual({ name: NODE, addresses: ['192.168.0.10'], labels: { zone: 'z1' } });
    t.onNode(null);
    expect(t.state().node).toBeNull();
  });
});

describe('snapshot and restore (a restarted daemon resumes from the model it left)', () => {
  /** `from`'s snapshot through JSON, one line per entry as in the resume record, into a new tracker. */
  function restored(from: ChangeTracker): ChangeTracker {
    const { head, entries } = from.snapshot();
    const lines = [...entries].map((e) => JSON.stringify(e));
    const t = new ChangeTracker(NODE);
    const r = t.restore(JSON.parse(JSON.stringify(head)));
    for (const line of lines) r.add(JSON.parse(line));
    r.done();
    return t;
  }

  function filled(): ChangeTracker {
    const t = new ChangeTracker(NODE);
    const svc = service('web', { ports: [{ name: 'http', port: 80 }, { name: 'dns', port: 53, protocol: 'UDP' }] }, { annotations: { 'kube-ipvs-proxy.io/scheduler': 'wrr' } });
    t.onService('ns/web', { ...svc, metadata: { ...svc.metadata, uid: 'uid-web' } });
    t.onService('ns/bad', service('bad', { clusterIP: '10.96.0.999' }));
    t.onEndpointSlice('ns/web-1', slice('web-1', 'web', [{ ip: '10.244.1.2', node: NODE }, { ip: '10.244.2.2', node: 'b', ready: false, serving: true, terminating: true }], [{ name: 'http', port: 8080 }, { name: 'dns', port: 5353, protocol: 'UDP' }]));
    t.onEndpointSlice('ns/web-2', slice('web-2', 'web', [{ ip: '10.244.3.2', node: 'c' }]));
    t.onEndpointSlice('ns/v6', slice('v6', 'web', [{ ip: 'fd00::2', node: 'c' }], [{ name: 'http', port: 8080 }], 'IPv6'));
    t.onEndpointSlice('ns/orphan', slice('orphan', null, [{ ip: '10.244.0.1' }]));
    const hinted = slice('hinted', 'web', [{ ip: '10.244.4.2', node: 'd' }]);
    (hinted.endpoints[0] as { hints?: unknown }).hints = { forZones: [{ name: 'z2' }, { name: 'z1' }], forNodes: [{ name: 'd' }] };
    t.onEndpointSlice('ns/hinted', hinted);
    t.onNode(nodeSchema.parse({ metadata: { name: NODE, labels: { 'topology.kubernetes.io/zone': 'z1' } }, status: { addresses: [{ type: 'InternalIP', address: '192.168.0.10' }] } }));
    t.takeChanged();
    return t;
  }

  it('takes back, through JSON, the same model, problems, uids and node; every port key counts as changed', () => {
    const before = filled();
    const after = restored(before);
    const plain = (t: ChangeTracker) => JSON.parse(JSON.stringify({ services: [...t.state().services], endpoints: [...t.state().endpoints], node: t.state().node }));
    expect(plain(after)).toEqual(plain(before));
    expect(after.state().endpoints.get('ns/web:http/tcp')!.map((e) => e.address)).toEqual(['10.244.1.2', '10.244.2.2', '10.244.3.2', '10.244.4.2', 'fd00::2']);
    expect(after.state().endpoints.get('ns/web:http/tcp')!.find((e) => e.address === '10.244.4.2')).toMatchObject({ zoneHints: ['z1', 'z2'], nodeHints: ['d'] });
    expect(after.errors()).toEqual(before.errors());
    expect(after.errors().map((e) => e.object)).toEqual(['Service ns/bad', 'EndpointSlice ns/orphan']);
    expect(after.uidOf('ns/web')).toBe('uid-web');
    expect(after.counts()).toEqual(before.counts());
    expect([...after.takeChanged()].sort()).toEqual(['ns/web:dns/udp', 'ns/web:http/tcp']);
  });

  it('goes on from there as the tracker it was taken from would', () => {
    const before = filled();
    const after = restored(before);
    after.takeChanged();
    for (const t of [before, after]) {
      t.onEndpointSlice('ns/web-2', null);
      t.onService('ns/bad', service('bad', { clusterIP: '10.96.0.99' }));
    }
    expect([...after.takeChanged()].sort()).toEqual([...before.takeChanged()].sort());
    expect(JSON.stringify([...after.state().endpoints])).toBe(JSON.stringify([...before.state().endpoints]));
    expect(after.errors()).toEqual(before.errors());
  });

  it('restores only into an empty tracker', () => {
    expect(() => filled().restore(filled().snapshot().head)).toThrow(/not empty/);
  });
});
