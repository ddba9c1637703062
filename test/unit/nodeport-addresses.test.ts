// Which node addresses serve NodePorts and health-check node ports under --nodeport-addresses,
// as kube-proxy's per-family NodePortAddresses and its service health server choose them.
import { describe, expect, it } from 'vitest';

import { nodePortAddresses } from '../../src/proxy/ipvs/node.js';
import { healthCheckAddresses, ServiceHealthServers } from '../../src/server/servicehealth.js';

const LOCAL = ['10.250.0.1', '10.250.1.5', '192.168.7.2', 'fd00:10:250::1', 'fd00:99::1'];

describe('nodePortAddresses', () => {
  it('every local address without the flag, the Node\'s with primary', () => {
    expect(nodePortAddresses(LOCAL, [], () => [])).toEqual(LOCAL);
    expect(nodePortAddresses(LOCAL, ['primary'], () => ['10.250.0.1', 'fd00:10:250::1'])).toEqual(['10.250.0.1', 'fd00:10:250::1']);
  });

  it("each family's CIDRs select its addresses; a family no CIDR is of keeps all of its addresses", () => {
    expect(nodePortAddresses(LOCAL, ['10.250.0.0/24'], () => [])).toEqual(['10.250.0.1', 'fd00:10:250::1', 'fd00:99::1']);
    expect(nodePortAddresses(LOCAL, ['fd00:10:250::/64'], () => [])).toEqual(['10.250.0.1', '10.250.1.5', '192.168.7.2', 'fd00:10:250::1']);
    expect(nodePortAddresses(LOCAL, ['10.250.0.0/16', 'fd00:99::/64'], () => [])).toEqual(['10.250.0.1', '10.250.1.5', 'fd00:99::1']);
  });
});

describe('healthCheckAddresses', () => {
  it('every address (undefined) without CIDRs of the primary family or with primary', () => {
    expect(healthCheckAddresses(LOCAL, [], undefined)).toBeUndefined();
    expect(healthCheckAddresses(LOCAL, ['primary'], undefined)).toBeUndefined();
    expect(healthCheckAddresses(LOCAL, ['fd00:10:250::/64'], undefined)).toBeUndefined();
  });

  it("the primary family's local addresses in the CIDRs, none when none is", () => {
    expect(healthCheckAddresses(LOCAL, ['10.250.0.0/24', 'fd00:10:250::/64'], undefined)).toEqual(['10.250.0.1']);
    expect(healthCheckAddresses(LOCAL, ['10.250.0.0/24', 'fd00:10:250::/64'], 'fd00:10:250::1')).toEqual(['fd00:10:250::1']);
    expect(healthCheckAddresses(LOCAL, ['172.16.0.0/12'], undefined)).toEqual([]);
  });

  it('no address given: no listener', async () => {
    const s = new ServiceHealthServers({ nodeAddresses: [] });
    expect(await s.sync(new Map([[31999, { service: 'ns/a', localEndpoints: 1 }]]))).toEqual([]);
    expect(s.ports()).toEqual([]);
    await s.close();
  });
});
