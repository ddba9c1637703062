// The IPVS proxier writes the iptables rules a virtual server needs before the virtual server
// (kubernetes#133773: a virtual server that takes a connection before its masquerade rule never
// answers it): at the adopting first sync over an empty kernel, and in a partial sync whose new
// Service changes the rules. In-memory kernels; each restore records what IPVS and the sets held.
import { describe, expect, it } from 'vitest';

import { parseArgs } from '../../src/config.js';
import type { TableSpec } from '../../src/kernel/iptables.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { createLogger } from '../../src/log-json.js';
import { serviceSchema } from '../../src/model/k8s-schemas.js';
import { IpvsProxier } from '../../src/proxy/ipvs/proxier.js';
import { fakeIptables } from './lib/fake-iptables.js';
import { slice, svc } from './lib/objects.js';

interface AtRestore {
  virtualServers: string[];
  rules: string;
  sets: Record<string, string>;
}

function setup() {
  const ipvs = new FakeIpvsClient();
  const ipset = new FakeIpsetClient();
  const link = new FakeLinkClient();
  link.addLink('eth0', null, true, ['192.0.2.10']);
  const iptables = fakeIptables();
  const restores: AtRestore[] = [];
  const sync = iptables.ipt.sync.bind(iptables.ipt);
  iptables.ipt.sync = async (spec: TableSpec[]) => {
    const sets: Record<string, string> = {};
    for (const s of await ipset.list()) sets[s.name] = JSON.stringify(s.entries);
    restores.push({ virtualServers: Object.keys(ipvs.weights()), rules: JSON.stringify(spec), sets });
    return sync(spec);
  };
  const proxier = new IpvsProxier({
    config: parseArgs(['--hostname-override', 'n1', '--cluster-cidr', '10.244.0.0/16']).config,
    nodeName: 'n1',
    logger: createLogger({ format: 'json', verbosity: 0 }, { write: () => true } as never),
    dummyName: 'kube-ipvs0',
    clients: { ipvs, ipset, link, iptables: { ipv4: iptables.ipt, ipv6: null } },
    conntrack: async () => {},
    sysctl: () => [],
  });
  return { ipvs, iptables, restores, proxier, handler: proxier.handler(() => {}) };
}

describe('iptables rules before the virtual servers that need them (kubernetes#133773)', () => {
  it('adopting an empty kernel: the rules are restored once, with the sets filled and no virtual server yet', async () => {
    const { ipvs, iptables, restores, proxier, handler } = setup();
    handler.onService('ns/kubernetes', svc('kubernetes', '10.96.0.1'));
    handler.onEndpointSlice('ns/kubernetes-1', slice('kubernetes', ['10.249.0.2']));
    await proxier.sync();
    await proxier.verified();
    expect(restores).toHaveLength(1);
    expect(restores[0]!.virtualServers).toEqual([]);
    expect(restores[0]!.rules).toContain('KUBE-MARK-MASQ');
    expect(restores[0]!.sets['KUBE-CLUSTER-IP']).toContain('10.96.0.1');
    expect(Object.keys(ipvs.weights())).toEqual(['tcp/10.96.0.1:80']);
    expect(iptables.saves).toBe(1); // the adopting verification trusts that restore: no read back
  });

  it('a partial sync whose Service changes the rules: restored before its virtual servers are added', async () => {
    const { ipvs, restores, proxier, handler } = setup();
    handler.onService('ns/a', svc('a', '10.96.0.10'));
    handler.onEndpointSlice('ns/a-1', slice('a', ['10.244.1.2']));
    await proxier.sync();
    await proxier.verified();
    const lb = serviceSchema.parse({
      metadata: { name: 'lb', namespace: 'ns' },
      spec: { type: 'LoadBalancer', clusterIP: '10.96.0.11', allocateLoadBalancerNodePorts: false, ports: [{ name: 'http', port: 80, targetPort: 8080 }] },
      status: { loadBalancer: { ingress: [{ ip: '10.250.0.200' }] } },
    });
    handler.onService('ns/lb', lb);
    handler.onEndpointSlice('ns/lb-1', slice('lb', ['10.244.1.3']));
    await proxier.sync();
    expect(restores).toHaveLength(2);
    const at = restores[1]!;
    expect(at.rules).toContain('KUBE-LOAD-BALANCER');
    expect(at.sets['KUBE-LOAD-BALANCER']).toContain('10.250.0.200');
    expect(at.virtualServers).not.toContain('tcp/10.250.0.200:80');
    expect(at.virtualServers).not.toContain('tcp/10.96.0.11:80');
    expect(Object.keys(ipvs.weights())).toContain('tcp/10.250.0.200:80');
  });
});
