// The IPVS proxier's first sync over an empty kernel (adoption, in-memory kernels): nothing
// spawned before the first write that can wait until after it.
import { describe, expect, it } from 'vitest';

import { parseArgs } from '../../src/config.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { createLogger } from '../../src/log-json.js';
import { endpointSliceSchema, serviceSchema } from '../../src/model/k8s-schemas.js';
import { IpvsProxier } from '../../src/proxy/ipvs/proxier.js';
import { fakeIptables } from './lib/fake-iptables.js';
import { slice, svc } from './lib/objects.js';

function setup() {
  const ipvs = new FakeIpvsClient();
  const link = new FakeLinkClient();
  link.addLink('eth0', null, true, ['192.0.2.10']);
  const iptables = fakeIptables();
  const conntrack: Array<{ args: string[]; vsThere: boolean }> = [];
  const proxier = new IpvsProxier({
    config: parseArgs(['--hostname-override', 'n1']).config,
    nodeName: 'n1',
    logger: createLogger({ format: 'json', verbosity: 0 }, { write: () => true } as never),
    dummyName: 'kube-ipvs0',
    clients: { ipvs, ipset: new FakeIpsetClient(), link, iptables: { ipv4: iptables.ipt, ipv6: null } },
    conntrack: async (args) => void conntrack.push({ args, vsThere: ipvs.weights()['udp/10.96.0.53:53'] !== undefined }),
    sysctl: () => [],
  });
  return { ipvs, iptables, conntrack, proxier, handler: proxier.handler(() => {}) };
}

describe('IpvsProxier adoption of an empty kernel', () => {
  it('runs no iptables-save before its first iptables-restore (there is nothing to compare with)', async () => {
    const { iptables, proxier, handler } = setup();
    handler.onService('ns/a', svc('a', '10.96.0.10'));
    handler.onEndpointSlice('ns/a-1', slice('a', ['10.244.1.2']));
    await proxier.sync();
    await proxier.verified();
    expect(iptables.restores).toBe(1);
    expect(iptables.saves).toBe(1); // the fingerprint taken right after the restore
    await proxier.sync({ periodic: true });
    await proxier.verified();
    expect(iptables.restores).toBe(1); // a later verification compares (one save) and restores nothing
    expect(iptables.saves).toBe(2);
  });

  it('reports the sync that adopted the kernel (a whole verification), and only that one', async () => {
    const { proxier, handler } = setup();
    handler.onService('ns/a', svc('a', '10.96.0.10'));
    handler.onEndpointSlice('ns/a-1', slice('a', ['10.244.1.2']));
    expect((await proxier.sync()).adopted).toBe(true);
    handler.onEndpointSlice('ns/a-1', slice('a', ['10.244.1.3']));
    expect((await proxier.sync()).adopted).toBeUndefined();
    expect((await proxier.sync({ periodic: true })).adopted).toBeUndefined();
    await proxier.verified();
  });

  it('clears stale UDP conntrack entries after the virtual server is written, not before', async () => {
    const { ipvs, conntrack, proxier, handler } = setup();
    handler.onService('ns/dns', serviceSchema.parse({ metadata: { name: 'dns', namespace: 'ns' }, spec: { clusterIP: '10.96.0.53', ports: [{ name: 'dns', port: 53, protocol: 'UDP', targetPort: 5353 }] } }));
    handler.onEndpointSlice(
      'ns/dns-1',
      endpointSliceSchema.parse({
        metadata: { name: 'dns-1', namespace: 'ns', labels: { 'kubernetes.io/service-name': 'dns' } },
        addressType: 'IPv4',
        ports: [{ name: 'dns', port: 5353, protocol: 'UDP' }],
        endpoints: [{ addresses: ['10.244.1.2'], conditions: { ready: true } }],
      }),
    );
    await proxier.sync();
    expect(ipvs.weights()['udp/10.96.0.53:53']).toEqual({ '10.244.1.2:5353': 1 });
    expect(conntrack.map((c) => c.args)).toContainEqual(['-D', '-f', 'ipv4', '-p', 'udp', '--orig-dst', '10.96.0.53', '--orig-port-dst', '53', '--reply-src', '10.96.0.53']);
    expect(conntrack.every((c) => c.vsThere)).toBe(true);
  });
});
