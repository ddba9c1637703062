// plan(): table tests of every rule — scope, zero-op syncs, in-place updates, ordering,
// graceful termination, exclude CIDRs, ipsets and addresses. No kernel, no fakes: pure data.
import { describe, expect, it } from 'vitest';

import type { IpvsOp } from '../../src/kernel/ipvs/client.js';
import { destinationId, serviceId, type Destination, type VirtualService } from '../../src/kernel/ipvs/types.js';
import { GracefulState } from '../../src/proxy/ipvs/graceful.js';
import { DesiredIndex, emptyDelta, type DesiredDelta } from '../../src/proxy/ipvs/desired-index.js';
import { isEmptyPlan, plan, type Plan, type PlanOptions } from '../../src/proxy/ipvs/plan.js';
import type { DesiredVirtualServer, ObservedState, ServiceContribution } from '../../src/proxy/ipvs/types.js';

const svc = (address: string, port: number, extra: Partial<VirtualService> = {}): VirtualService => ({
  family: address.includes(':') ? 'ipv6' : 'ipv4', protocol: 'tcp', address, port, fwmark: null, scheduler: 'rr', flags: [], timeout: 0, netmask: address.includes(':') ? 128 : 32, ...extra,
});
const dst = (address: string, port = 8080, extra: Partial<Destination> = {}): Destination => ({ address, port, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, ...extra });
const vs = (service: VirtualService, destinations: Destination[]): DesiredVirtualServer => ({ service, destinations });
const contrib = (key: string, vss: DesiredVirtualServer[], parts: Partial<ServiceContribution> = {}): ServiceContribution => ({
  key, virtualServers: vss, ipsetEntries: [], addresses: [], healthCheck: null, errors: [], ...parts,
});
type Conns = { active?: number; inactive?: number };
/** Observed state from virtual servers (destinations may carry connection counts). */
function observedOf(vss: Array<DesiredVirtualServer & { conns?: Record<string, Conns> }>, extra: Partial<ObservedState> = {}): ObservedState {
  return {
    virtualServers: new Map(
      vss.map((v) => [
        serviceId(v.service),
        {
          service: v.service,
          destinations: new Map(v.destinations.map((d) => [destinationId(d), { ...d, activeConns: v.conns?.[destinationId(d)]?.active ?? 0, inactiveConns: v.conns?.[destinationId(d)]?.inactive ?? 0 }])),
        },
      ]),
    ),
    ipsets: new Map(),
    ipsetCapacity: new Map(),
    addresses: new Set(),
    iptables: new Map(),
    ...extra,
  };
}
function indexOf(...cs: ServiceContribution[]): DesiredIndex {
  const ix = new DesiredIndex();
  for (const c of cs) ix.set(c.key, c);
  return ix;
}
const NOW = 1_000_000;
const opts = (o: Partial<PlanOptions> = {}): PlanOptions => ({ now: NOW, gracefulTimeoutMs: 15 * 60_000, excludeCIDRs: [], ownedSets: [], ...o });
/** Ops as short strings: `addService tcp/10.96.0.1:80`, `updateDestination tcp/10.96.0.1:80 10.0.0.1:8080 w=0`. */
const brief = (p: Plan) =>
  p.ipvs.map((op: IpvsOp) => {
    const head = `${op.kind} ${serviceId(op.service)}`;
    if (!('destination' in op)) return op.kind === 'updateService' || op.kind === 'addService' ? `${head} ${op.service.scheduler}` : head;
    return 'weight' in op.destination ? `${head} ${destinationId(op.destination)} w=${op.destination.weight}` : `${head} ${destinationId(op.destination)}`;
  });
const scope = (...ids: string[]): DesiredDelta => ({ ...emptyDelta(), virtualServers: new Set(ids) });

const A = svc('10.96.0.1', 80);
const B = svc('10.96.0.2', 80);
const U = svc('10.96.0.10', 53, { protocol: 'udp' });

describe('plan: virtual servers and destinations', () => {
  it('nothing desired, nothing observed: an empty plan', () => {
    const p = plan(new DesiredIndex(), observedOf([]), 'full', new GracefulState(), opts());
    expect(isEmptyPlan(p)).toBe(true);
    expect(p.counts.virtualServers).toBe(0);
  });

  it('a new service: the service first, then its destinations', () => {
    const ix = indexOf(contrib('a', [vs(A, [dst('10.0.0.1'), dst('10.0.0.2')])]));
    const p = plan(ix, observedOf([]), 'full', new GracefulState(), opts());
    expect(brief(p)).toEqual(['addService tcp/10.96.0.1:80 rr', 'addDestination tcp/10.96.0.1:80 10.0.0.1:8080 w=1', 'addDestination tcp/10.96.0.1:80 10.0.0.2:8080 w=1']);
    expect(p.counts).toMatchObject({ addService: 1, addDestination: 2, virtualServers: 1 });
  });

  it('no change: zero ops on a full sync and on a partial one', () => {
    const desired = [vs(A, [dst('10.0.0.1'), dst('10.0.0.2')]), vs(B, [dst('10.0.0.3')])];
    const ix = indexOf(contrib('a', [desired[0]!]), contrib('b', [desired[1]!]));
    const observed = observedOf(desired);
    for (const s of ['full' as const, scope(serviceId(A), serviceId(B))]) {
      const p = plan(ix, observed, s, new GracefulState(), opts());
      expect(isEmptyPlan(p)).toBe(true);
      expect(p.draining.start).toEqual([]);
      expect(p.counts.virtualServers).toBe(2);
    }
  });

  it('a partial sync compares only the scope: drift elsewhere waits for the full sync', () => {
    const ix = indexOf(contrib('a', [vs(A, [dst('10.0.0.1'), dst('10.0.0.2')])]), contrib('b', [vs(B, [dst('10.0.0.3')])]));
    // kernel: A lacks 10.0.0.2 (the change), B has a wrong weight (drift)
    const observed = observedOf([vs(A, [dst('10.0.0.1')]), vs(B, [dst('10.0.0.3', 8080, { weight: 5 })])]);
    const partial = plan(ix, observed, scope(serviceId(A)), new GracefulState(), opts());
    expect(brief(partial)).toEqual(['addDestination tcp/10.96.0.1:80 10.0.0.2:8080 w=1']);
    expect(partial.counts.virtualServers).toBe(1);
    const full = plan(ix, observed, 'full', new GracefulState(), opts());
    expect(brief(full)).toEqual(['addDestination tcp/10.96.0.1:80 10.0.0.2:8080 w=1', 'updateDestination tcp/10.96.0.2:80 10.0.0.3:8080 w=1']);
  });

  it.each<[string, Partial<VirtualService>]>([
    ['scheduler', { scheduler: 'lc' }],
    ['flags', { flags: ['persistent'] }],
    ['timeout', { timeout: 10800 }],
    ['netmask', { netmask: 24 }],
    ['persistence engine', { pe: 'sip' }],
  ])('a changed %s is an updateService, never delete + add', (_name, change) => {
    const ix = indexOf(contrib('a', [vs({ ...A, ...change }, [dst('10.0.0.1')])]));
    const p = plan(ix, observedOf([vs(A, [dst('10.0.0.1')])]), 'full', new GracefulState(), opts());
    expect(p.ipvs).toEqual([{ kind: 'updateService', service: { ...A, ...change } }]);
  });

  it('scheduler flags compare as the kernel stores them (sh-fallback = flag-1 = mh-fallback); pe null = absent', () => {
    const ix = indexOf(contrib('a', [vs(svc('10.96.0.1', 80, { flags: ['flag-1', 'flag-2'] }), [])]));
    const observed = observedOf([vs(svc('10.96.0.1', 80, { flags: ['sh-port', 'sh-fallback'], pe: null }), [])]);
    expect(isEmptyPlan(plan(ix, observed, 'full', new GracefulState(), opts()))).toBe(true);
  });

  it.each<[string, Partial<Destination>]>([
    ['weight', { weight: 3 }],
    ['forwarding method', { forward: 'tunnel' }],
    ['thresholds', { upperThreshold: 10, lowerThreshold: 2 }],
  ])('a changed destination %s is an updateDestination', (_name, change) => {
    const ix = indexOf(contrib('a', [vs(A, [dst('10.0.0.1', 8080, change)])]));
    const p = plan(ix, observedOf([vs(A, [dst('10.0.0.1')])]), scope(serviceId(A)), new GracefulState(), opts());
    expect(p.ipvs).toEqual([{ kind: 'updateDestination', service: A, destination: dst('10.0.0.1', 8080, change) }]);
  });

  it('ops are ordered so the kernel accepts them: add/update services, add/update destinations, delete destinations, delete services', () => {
    const C = svc('10.96.0.3', 80);
    const D = svc('10.96.0.4', 80, { protocol: 'udp' });
    const ix = indexOf(
      contrib('a', [vs(svc('10.96.0.1', 80, { scheduler: 'lc' }), [dst('10.0.0.1'), dst('10.0.0.9')])]),
      contrib('c', [vs(C, [dst('10.0.0.5')])]),
      contrib('d', [vs(D, [])]),
    );
    const observed = observedOf([vs(A, [dst('10.0.0.1')]), vs(B, [dst('10.0.0.3')]), vs(D, [dst('10.0.0.6', 53)])]);
    const p = plan(ix, observed, 'full', new GracefulState(), opts({ gracefulTimeoutMs: 0 }));
    const kinds = p.ipvs.map((o) => o.kind);
    expect(kinds).toEqual(['updateService', 'addService', 'addDestination', 'addDestination', 'deleteDestination', 'deleteService']);
    expect(brief(p)).toEqual([
      'updateService tcp/10.96.0.1:80 lc',
      'addService tcp/10.96.0.3:80 rr',
      'addDestination tcp/10.96.0.1:80 10.0.0.9:8080 w=1',
      'addDestination tcp/10.96.0.3:80 10.0.0.5:8080 w=1',
      'deleteDestination udp/10.96.0.4:80 10.0.0.6:53',
      'deleteService tcp/10.96.0.2:80',
    ]);
  });

  it('does not change its inputs', () => {
    const ix = indexOf(contrib('a', [vs(A, [dst('10.0.0.2')])]));
    const observed = observedOf([vs(A, [dst('10.0.0.1')]), vs(B, [])]);
    const g = new GracefulState();
    g.start(serviceId(B), '10.0.0.7:8080', { since: 0, protocol: 'tcp', countedAt: null });
    const before = structuredClone({ v: [...observed.virtualServers], g: [...g.draining] });
    plan(ix, observed, 'full', g, opts());
    expect({ v: [...observed.virtualServers], g: [...g.draining] }).toEqual(before);
  });
});

describe('plan: full sync ownership', () => {
  it('deletes kernel virtual servers nobody wants (fwmark ones too), except those inside excludeCIDRs', () => {
    const fw = svc('10.0.0.0', 0, { protocol: null, address: null, port: null, fwmark: 7 });
    const observed = observedOf([vs(A, [dst('10.0.0.1')]), vs(svc('172.16.5.5', 80), []), vs(svc('fd00:e::1', 80), []), vs(fw, [])]);
    const p = plan(new DesiredIndex(), observed, 'full', new GracefulState(), opts({ excludeCIDRs: ['172.16.0.0/12', 'fd00:e::/32'] }));
    expect(brief(p)).toEqual(['deleteService tcp/10.96.0.1:80', 'deleteService fwmark/7/ipv4']);
  });

  it('a partial sync never deletes what is outside its scope', () => {
    const p = plan(new DesiredIndex(), observedOf([vs(A, []), vs(B, [])]), scope(serviceId(B)), new GracefulState(), opts());
    expect(brief(p)).toEqual(['deleteService tcp/10.96.0.2:80']);
  });

  it('ipsets: owned sets missing are created and filled; stray entries deleted, missing added (full); only the delta (partial)', () => {
    const ix = indexOf(
      contrib('a', [], { ipsetEntries: [{ set: 'KUBE-CLUSTER-IP', entry: '10.96.0.1,tcp:80' }, { set: 'KUBE-LOOP-BACK', entry: '10.0.0.1,tcp:8080,10.0.0.1' }] }),
      contrib('b', [], { ipsetEntries: [{ set: 'KUBE-CLUSTER-IP', entry: '10.96.0.2,tcp:80' }] }),
    );
    const owned = [
      { spec: { name: 'KUBE-CLUSTER-IP', type: 'hash:ip,port' as const }, comment: '' },
      { spec: { name: 'KUBE-LOOP-BACK', type: 'hash:ip,port,ip' as const }, comment: '' },
    ];
    const observed = observedOf([], { ipsets: new Map([['KUBE-CLUSTER-IP', new Set(['10.96.0.2,tcp:80', '10.96.9.9,tcp:80'])]]) });
    const full = plan(ix, observed, 'full', new GracefulState(), opts({ ownedSets: owned }));
    expect(full.ipsetCreate).toEqual([owned[1]!.spec]);
    expect(full.ipsetAdd).toEqual(new Map([['KUBE-LOOP-BACK', ['10.0.0.1,tcp:8080,10.0.0.1']], ['KUBE-CLUSTER-IP', ['10.96.0.1,tcp:80']]]));
    expect(full.ipsetDel).toEqual(new Map([['KUBE-CLUSTER-IP', ['10.96.9.9,tcp:80']]]));
    expect(full.counts).toMatchObject({ ipsetCreate: 1, ipsetAdd: 2, ipsetDel: 1 });

    const observed2 = observedOf([], { ipsets: new Map([['KUBE-CLUSTER-IP', new Set(['10.96.0.2,tcp:80', '10.96.9.9,tcp:80'])], ['KUBE-LOOP-BACK', new Set()]]) });
    const delta = { ...emptyDelta(), ipsetEntries: new Map([['KUBE-CLUSTER-IP', new Set(['10.96.0.1,tcp:80', '10.96.0.2,tcp:80', '10.96.5.5,tcp:80'])]]) };
    const partial = plan(ix, observed2, delta, new GracefulState(), opts({ ownedSets: owned }));
    expect(partial.ipsetCreate).toEqual([]);
    expect(partial.ipsetAdd).toEqual(new Map([['KUBE-CLUSTER-IP', ['10.96.0.1,tcp:80']]]));
    expect(partial.ipsetDel).toEqual(new Map());
  });

  it('addresses: missing bound, stray unbound (not excluded or link-local ones) on a full sync; only the delta on a partial one', () => {
    const ix = indexOf(contrib('a', [], { addresses: ['10.96.0.1', 'fd00:96::1'] }));
    const observed = observedOf([], { addresses: new Set(['10.96.0.1', '10.96.0.99', '172.16.0.1', 'fe80::1']) });
    const full = plan(ix, observed, 'full', new GracefulState(), opts({ excludeCIDRs: ['172.16.0.0/16'] }));
    expect([full.addressAdd, full.addressDel]).toEqual([['fd00:96::1'], ['10.96.0.99']]);
    const partial = plan(ix, observed, { ...emptyDelta(), addresses: new Set(['fd00:96::1']) }, new GracefulState(), opts());
    expect([partial.addressAdd, partial.addressDel]).toEqual([['fd00:96::1'], []]);
  });
});

describe('plan: graceful termination', () => {
  const id = serviceId(A);

  it('a removed TCP destination goes to weight 0 and starts draining; nothing is deleted', () => {
    const ix = indexOf(contrib('a', [vs(A, [dst('10.0.0.1')])]));
    const p = plan(ix, observedOf([vs(A, [dst('10.0.0.1'), dst('10.0.0.2')])]), scope(id), new GracefulState(), opts());
    expect(brief(p)).toEqual(['updateDestination tcp/10.96.0.1:80 10.0.0.2:8080 w=0']);
    expect(p.draining.start).toEqual([{ vs: id, dest: '10.0.0.2:8080', protocol: 'tcp', since: NOW, op: 0 }]);
  });

  it('a removed destination already at weight 0 (a restart mid-drain) starts draining without an op', () => {
    const ix = indexOf(contrib('a', [vs(A, [])]));
    const p = plan(ix, observedOf([vs(A, [dst('10.0.0.2', 8080, { weight: 0 })])]), 'full', new GracefulState(), opts());
    expect(p.ipvs).toEqual([]);
    expect(p.draining.start).toEqual([{ vs: id, dest: '10.0.0.2:8080', protocol: 'tcp', since: NOW, op: null }]);
  });

  it('UDP and SCTP destinations are deleted at once', () => {
    const S = svc('10.96.0.11', 9000, { protocol: 'sctp' });
    const ix = indexOf(contrib('u', [vs(U, [dst('10.0.0.1', 53)])]), contrib('s', [vs(S, [])]));
    const observed = observedOf([vs(U, [dst('10.0.0.1', 53), dst('10.0.0.2', 53)]), vs(S, [dst('10.0.0.3', 9000)])]);
    const p = plan(ix, observed, 'full', new GracefulState(), opts());
    expect(brief(p)).toEqual(['deleteDestination udp/10.96.0.10:53 10.0.0.2:53', 'deleteDestination sctp/10.96.0.11:9000 10.0.0.3:9000']);
    expect(p.draining.start).toEqual([]);
  });

  it('gracefulTimeoutMs <= 0 deletes TCP destinations at once', () => {
    const p = plan(indexOf(contrib('a', [vs(A, [])])), observedOf([vs(A, [dst('10.0.0.2')])]), 'full', new GracefulState(), opts({ gracefulTimeoutMs: 0 }));
    expect(brief(p)).toEqual(['deleteDestination tcp/10.96.0.1:80 10.0.0.2:8080']);
  });

  /** A draining 10.0.0.2 (since NOW - age) with the given counts, counted (or not) by refreshDraining. */
  function draining(age: number, conns: Conns, counted: boolean) {
    const g = new GracefulState();
    g.start(id, '10.0.0.2:8080', { since: NOW - age, protocol: 'tcp', countedAt: counted ? NOW - age + 1 : null });
    const observed = observedOf([{ ...vs(A, [dst('10.0.0.1'), dst('10.0.0.2', 8080, { weight: 0 })]), conns: { '10.0.0.2:8080': conns } }]);
    return { g, observed, ix: indexOf(contrib('a', [vs(A, [dst('10.0.0.1')])])) };
  }

  it.each<[string, number, Conns, boolean, string[], string | null]>([
    ['connections left: kept', 1000, { active: 2 }, true, [], null],
    ['inactive connections left: kept', 1000, { inactive: 1 }, true, [], null],
    ['no connections, but not counted since it started: kept', 1000, {}, false, [], null],
    ['drained (counted, 0 active + 0 inactive): deleted', 1000, {}, true, ['deleteDestination tcp/10.96.0.1:80 10.0.0.2:8080'], 'drained'],
    ['timed out with connections left: deleted', 15 * 60_000, { active: 5 }, true, ['deleteDestination tcp/10.96.0.1:80 10.0.0.2:8080'], 'timeout'],
  ])('%s', (_name, age, conns, counted, ops, reason) => {
    const { g, observed, ix } = draining(age, conns, counted);
    const p = plan(ix, observed, emptyDelta(), g, opts());
    expect(brief(p)).toEqual(ops);
    expect(p.draining.start).toEqual([]);
    expect(p.draining.end).toEqual(reason ? [{ vs: id, dest: '10.0.0.2:8080', reason, op: 0 }] : []);
    expect(p.counts.virtualServers).toBe(1); // compared because it drains, though outside the (empty) scope
  });

  it('a destination that comes back while draining gets its weight back (not deleted and re-added)', () => {
    const { g, observed } = draining(1000, { active: 3 }, true);
    const ix = indexOf(contrib('a', [vs(A, [dst('10.0.0.1'), dst('10.0.0.2', 8080, { weight: 1 })])]));
    const p = plan(ix, observed, scope(id), g, opts());
    expect(brief(p)).toEqual(['updateDestination tcp/10.96.0.1:80 10.0.0.2:8080 w=1']);
    expect(p.draining.end).toEqual([{ vs: id, dest: '10.0.0.2:8080', reason: 'restored', op: 0 }]);
  });

  it('a draining destination someone set back to a weight is zeroed again, still draining', () => {
    const { g, ix } = draining(1000, { active: 3 }, true);
    const observed = observedOf([{ ...vs(A, [dst('10.0.0.1'), dst('10.0.0.2', 8080, { weight: 4 })]), conns: { '10.0.0.2:8080': { active: 3 } } }]);
    const p = plan(ix, observed, emptyDelta(), g, opts());
    expect(brief(p)).toEqual(['updateDestination tcp/10.96.0.1:80 10.0.0.2:8080 w=0']);
    expect([p.draining.start, p.draining.end]).toEqual([[], []]);
  });

  it('a virtual server removed while draining is deleted at once with its draining destinations (documented policy)', () => {
    const { g, observed } = draining(1000, { active: 3 }, true);
    const p = plan(new DesiredIndex(), observed, scope(id), g, opts());
    expect(brief(p)).toEqual(['deleteService tcp/10.96.0.1:80']);
    expect(p.draining.end).toEqual([{ vs: id, dest: '10.0.0.2:8080', reason: 'service-deleted', op: 0 }]);
  });

  it('a draining destination gone from the kernel is forgotten without an op', () => {
    const g = new GracefulState();
    g.start(id, '10.0.0.2:8080', { since: NOW, protocol: 'tcp', countedAt: null });
    const p = plan(indexOf(contrib('a', [vs(A, [dst('10.0.0.1')])])), observedOf([vs(A, [dst('10.0.0.1')])]), emptyDelta(), g, opts());
    expect(p.ipvs).toEqual([]);
    expect(p.draining.end).toEqual([{ vs: id, dest: '10.0.0.2:8080', reason: 'gone', op: null }]);
  });

  it('draining op indexes point at the ops in the final order', () => {
    const g = new GracefulState();
    g.start(serviceId(B), '10.0.0.9:8080', { since: NOW - 1, protocol: 'tcp', countedAt: NOW });
    const ix = indexOf(contrib('a', [vs(A, [dst('10.0.0.1')])]), contrib('c', [vs(svc('10.96.0.3', 80), [dst('10.0.0.5')])]), contrib('b', [vs(B, [])]));
    const observed = observedOf([vs(A, [dst('10.0.0.1'), dst('10.0.0.2')]), vs(B, [dst('10.0.0.9', 8080, { weight: 0 })])]);
    const p = plan(ix, observed, 'full', g, opts());
    const s = p.draining.start[0]!;
    const e = p.draining.end[0]!;
    expect(p.ipvs[s.op!]).toMatchObject({ kind: 'updateDestination', destination: { address: '10.0.0.2', weight: 0 } });
    expect(p.ipvs[e.op!]).toMatchObject({ kind: 'deleteDestination', destination: { address: '10.0.0.9' } });
  });
});
