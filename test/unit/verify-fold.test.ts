// The verification's fold of destination reads: what it keeps, what it marks.
import { describe, expect, it } from 'vitest';

import type { DestinationStatus, ServiceKey } from '../../src/kernel/ipvs/types.js';
import { emptyDelta } from '../../src/proxy/ipvs/desired-index.js';
import { emptyObserved } from '../../src/proxy/ipvs/observe.js';
import { emptyFold, foldDestinations } from '../../src/proxy/ipvs/verify.js';

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
});
