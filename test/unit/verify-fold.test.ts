// The verification's folds keep none of a read that matches what the proxier believes.
import { describe, expect, it } from 'vitest';

import { serviceId, type ServiceStatus, type VirtualService } from '../../src/kernel/ipvs/types.js';
import { emptyDelta } from '../../src/proxy/ipvs/desired-index.js';
import type { ObservedState } from '../../src/proxy/ipvs/types.js';
import { emptyFold, foldServices, foldSet } from '../../src/proxy/ipvs/verify.js';

const svc = (port: number, scheduler = 'rr'): VirtualService => ({
  family: 'ipv4', protocol: 'tcp', address: '10.96.0.1', port, fwmark: null, scheduler, flags: [], timeout: 0, netmask: 32, pe: null,
});
const observedOf = (services: VirtualService[]): ObservedState => ({
  virtualServers: new Map(services.map((s) => [serviceId(s), { service: s, destinations: new Map() }])),
  ipsets: new Map(),
  addresses: new Set(),
  iptables: new Map(),
});

describe('verification folds', () => {
  it('services: folded one at a time as read; those that read as observed keep the observed object', () => {
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
    const { keys, unread } = foldServices(observed, read, desired, emptyDelta(), fold);
    expect(made).toBe(3);
    expect(keys[0]).toBe(a); // unchanged: the observed object, not the read
    expect(keys[1]).toMatchObject({ port: 81, scheduler: 'wrr' });
    expect(keys[1]).not.toHaveProperty('stats');
    expect(observed.virtualServers.get(serviceId(b))!.service.scheduler).toBe('wrr');
    expect([...fold.virtualServers].sort()).toEqual([serviceId(b), serviceId(c), serviceId(svc(83))].sort());
    expect(observed.virtualServers.has(serviceId(c))).toBe(false);
    expect(unread.size).toBe(0);
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
