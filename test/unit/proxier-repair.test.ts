// The IPVS proxier re-ensures every object it owns and isolates per-object kernel refusals
// (in-memory kernels): the dummy link, its addresses, sysctls, owned ipsets.
import { beforeEach, describe, expect, it } from 'vitest';

import { parseArgs } from '../../src/config.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { createLogger } from '../../src/log-json.js';
import { endpointSliceSchema, serviceSchema } from '../../src/model/k8s-schemas.js';
import { IpvsProxier } from '../../src/proxy/ipvs/proxier.js';
import type { SourceHandler } from '../../src/source/types.js';
import { fakeIptables, type FakeIptables } from './lib/fake-iptables.js';
import { slice, svc } from './lib/objects.js';


let ipvs: FakeIpvsClient;
let ipset: FakeIpsetClient;
let link: FakeLinkClient;
let proxier: IpvsProxier;
let handler: SourceHandler;
let errors: Array<{ object: string; reason: string }>;
let sysctlCalls: number;
let sysctlFails: boolean;
let conntrack: string[][];

beforeEach(async () => {
  ipvs = new FakeIpvsClient();
  ipset = new FakeIpsetClient();
  link = new FakeLinkClient();
  link.addLink('eth0', null, true, ['192.0.2.10']);
  errors = [];
  sysctlCalls = 0;
  sysctlFails = false;
  conntrack = [];
  const iptables = fakeIptables();
  const logger = createLogger({ format: 'json', verbosity: 0 }, { write: (l: string) => (JSON.parse(l).level >= 50 && errors.push(JSON.parse(l)), true) } as never);
  proxier = new IpvsProxier({
    config: parseArgs(['--hostname-override', 'n1']).config,
    nodeName: 'n1',
    logger,
    dummyName: 'kube-ipvs0',
    clients: { ipvs, ipset, link, iptables: { ipv4: iptables.ipt, ipv6: null } },
    conntrack: async (args) => void conntrack.push(args),
    sysctl: (s) => (sysctlCalls++, sysctlFails ? [{ ...s[0]!, error: 'EACCES' }] : []),
  });
  handler = proxier.handler(() => {});
  handler.onService('ns/a', svc('a', '10.96.0.10'));
  handler.onEndpointSlice('ns/a-1', slice('a', ['10.244.1.2']));
  handler.onService('ns/b', svc('b', '10.96.0.11'));
  handler.onEndpointSlice('ns/b-1', slice('b', ['10.244.1.3']));
  await proxier.sync({ full: true });
});

describe('IpvsProxier repairs what it owns', () => {
  it('a deleted dummy link: the next sync hits ENODEV, the one after re-creates it and binds every address', async () => {
    await link.deleteLink('kube-ipvs0');
    handler.onService('ns/c', svc('c', '10.96.0.12'));
    await expect(proxier.sync()).rejects.toThrow(/kernel operations failed/);
    expect(errors.map((e) => e.object)).toContain('kube-ipvs0');
    await proxier.sync();
    expect((await link.listLocalRoutes('kube-ipvs0')).sort()).toEqual(['10.96.0.10', '10.96.0.11', '10.96.0.12']);
  });

  it('a deleted dummy link is re-created by a full sync even without changes', async () => {
    await link.deleteLink('kube-ipvs0');
    const r = await proxier.sync({ full: true });
    expect(r.errors).toBe(0);
    expect((await link.listLocalRoutes('kube-ipvs0')).sort()).toEqual(['10.96.0.10', '10.96.0.11']);
  });

  it('sysctls are re-ensured on every full sync; a failure is reported once', async () => {
    sysctlFails = true;
    const before = sysctlCalls;
    await proxier.sync({ full: true });
    await proxier.sync({ full: true });
    expect(sysctlCalls).toBe(before + 2);
    expect(errors.filter((e) => e.object.startsWith('sysctl '))).toHaveLength(1);
  });

  it('a destroyed owned ipset is re-created and filled: by a full sync, and by a partial sync that finds it missing', async () => {
    await ipset.destroy('KUBE-CLUSTER-IP');
    await proxier.sync({ full: true });
    expect(ipset.members('KUBE-CLUSTER-IP')?.sort()).toEqual(['10.96.0.10,tcp:80', '10.96.0.11,tcp:80']);
    await ipset.destroy('KUBE-CLUSTER-IP');
    handler.onService('ns/c', svc('c', '10.96.0.12'));
    await expect(proxier.sync()).rejects.toThrow();
    await proxier.sync();
    expect(ipset.members('KUBE-CLUSTER-IP')?.sort()).toEqual(['10.96.0.10,tcp:80', '10.96.0.11,tcp:80', '10.96.0.12,tcp:80']);
  });

  it('a refusal (EINVAL) of one object is reported once, not retried before a full sync; the rest is programmed', async () => {
    ipvs.failOps('EINVAL', (op) => op.kind === 'addService' && op.service.address === '10.96.0.12', 100);
    handler.onService('ns/c', svc('c', '10.96.0.12'));
    handler.onService('ns/d', svc('d', '10.96.0.13'));
    const r = await proxier.sync(); // no throw: nothing to retry
    expect(r.errors).toBe(1);
    expect(Object.keys(ipvs.weights())).toContain('tcp/10.96.0.13:80');
    ipvs.resetCounters();
    handler.onEndpointSlice('ns/a-1', slice('a', ['10.244.1.2', '10.244.1.9']));
    await proxier.sync();
    expect(ipvs.ops.addService).toBe(0); // the refused one is not asked again by partial syncs
    await proxier.sync({ full: true });
    expect(ipvs.ops.addService).toBe(1); // a full sync tries it again
    expect(errors.filter((e) => e.object === 'Service ns/c' || e.object.includes('10.96.0.12'))).toHaveLength(1);
  });
});

describe('IpvsProxier UDP conntrack cleanup (the shared UdpConntrack)', () => {
  it('a removed UDP endpoint has its flows cleared, so they move to a live one', async () => {
    const dns = serviceSchema.parse({ metadata: { name: 'dns', namespace: 'ns' }, spec: { clusterIP: '10.96.0.53', ports: [{ name: 'dns', port: 53, protocol: 'UDP', targetPort: 5353 }] } });
    const dnsSlice = (ips: string[]) =>
      endpointSliceSchema.parse({
        metadata: { name: 'dns-1', namespace: 'ns', labels: { 'kubernetes.io/service-name': 'dns' } },
        addressType: 'IPv4',
        ports: [{ name: 'dns', port: 5353, protocol: 'UDP' }],
        endpoints: ips.map((ip) => ({ addresses: [ip], conditions: { ready: true } })),
      });
    handler.onService('ns/dns', dns);
    handler.onEndpointSlice('ns/dns-1', dnsSlice(['10.244.1.2', '10.244.2.2']));
    await proxier.sync();
    conntrack = [];
    handler.onEndpointSlice('ns/dns-1', dnsSlice(['10.244.1.2']));
    await proxier.sync();
    expect(ipvs.weights()['udp/10.96.0.53:53']).toEqual({ '10.244.1.2:5353': 1 });
    expect(conntrack).toContainEqual(['-D', '-f', 'ipv4', '-p', 'udp', '--orig-dst', '10.96.0.53', '--orig-port-dst', '53', '--dst-nat', '10.244.2.2']);
  });
});
