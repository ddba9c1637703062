// The verification's folds of its reads: what they keep, what they mark. A read that matches what
// the proxier believes leaves nothing of itself behind.
import { describe, expect, it } from 'vitest';

import { serviceId, type DestinationStatus, type ServiceKey, type ServiceStatus, type VirtualService } from '../../src/kernel/ipvs/types.js';
import { emptyDelta } from '../../src/proxy/ipvs/desired-index.js';
import { emptyObserved } from '../../src/proxy/ipvs/observe.js';
import { emptyFold, foldDestinations, foldSet, ServiceListFold } from '../../src/proxy/ipvs/verify-fold.js';

const key: ServiceKey = { family: 'ipv4', protocol: 'tcp', address: '10.96.0.1', port: 80, fwmark: null };
const ID = 'tcp/10.96.0.1:80';
const dest = (address: string, weight = 1) => ({ address, port: 8080, forward: 'masq' as const, weight, upperThreshold: 0, lowerThreshold: 0 });
const status = (address: string, weight = 1, conns = 0): DestinationStatus => ({ ...dest(address, weight), activeConns: conns, inactiveConns: 0, persistConns: 0 });

function observedWith(...ds: ReturnType<typeof dest>[]) {
  const o = emptyObserved();
  const service = { ...key, scheduler: 'rr', flags: [], timeout: 0, netmask: 0xffffffff, pe: null };
  o.virtualServers.set(ID, { service, destinations: new Map(ds.map((d) => [`${d.address}:8080`, d])) });
  return o;
}

describe('foldDestinations', () => {
  it('a read that matches keeps the map and its (shared) objects, and marks nothing', () => {
    const a = dest('10.244.1.2');
    const b = dest('10.244.2.2');
    const o = observedWith(a, b);
    const map = o.virtualServers.get(ID)!.destinations;
    const f = emptyFold();
    foldDestinations(o, [key], [[status('10.244.2.2', 1, 7), status('10.244.1.2')]], new Set(), emptyDelta(), f);
    expect(o.virtualServers.get(ID)!.destinations).toBe(map);
    expect(map.get('10.244.1.2:8080')).toBe(a);
    expect(f.virtualServers.size).toBe(0);
  });

  it('a changed weight, a missing and a stray destination: marked, unchanged ones keep their objects', () => {
    const a = dest('10.244.1.2');
    const o = observedWith(a, dest('10.244.2.2'), dest('10.244.3.2'));
    const f = emptyFold();
    foldDestinations(o, [key], [[status('10.244.1.2'), status('10.244.2.2', 0), status('10.244.9.9')]], new Set(), emptyDelta(), f);
    const got = o.virtualServers.get(ID)!.destinations;
    expect([...got.keys()].sort()).toEqual(['10.244.1.2:8080', '10.244.2.2:8080', '10.244.9.9:8080']);
    expect(got.get('10.244.1.2:8080')).toBe(a);
    expect(got.get('10.244.2.2:8080')!.weight).toBe(0);
    expect([...f.virtualServers]).toEqual([ID]);
  });

  it('an unread virtual server (adoption) is marked even when its read matches', () => {
    const o = observedWith(dest('10.244.1.2'));
    const f = emptyFold();
    foldDestinations(o, [key], [[status('10.244.1.2')]], new Set([ID]), emptyDelta(), f);
    expect([...f.virtualServers]).toEqual([ID]);
  });

  it('adopting a programmed kernel: a read real server that is the desired one is kept as the desired object, a stray one with its counts', () => {
    const o = emptyObserved();
    o.virtualServers.set(ID, { service: { ...key, scheduler: 'rr', flags: [], timeout: 0, netmask: 0xffffffff, pe: null }, destinations: new Map() });
    const wanted = dest('10.244.1.2');
    const f = emptyFold();
    foldDestinations(o, [key], [[status('10.244.9.9', 1, 3), status('10.244.1.2', 1, 5)]], new Set([ID]), emptyDelta(), f, new Map([[ID, { destinations: [wanted] }]]));
    const got = o.virtualServers.get(ID)!.destinations;
    expect(got.get('10.244.1.2:8080')).toBe(wanted);
    expect(got.get('10.244.9.9:8080')).toMatchObject({ activeConns: 3 });
  });
});

const svc = (port: number, scheduler = 'rr'): VirtualService => ({
  family: 'ipv4', protocol: 'tcp', address: '10.96.0.1', port, fwmark: null, scheduler, flags: [], timeout: 0, netmask: 32, pe: null,
});
function observedOf(services: VirtualService[]) {
  const o = emptyObserved();
  for (const s of services) o.virtualServers.set(serviceId(s), { service: s, destinations: new Map() });
  return o;
}

describe('ServiceListFold and foldSet', () => {
  it('services: folded one at a time as read (all at once here); those that read as observed keep the observed object', () => {
    const [a, b, c] = [svc(80), svc(81), svc(82)];
    const observed = observedOf([a, b, c]);
    const desired = new Map([a, b, c].map((s) => [serviceId(s), s]));
    let made = 0;
    const read = (function* (): Generator<ServiceStatus> {
      for (const s of [svc(80), svc(81, 'wrr'), svc(83)]) {
        made++;
        yield { ...s, stats: { conns: 1, inPkts: 0, outPkts: 0, inBytes: 0, outBytes: 0, cps: 0, inPps: 0, outPps: 0, inBps: 0, outBps: 0 } };
      }
    })();
    const fold = emptyFold();
    const list = new ServiceListFold(observed, desired);
    expect(list.add(read, observed, emptyDelta(), fold)).toBe(true);
    const { keys, unread } = list;
    expect(made).toBe(3);
    expect(keys[0]).toBe(a); // unchanged: the observed object, not the read
    expect(keys[1]).toMatchObject({ port: 81, scheduler: 'wrr' });
    expect(keys[1]).not.toHaveProperty('stats');
    expect(observed.virtualServers.get(serviceId(b))!.service.scheduler).toBe('wrr');
    expect([...fold.virtualServers].sort()).toEqual([serviceId(b), serviceId(c), serviceId(svc(83))].sort());
    expect(observed.virtualServers.has(serviceId(c))).toBe(false);
    expect(unread.size).toBe(0);
  });

  it('services a slice at a time: what partial syncs touch between slices is left alone; a replaced observed stops the fold', () => {
    const [a, b, c] = [svc(80), svc(81), svc(82)];
    const observed = observedOf([a, b, c]);
    const desired = new Map([a, b, c].map((s) => [serviceId(s), s]));
    const list = new ServiceListFold(observed, desired);
    const rows = [svc(80), svc(81), svc(82, 'wrr')][Symbol.iterator]();
    const touched = emptyDelta();
    const fold = emptyFold();
    expect(list.add(rows, observed, touched, fold, 2)).toBe(false);
    expect(list.keys).toEqual([a, b]);
    // a partial sync between two slices adds svc(83) (after the read) and changes c
    const d = svc(83);
    observed.virtualServers.set(serviceId(d), { service: d, destinations: new Map() });
    touched.virtualServers.add(serviceId(d)).add(serviceId(c));
    expect(list.add(rows, observed, touched, fold, 2)).toBe(true);
    expect(observed.virtualServers.has(serviceId(d))).toBe(true);
    expect(observed.virtualServers.get(serviceId(c))!.service).toBe(c); // its stale read is not taken
    expect(fold.virtualServers.size).toBe(0);

    const later = new ServiceListFold(observed, desired);
    expect(later.add([svc(90)][Symbol.iterator](), observedOf([]), emptyDelta(), fold)).toBe(true);
    expect(later.keys).toEqual([]);
    expect(fold.virtualServers.size).toBe(0);
  });

  it('ipsets: a set that reads as observed keeps the observed set; a difference replaces it and is folded', () => {
    const observed = observedOf([]);
    const had = new Set(['10.96.0.1,tcp:80', '10.96.0.2,tcp:80']);
    observed.ipsets.set('KUBE-CLUSTER-IP', had);
    const wanted = new Map([...had].map((e) => [e, 1]));
    const fold = emptyFold();
    foldSet(observed, 'KUBE-CLUSTER-IP', ['10.96.0.2,tcp:80', '10.96.0.1,tcp:80'], wanted, emptyDelta(), fold);
    expect(observed.ipsets.get('KUBE-CLUSTER-IP')).toBe(had);
    expect(fold.ipsetEntries.size).toBe(0);

    const touched = emptyDelta();
    touched.ipsetEntries.set('KUBE-CLUSTER-IP', new Set(['10.96.0.3,tcp:80'])); // added by a partial sync during the read
    had.add('10.96.0.3,tcp:80');
    foldSet(observed, 'KUBE-CLUSTER-IP', ['10.96.0.1,tcp:80', '10.96.0.2,tcp:80'], wanted, touched, fold);
    expect(observed.ipsets.get('KUBE-CLUSTER-IP')).toBe(had);

    foldSet(observed, 'KUBE-CLUSTER-IP', ['10.96.0.1,tcp:80'], wanted, emptyDelta(), fold);
    expect(observed.ipsets.get('KUBE-CLUSTER-IP')).toEqual(new Set(['10.96.0.1,tcp:80']));
    expect(fold.ipsetEntries.get('KUBE-CLUSTER-IP')).toEqual(new Set(['10.96.0.2,tcp:80', '10.96.0.3,tcp:80']));
  });
});
