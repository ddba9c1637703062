// How Service IPs are bound on the dummy link (binding.ts, --ipvs-address-binding): local routes by
// default, addresses on request, and the other form found there (kube-proxy's addresses, or this
// daemon's routes after a switch) converted: the wanted IPs bound the new way before the old goes.
import { describe, expect, it } from 'vitest';

import { parseArgs } from '../../src/config.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { createLogger } from '../../src/log-json.js';
import { convertStrays } from '../../src/proxy/ipvs/binding.js';
import { IpvsProxier } from '../../src/proxy/ipvs/proxier.js';
import { fakeIptables } from './lib/fake-iptables.js';
import { slice, svc } from './lib/objects.js';

const wanted = (...ips: string[]) => new Map(ips.map((ip) => [ip, 1]));

describe('convertStrays', () => {
  it('route: wanted addresses bridged through lo while they become routes; unwanted ones just go; link-local and excluded ones stay', async () => {
    const link = new FakeLinkClient();
    link.addLink('kube-ipvs0', 'dummy', true, ['10.96.0.1', '10.96.0.2', 'fd00::1', 'fe80::1', '10.200.0.1']);
    const r = await convertStrays(link, 'kube-ipvs0', 'route', wanted('10.96.0.1', 'fd00::1', '10.96.0.3'), ['10.200.0.0/16']);
    // the dummy's last IPv4 address deleted, the kernel drops every IPv4 route through it: lo holds them meanwhile
    expect(link.calls).toEqual(['listAddresses kube-ipvs0', 'addLocalRoutes lo', 'deleteAddresses kube-ipvs0', 'addLocalRoutes kube-ipvs0', 'deleteLocalRoutes lo']);
    expect(await link.listLocalRoutes('lo')).toEqual([]);
    expect(r.errors).toEqual([]);
    expect((await link.listLocalRoutes('kube-ipvs0')).sort()).toEqual(['10.96.0.1', '10.96.0.3', 'fd00::1']);
    expect(r.bound.sort()).toEqual(['10.96.0.1', '10.96.0.3', 'fd00::1']);
    expect((await link.listAddresses('kube-ipvs0')).sort()).toEqual(['10.200.0.1', 'fe80::1']);
  });

  it('address: this daemon\'s routes become addresses; a route whose address fails stays, and the failure is named once', async () => {
    const link = new FakeLinkClient();
    link.addLink('kube-ipvs0', 'dummy', true);
    await link.addLocalRoutes('kube-ipvs0', ['10.96.0.1', '10.96.0.2', '10.96.0.9']);
    link.failAddress('10.96.0.2', 'EPERM');
    const r = await convertStrays(link, 'kube-ipvs0', 'address', wanted('10.96.0.1', '10.96.0.2'), []);
    expect(await link.listAddresses('kube-ipvs0')).toEqual(['10.96.0.1']);
    expect(await link.listLocalRoutes('kube-ipvs0')).toEqual(['10.96.0.2']);
    expect(r.bound).toEqual(['10.96.0.1']);
    expect(r.errors).toEqual([{ object: 'address 10.96.0.2 dev kube-ipvs0', reason: expect.stringMatching(/EPERM/) }]);
  });

  it('the first node step drops a bridge a conversion stopped half-way left', async () => {
    const link = new FakeLinkClient();
    await link.addLocalRoutes('lo', ['10.96.0.10']);
    const proxier = daemon(link);
    await proxier.sync();
    await proxier.verified();
    expect(await link.listLocalRoutes('lo')).toEqual([]);
    expect(await link.listLocalRoutes('kube-ipvs0')).toEqual(['10.96.0.10']);
  });

  it('nothing of the other form: one read, no write', async () => {
    const link = new FakeLinkClient();
    link.addLink('kube-ipvs0', 'dummy', true, ['fe80::1']);
    expect(await convertStrays(link, 'kube-ipvs0', 'route', wanted('10.96.0.1'), [])).toEqual({ bound: [], errors: [] });
    expect(link.calls).toEqual(['listAddresses kube-ipvs0']);
  });
});

function daemon(link: FakeLinkClient, flags: string[] = []) {
  const proxier = new IpvsProxier({
    config: parseArgs(['--hostname-override', 'n1', ...flags]).config,
    nodeName: 'n1',
    logger: createLogger({ format: 'json', verbosity: 0 }, { write: () => true } as never),
    dummyName: 'kube-ipvs0',
    clients: { ipvs: new FakeIpvsClient(), ipset: new FakeIpsetClient(), link, iptables: { ipv4: fakeIptables().ipt, ipv6: null } },
    conntrack: async () => {},
    sysctl: () => [],
  });
  const handler = proxier.handler(() => {});
  handler.onService('ns/a', svc('a', '10.96.0.10'));
  handler.onEndpointSlice('ns/a-1', slice('a', ['10.244.1.2']));
  return proxier;
}

describe('the proxier binds Service IPs', () => {
  it('as local routes through an up kube-ipvs0 by default, taking over kube-proxy\'s addresses', async () => {
    const link = new FakeLinkClient();
    link.addLink('kube-ipvs0', 'dummy', false, ['10.96.0.10', '10.96.0.99']); // as kube-proxy left it
    const proxier = daemon(link);
    await proxier.sync();
    await proxier.verified();
    expect(await link.getLink('kube-ipvs0')).toMatchObject({ up: true });
    expect(await link.listLocalRoutes('kube-ipvs0')).toEqual(['10.96.0.10']);
    expect(await link.listAddresses('kube-ipvs0')).toEqual([]);
    // a later verification finds nothing to do
    const calls = link.calls.length;
    await proxier.sync({ periodic: true });
    await proxier.verified();
    expect(link.calls.slice(calls).filter((c) => /^(add|delete)/.test(c))).toEqual([]);
  });

  it('as addresses with --ipvs-address-binding=address (kube-proxy\'s layout, link left down), taking over routes', async () => {
    const link = new FakeLinkClient();
    link.addLink('kube-ipvs0', 'dummy', false);
    await link.addLocalRoutes('kube-ipvs0', ['10.96.0.10', '10.96.0.99']);
    const proxier = daemon(link, ['--ipvs-address-binding', 'address']);
    await proxier.sync();
    await proxier.verified();
    expect(await link.getLink('kube-ipvs0')).toMatchObject({ up: false });
    expect(await link.listAddresses('kube-ipvs0')).toEqual(['10.96.0.10']);
    expect(await link.listLocalRoutes('kube-ipvs0')).toEqual([]);
  });

  it('refuses an unknown binding in one line', () => {
    expect(() => parseArgs(['--ipvs-address-binding', 'alias'])).toThrow(/--ipvs-address-binding.*alias|address binding/);
  });
});
