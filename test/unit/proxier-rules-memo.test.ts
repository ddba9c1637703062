// The IPVS proxier builds its iptables rules only when what they depend on changed (which owned
// sets have entries, the load-balancer entries the node may not reach): an endpoint change
// renders and hashes nothing, a Service that fills a set does, and its rules are restored.
import { describe, expect, it, vi } from 'vitest';

import { parseArgs } from '../../src/config.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { createLogger } from '../../src/log-json.js';
import { serviceSchema } from '../../src/model/k8s-schemas.js';
import { IpvsProxier } from '../../src/proxy/ipvs/proxier.js';
import * as rules from '../../src/proxy/ipvs/rules.js';
import { fakeIptables } from './lib/fake-iptables.js';
import { slice, svc } from './lib/objects.js';

vi.mock('../../src/proxy/ipvs/rules.js', async (original) => {
  const m = await original<typeof import('../../src/proxy/ipvs/rules.js')>();
  return { ...m, ipvsModeRules: vi.fn(m.ipvsModeRules) };
});

describe('IpvsProxier iptables rules', () => {
  it('are built again only when the sets with entries change', async () => {
    const link = new FakeLinkClient();
    link.addLink('eth0', null, true, ['192.0.2.10']);
    const iptables = fakeIptables();
    const proxier = new IpvsProxier({
      config: parseArgs(['--hostname-override', 'n1']).config,
      nodeName: 'n1',
      logger: createLogger({ format: 'json', verbosity: 0 }, { write: () => true } as never),
      dummyName: 'kube-ipvs0',
      clients: { ipvs: new FakeIpvsClient(), ipset: new FakeIpsetClient(), link, iptables: { ipv4: iptables.ipt, ipv6: null } },
      sysctl: () => [],
    });
    const handler = proxier.handler(() => {});
    handler.onService('ns/web', svc('web', '10.96.0.10'));
    handler.onEndpointSlice('ns/web-1', slice('web', ['10.244.1.2']));
    await proxier.sync({ full: true });
    const built = vi.mocked(rules.ipvsModeRules);
    expect(built).toHaveBeenCalledTimes(1);
    expect(iptables.restores).toBe(1);

    for (let i = 3; i < 13; i++) {
      handler.onEndpointSlice('ns/web-1', slice('web', [`10.244.1.${i}`]));
      await proxier.sync();
    }
    expect(built).toHaveBeenCalledTimes(1);
    expect(iptables.restores).toBe(1);

    // A NodePort Service fills KUBE-NODE-PORT-TCP: new rules, restored.
    handler.onService('ns/np', serviceSchema.parse({ metadata: { name: 'np', namespace: 'ns' }, spec: { type: 'NodePort', clusterIP: '10.96.0.11', ports: [{ name: 'http', port: 80, targetPort: 8080, nodePort: 30080 }] } }));
    await proxier.sync();
    expect(built).toHaveBeenCalledTimes(2);
    expect(iptables.restores).toBe(2);
    expect(iptables.rules).toContain('KUBE-NODE-PORT-TCP');
    // Gone again: the set is empty, the rule that matched it goes.
    handler.onService('ns/np', null);
    await proxier.sync();
    expect(built).toHaveBeenCalledTimes(3);
    expect(iptables.restores).toBe(3);
    expect(iptables.rules).not.toContain('KUBE-NODE-PORT-TCP');
  });
});
