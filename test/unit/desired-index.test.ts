// DesiredIndex: per-service contributions aggregated, refcounted, with owner-wins conflicts.
import { describe, expect, it } from 'vitest';

import type { Destination, VirtualService } from '../../src/kernel/ipvs/types.js';
import { DesiredIndex, emptyDelta, isEmptyDelta, mergeDelta, type DesiredDelta } from '../../src/proxy/ipvs/desired-index.js';
import type { ServiceContribution } from '../../src/proxy/ipvs/types.js';

const svc = (address: string, port: number, extra: Partial<VirtualService> = {}): VirtualService => ({
  family: address.includes(':') ? 'ipv6' : 'ipv4', protocol: 'tcp', address, port, fwmark: null, scheduler: 'rr', flags: [], timeout: 0, netmask: address.includes(':') ? 128 : 32, ...extra,
});
const dst = (address: string, port = 8080, weight = 1): Destination => ({ address, port, forward: 'masq', weight, upperThreshold: 0, lowerThreshold: 0 });
const contrib = (key: string, parts: Partial<ServiceContribution> = {}): ServiceContribution => ({
  key, virtualServers: [], ipsetEntries: [], addresses: [], healthCheck: null, errors: [], ...parts,
});
/** A ClusterIP service: one VS, its KUBE-CLUSTER-IP entry and address. */
const clusterIP = (key: string, ip: string, port: number, endpoints: string[]): ServiceContribution =>
  contrib(key, {
    virtualServers: [{ service: svc(ip, port), destinations: endpoints.map((e) => dst(e)) }],
    ipsetEntries: [{ set: 'KUBE-CLUSTER-IP', entry: `${ip},tcp:${port}` }],
    addresses: [ip],
  });
const plain = (d: DesiredDelta) => ({
  virtualServers: [...d.virtualServers].sort(),
  ipsetEntries: Object.fromEntries([...d.ipsetEntries].map(([s, e]) => [s, [...e].sort()])),
  addresses: [...d.addresses].sort(),
  healthChecks: [...d.healthChecks].sort(),
});

describe('DesiredIndex', () => {
  it('keeps the destinations that did not change as the objects it held (shared with what was applied)', () => {
    const idx = new DesiredIndex();
    idx.set('ns/a:http/tcp', clusterIP('ns/a:http/tcp', '10.96.0.1', 80, ['10.244.0.1', '10.244.0.2', '10.244.0.3']));
    const id = [...idx.virtualServers().keys()][0]!;
    const before = idx.virtualServers().get(id)!.destinations;
    // Fresh objects for the same endpoints: nothing touched, every object kept.
    expect(isEmptyDelta(idx.set('ns/a:http/tcp', clusterIP('ns/a:http/tcp', '10.96.0.1', 80, ['10.244.0.1', '10.244.0.2', '10.244.0.3'])))).toBe(true);
    expect(idx.virtualServers().get(id)!.destinations.every((d, i) => d === before[i])).toBe(true);
    // One replaced, one reweighted: those two are new, the third is the object it was.
    const next = clusterIP('ns/a:http/tcp', '10.96.0.1', 80, ['10.244.0.1', '10.244.0.2', '10.244.0.9']);
    next.virtualServers[0]!.destinations[1] = dst('10.244.0.2', 8080, 5);
    expect(plain(idx.set('ns/a:http/tcp', next)).virtualServers).toEqual([id]);
    const after = idx.virtualServers().get(id)!.destinations;
    expect(after.map((d) => [d.address, d.weight])).toEqual([['10.244.0.1', 1], ['10.244.0.2', 5], ['10.244.0.9', 1]]);
    expect(after[0]).toBe(before[0]);
    expect(after[1]).not.toBe(before[1]);
  });

  it('one address on two ports: both real servers kept, compared and changed by their own port', () => {
    const idx = new DesiredIndex();
    const two = (w1: number, w2: number): ServiceContribution =>
      contrib('ns/a:http/tcp', { virtualServers: [{ service: svc('10.96.0.1', 80), destinations: [dst('10.244.0.1', 8080, w1), dst('10.244.0.1', 9090, w2), dst('10.244.0.2', 8080, 1)] }] });
    idx.set('ns/a:http/tcp', two(1, 1));
    const id = [...idx.virtualServers().keys()][0]!;
    const before = idx.virtualServers().get(id)!.destinations;
    expect(before.map((d) => `${d.address}:${d.port}`)).toEqual(['10.244.0.1:8080', '10.244.0.1:9090', '10.244.0.2:8080']);
    // The same again: nothing touched, every object kept (the first port's object too).
    expect(isEmptyDelta(idx.set('ns/a:http/tcp', two(1, 1)))).toBe(true);
    expect(idx.virtualServers().get(id)!.destinations.every((d, i) => d === before[i])).toBe(true);
    // Only the first port reweighted: touched; the second port and the other address keep their objects.
    expect([...idx.set('ns/a:http/tcp', two(5, 1)).virtualServers]).toEqual([id]);
    const after = idx.virtualServers().get(id)!.destinations;
    expect(after.map((d) => d.weight)).toEqual([5, 1, 1]);
    expect(after[0]).not.toBe(before[0]);
    expect(after[2]).toBe(before[2]);
    // Only the second port reweighted: touched as well.
    expect([...idx.set('ns/a:http/tcp', two(5, 3)).virtualServers]).toEqual([id]);
    expect(idx.virtualServers().get(id)!.destinations.map((d) => d.weight)).toEqual([5, 3, 1]);
  });

  it('set() returns what it touched; the same contribution again touches nothing; null removes', () => {
    const ix = new DesiredIndex();
    const a = clusterIP('default/a:http/tcp', '10.96.0.10', 80, ['10.244.1.2', '10.244.1.3']);
    expect(plain(ix.set(a.key, a))).toEqual({
      virtualServers: ['tcp/10.96.0.10:80'],
      ipsetEntries: { 'KUBE-CLUSTER-IP': ['10.96.0.10,tcp:80'] },
      addresses: ['10.96.0.10'],
      healthChecks: [],
    });
    expect(isEmptyDelta(ix.set(a.key, structuredClone(a)))).toBe(true);
    expect(ix.virtualServers().get('tcp/10.96.0.10:80')).toMatchObject({ owner: a.key, destinations: [dst('10.244.1.2'), dst('10.244.1.3')] });
    expect(ix.size).toBe(1);

    // one endpoint more: only the virtual server is touched
    const a2 = clusterIP(a.key, '10.96.0.10', 80, ['10.244.1.2', '10.244.1.3', '10.244.1.4']);
    expect(plain(ix.set(a.key, a2))).toEqual({ virtualServers: ['tcp/10.96.0.10:80'], ipsetEntries: {}, addresses: [], healthChecks: [] });
    // destination order does not matter
    const a3 = clusterIP(a.key, '10.96.0.10', 80, ['10.244.1.4', '10.244.1.2', '10.244.1.3']);
    expect(isEmptyDelta(ix.set(a.key, a3))).toBe(true);

    expect(plain(ix.set(a.key, null))).toEqual({
      virtualServers: ['tcp/10.96.0.10:80'],
      ipsetEntries: { 'KUBE-CLUSTER-IP': ['10.96.0.10,tcp:80'] },
      addresses: ['10.96.0.10'],
      healthChecks: [],
    });
    expect(ix.virtualServers().size).toBe(0);
    expect(ix.addresses().size).toBe(0);
    expect(ix.allSets()).toEqual([]);
    expect(isEmptyDelta(ix.set(a.key, null))).toBe(true);
  });

  it('a changed scheduler, flag or weight touches the virtual server', () => {
    const ix = new DesiredIndex();
    const base = contrib('k', { virtualServers: [{ service: svc('10.96.0.1', 80), destinations: [dst('10.0.0.1')] }] });
    ix.set('k', base);
    for (const change of [
      { service: svc('10.96.0.1', 80, { scheduler: 'lc' }), destinations: [dst('10.0.0.1')] },
      { service: svc('10.96.0.1', 80, { scheduler: 'lc', flags: ['persistent'], timeout: 10800 }), destinations: [dst('10.0.0.1')] },
      { service: svc('10.96.0.1', 80, { scheduler: 'lc', flags: ['persistent'], timeout: 10800 }), destinations: [dst('10.0.0.1', 8080, 2)] },
    ]) {
      expect([...ix.set('k', contrib('k', { virtualServers: [change] })).virtualServers]).toEqual(['tcp/10.96.0.1:80']);
    }
  });

  it('refcounts addresses and ipset entries shared by services (same externalIP, different ports)', () => {
    const ix = new DesiredIndex();
    const ext = (key: string, port: number) =>
      contrib(key, {
        virtualServers: [{ service: svc('192.0.2.10', port), destinations: [dst('10.244.1.2')] }],
        ipsetEntries: [
          { set: 'KUBE-EXTERNAL-IP', entry: `192.0.2.10,tcp:${port}` },
          { set: 'KUBE-LOOP-BACK', entry: '10.244.1.2,tcp:8080,10.244.1.2' },
        ],
        addresses: ['192.0.2.10'],
      });
    expect(plain(ix.set('a', ext('a', 80))).addresses).toEqual(['192.0.2.10']);
    const second = plain(ix.set('b', ext('b', 443)));
    expect(second).toEqual({ virtualServers: ['tcp/192.0.2.10:443'], ipsetEntries: { 'KUBE-EXTERNAL-IP': ['192.0.2.10,tcp:443'] }, addresses: [], healthChecks: [] });
    expect(ix.addresses().get('192.0.2.10')).toBe(2);
    expect(ix.ipsetEntries('KUBE-LOOP-BACK').get('10.244.1.2,tcp:8080,10.244.1.2')).toBe(2);

    const gone = plain(ix.set('a', null));
    expect(gone).toEqual({ virtualServers: ['tcp/192.0.2.10:80'], ipsetEntries: { 'KUBE-EXTERNAL-IP': ['192.0.2.10,tcp:80'] }, addresses: [], healthChecks: [] });
    expect(ix.hasIpsetEntry('KUBE-LOOP-BACK', '10.244.1.2,tcp:8080,10.244.1.2')).toBe(true);
    expect(ix.addresses().has('192.0.2.10')).toBe(true);

    const last = plain(ix.set('b', null));
    expect(last.addresses).toEqual(['192.0.2.10']);
    expect(last.ipsetEntries).toEqual({ 'KUBE-EXTERNAL-IP': ['192.0.2.10,tcp:443'], 'KUBE-LOOP-BACK': ['10.244.1.2,tcp:8080,10.244.1.2'] });
    expect(ix.hasIpsetEntry('KUBE-LOOP-BACK', '10.244.1.2,tcp:8080,10.244.1.2')).toBe(false);
  });

  it('two services claiming one virtual server: the first keeps it, the others get an error and take over in claim order', () => {
    const ix = new DesiredIndex();
    const claim = (key: string, ep: string) => contrib(key, { virtualServers: [{ service: svc('192.0.2.1', 80), destinations: [dst(ep)] }] });
    ix.set('ns/a:http/tcp', claim('ns/a:http/tcp', '10.0.0.1'));
    expect(isEmptyDelta(ix.set('ns/b:http/tcp', claim('ns/b:http/tcp', '10.0.0.2')))).toBe(true);
    ix.set('ns/c:http/tcp', claim('ns/c:http/tcp', '10.0.0.3'));
    expect(ix.virtualServers().get('tcp/192.0.2.1:80')).toMatchObject({ owner: 'ns/a:http/tcp', destinations: [dst('10.0.0.1')] });
    expect(ix.errors()).toEqual([
      { object: 'Service ns/b', reason: 'ns/b:http/tcp: virtual server tcp/192.0.2.1:80 is already programmed for ns/a:http/tcp; not programmed for this service', event: 'VirtualServerConflict' },
      { object: 'Service ns/c', reason: 'ns/c:http/tcp: virtual server tcp/192.0.2.1:80 is already programmed for ns/a:http/tcp; not programmed for this service', event: 'VirtualServerConflict' },
    ]);
    // a loser's change is not programmed: nothing to sync
    expect(isEmptyDelta(ix.set('ns/b:http/tcp', claim('ns/b:http/tcp', '10.0.0.9')))).toBe(true);
    // the owner leaves: the next claimant (b, with its latest contribution) takes over
    expect([...ix.set('ns/a:http/tcp', null).virtualServers]).toEqual(['tcp/192.0.2.1:80']);
    expect(ix.virtualServers().get('tcp/192.0.2.1:80')).toMatchObject({ owner: 'ns/b:http/tcp', destinations: [dst('10.0.0.9')] });
    expect(ix.errors().map((e) => e.object)).toEqual(['Service ns/c']);
    // a non-owner leaving touches nothing
    expect(isEmptyDelta(ix.set('ns/c:http/tcp', null))).toBe(true);
    expect(ix.errors()).toEqual([]);
    expect([...ix.set('ns/b:http/tcp', null).virtualServers]).toEqual(['tcp/192.0.2.1:80']);
    expect(ix.virtualServers().size).toBe(0);
  });

  it('the same claims in the same order give the same owner (deterministic)', () => {
    const owners = Array.from({ length: 3 }, () => {
      const ix = new DesiredIndex();
      for (const k of ['x', 'y', 'z']) ix.set(k, contrib(k, { virtualServers: [{ service: svc('192.0.2.1', 80), destinations: [] }] }));
      ix.set('x', null);
      return ix.virtualServers().get('tcp/192.0.2.1:80')!.owner;
    });
    expect(owners).toEqual(['y', 'y', 'y']);
  });

  it('canonical IPv6 text, duplicates within a contribution dropped, service errors reported', () => {
    const ix = new DesiredIndex();
    const c = contrib('k', {
      virtualServers: [
        { service: svc('FD00:96:0::1', 80), destinations: [dst('FD00::2'), dst('fd00::2')] },
        { service: svc('fd00:96::1', 80), destinations: [] },
      ],
      addresses: ['FD00:96::1', 'fd00:96::1'],
      errors: [{ object: 'Service ns/k', reason: 'unknown scheduler "foo"' }],
    });
    const d = ix.set('k', c);
    expect([...d.virtualServers]).toEqual(['tcp/[fd00:96::1]:80']);
    expect([...d.addresses]).toEqual(['fd00:96::1']);
    expect(ix.virtualServers().get('tcp/[fd00:96::1]:80')!.destinations).toEqual([dst('fd00::2')]);
    expect(ix.errors()).toEqual([{ object: 'Service ns/k', reason: 'unknown scheduler "foo"' }]);
    ix.set('k', { ...c, errors: [] });
    expect(ix.errors()).toEqual([]);
  });

  it('health checks by node port, with their changes in the delta', () => {
    const ix = new DesiredIndex();
    const hc = (n: number) => contrib('ns/web:http/tcp', { healthCheck: { port: 30100, service: 'ns/web', localEndpoints: n } });
    expect([...ix.set('ns/web:http/tcp', hc(2)).healthChecks]).toEqual(['ns/web:http/tcp']);
    expect(ix.healthChecks().get(30100)).toMatchObject({ service: 'ns/web', localEndpoints: 2 });
    expect(isEmptyDelta(ix.set('ns/web:http/tcp', hc(2)))).toBe(true);
    expect([...ix.set('ns/web:http/tcp', hc(1)).healthChecks]).toEqual(['ns/web:http/tcp']);
    expect(ix.healthChecks().get(30100)).toMatchObject({ localEndpoints: 1 });
    ix.set('ns/web:http/tcp', null);
    expect(ix.healthChecks().size).toBe(0);
  });

  it('deltas merge (events coalesced before one sync)', () => {
    const ix = new DesiredIndex();
    const d1 = ix.set('a', clusterIP('a', '10.96.0.1', 80, ['10.0.0.1']));
    const d2 = ix.set('b', clusterIP('b', '10.96.0.2', 80, ['10.0.0.2']));
    const merged = ix.mergeDeltas([d1, d2]);
    expect(plain(merged).virtualServers).toEqual(['tcp/10.96.0.1:80', 'tcp/10.96.0.2:80']);
    expect(plain(merged).ipsetEntries['KUBE-CLUSTER-IP']).toEqual(['10.96.0.1,tcp:80', '10.96.0.2,tcp:80']);
    const into = emptyDelta();
    mergeDelta(into, d1);
    expect(plain(into).addresses).toEqual(['10.96.0.1']);
  });
});

describe('DesiredIndex: internal-traffic redirects', () => {
  const r = (address: string, family: 'ipv4' | 'ipv6' = 'ipv4') => ({
    family, protocol: 'tcp' as const, address, port: 80, clusterIP: family === 'ipv4' ? '10.96.0.10' : 'fd00::a', sourceRanges: false, service: 'ns/a:http',
  });
  it('per family, by service key; the version changes only when they do', () => {
    const idx = new DesiredIndex();
    idx.set('ns/z:http/tcp', clusterIP('ns/z:http/tcp', '10.96.0.9', 80, []));
    expect(idx.redirectVersion).toBe(0); // a service without redirects costs no rebuild
    idx.set('ns/b:http/tcp', contrib('ns/b:http/tcp', { redirects: [r('192.0.2.2')] }));
    idx.set('ns/a:http/tcp', contrib('ns/a:http/tcp', { redirects: [r('192.0.2.1'), r('2001:db8::1', 'ipv6')] }));
    const v = idx.redirectVersion;
    expect(idx.redirects('ipv4').map((x) => x.address)).toEqual(['192.0.2.1', '192.0.2.2']);
    expect(idx.redirects('ipv6').map((x) => x.address)).toEqual(['2001:db8::1']);
    idx.set('ns/a:http/tcp', contrib('ns/a:http/tcp', { redirects: [r('192.0.2.1'), r('2001:db8::1', 'ipv6')] }));
    expect(idx.redirectVersion).toBe(v);
    idx.set('ns/a:http/tcp', null);
    expect(idx.redirectVersion).toBeGreaterThan(v);
    expect(idx.redirects('ipv4').map((x) => x.address)).toEqual(['192.0.2.2']);
    expect(idx.redirects('ipv6')).toEqual([]);
  });
});
