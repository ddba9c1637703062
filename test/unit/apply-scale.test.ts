// Work proportional to the change: 1,000 services x 10 endpoints programmed, then one endpoint
// changes. The plan holds exactly the ops for that change; apply makes one IPVS call, no dump.
// The first sync goes out in batches of BATCH_SIZE ops.
import { beforeAll, describe, expect, it } from 'vitest';

import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import type { VirtualService } from '../../src/kernel/ipvs/types.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { applyPlan, BATCH_SIZE } from '../../src/proxy/ipvs/apply.js';
import { GracefulState, refreshDraining } from '../../src/proxy/ipvs/graceful.js';
import { DesiredIndex, type DesiredDelta } from '../../src/proxy/ipvs/desired-index.js';
import { readObserved } from '../../src/proxy/ipvs/observe.js';
import { plan, type PlanOptions } from '../../src/proxy/ipvs/plan.js';
import type { ObservedState, OwnedSet, ServiceContribution } from '../../src/proxy/ipvs/types.js';

const SERVICES = 1000;
const ENDPOINTS = 10;
const OWNED: OwnedSet[] = [
  { spec: { name: 'KUBE-CLUSTER-IP', type: 'hash:ip,port', family: 'inet', hashSize: 4096, maxElem: 65536 }, comment: '' },
  { spec: { name: 'KUBE-LOOP-BACK', type: 'hash:ip,port,ip', family: 'inet', hashSize: 16384, maxElem: 65536 }, comment: '' },
];
const vip = (i: number) => `10.96.${i >> 8}.${i & 255}`;
const ep = (i: number, j: number) => `10.244.${i >> 4}.${((i & 15) << 4) + j}`;
const service = (i: number): VirtualService => ({ family: 'ipv4', protocol: 'tcp', address: vip(i), port: 80, fwmark: null, scheduler: 'rr', flags: [], timeout: 0, netmask: 32 });
function contribution(i: number, endpoints: string[]): ServiceContribution {
  return {
    key: `ns/svc-${i}:http/tcp`,
    virtualServers: [{ service: service(i), destinations: endpoints.map((a) => ({ address: a, port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0 })) }],
    ipsetEntries: [{ set: 'KUBE-CLUSTER-IP', entry: `${vip(i)},tcp:80` }, ...endpoints.map((a) => ({ set: 'KUBE-LOOP-BACK', entry: `${a},tcp:8080,${a}` }))],
    addresses: [vip(i)],
    healthCheck: null,
    errors: [],
  };
}
const endpointsOf = (i: number, n = ENDPOINTS) => Array.from({ length: n }, (_, j) => ep(i, j));

const ipvs = new FakeIpvsClient();
const ipset = new FakeIpsetClient();
const link = new FakeLinkClient();
const clients = { ipvs, ipset, link, dummyName: 'kube-ipvs0', binding: 'route' as const };
const index = new DesiredIndex();
const graceful = new GracefulState();
let observed: ObservedState;
const opts: PlanOptions = { now: 0, gracefulTimeoutMs: 60_000, excludeCIDRs: [], ownedSets: OWNED };
const reset = () => {
  ipvs.resetCounters();
  ipset.resetCounters();
  link.calls.length = 0;
};

beforeAll(async () => {
  await link.ensureDummy('kube-ipvs0');
  for (let i = 0; i < SERVICES; i++) index.set(`ns/svc-${i}:http/tcp`, contribution(i, endpointsOf(i)));
  observed = await readObserved({ ...clients, ownedSets: OWNED.map((o) => o.spec.name) });
  const r = await applyPlan(plan(index, observed, 'full', graceful, opts), clients, observed);
  expect(r).toMatchObject({ errors: [], retry: false, counts: { ipvsOps: SERVICES * (ENDPOINTS + 1), ipvsCalls: Math.ceil((SERVICES * (ENDPOINTS + 1)) / BATCH_SIZE), linkCalls: 1 } });
});

describe(`${SERVICES} services x ${ENDPOINTS} endpoints`, () => {
  it('a full sync of an unchanged node: zero ops, zero writes', async () => {
    reset();
    const p = plan(index, await readObserved({ ...clients, ownedSets: OWNED.map((o) => o.spec.name) }), 'full', graceful, opts);
    expect(p.ipvs).toEqual([]);
    expect(p.counts.virtualServers).toBe(SERVICES);
  });

  it('one endpoint added: one addDestination (and its loop-back entry), one IPVS call, no dump', async () => {
    reset();
    const delta: DesiredDelta = index.set('ns/svc-500:http/tcp', contribution(500, endpointsOf(500, ENDPOINTS + 1)));
    const p = plan(index, observed, delta, graceful, opts);
    expect(p.ipvs).toEqual([{ kind: 'addDestination', service: service(500), destination: expect.objectContaining({ address: ep(500, ENDPOINTS) }) }]);
    expect(p.counts).toMatchObject({ virtualServers: 1, ipsetAdd: 1, ipsetDel: 0, addressAdd: 0 });
    const r = await applyPlan(p, clients, observed);
    expect(r).toMatchObject({ errors: [], retry: false, counts: { ipvsOps: 1, ipvsCalls: 1, ipsetEntries: 1, ipsetCalls: 1, linkCalls: 0 } });
    expect(ipvs.calls.apply).toBe(1);
    expect(ipvs.dumpCount).toBe(0);
    expect(ipset.calls.list + ipset.calls.header).toBe(0);
    expect(link.calls).toEqual([]);
  });

  it('one endpoint replaced: one addDestination, one weight-0 update (draining); the drain check reads one service', async () => {
    reset();
    const next = endpointsOf(42).map((a, j) => (j === 3 ? '10.250.0.1' : a));
    const p = plan(index, observed, index.set('ns/svc-42:http/tcp', contribution(42, next)), graceful, opts);
    expect(p.ipvs.map((o) => o.kind)).toEqual(['addDestination', 'updateDestination']);
    expect(p.counts).toMatchObject({ virtualServers: 1, ipsetAdd: 1, ipsetDel: 1, drainStart: 1 });
    const r = await applyPlan(p, clients, observed);
    expect(r.counts).toMatchObject({ ipvsOps: 2, ipvsCalls: 1 });
    expect(ipvs.dumpCount).toBe(0);

    reset();
    await refreshDraining(ipvs, observed, graceful, 1);
    expect(ipvs.calls).toMatchObject({ listDestinations: 1, dumpAll: 0, listServices: 0 });
    const drained = plan(index, observed, index.mergeDeltas([]), graceful, { ...opts, now: 1 });
    expect(drained.ipvs).toEqual([{ kind: 'deleteDestination', service: expect.objectContaining({ address: vip(42) }), destination: { address: ep(42, 3), port: 8080 } }]);
    expect(drained.counts.virtualServers).toBe(1);
    expect((await applyPlan(drained, clients, observed)).errors).toEqual([]);
    expect(graceful.size).toBe(0);
  });

  it('one service removed: one deleteService, its entries and address removed', async () => {
    reset();
    const p = plan(index, observed, index.set('ns/svc-7:http/tcp', null), graceful, opts);
    expect(p.ipvs.map((o) => o.kind)).toEqual(['deleteService']);
    expect(p.counts).toMatchObject({ virtualServers: 1, ipsetDel: ENDPOINTS + 1, addressDel: 1 });
    const r = await applyPlan(p, clients, observed);
    expect(r.counts).toMatchObject({ ipvsCalls: 1, linkCalls: 1, ipsetCalls: 2 });
    expect(ipvs.dumpCount).toBe(0);
  });
});

describe('a first sync in batches', () => {
  /** Fresh fake kernel clients, and a first sync of the whole table run by `firstSync`. */
  async function fresh() {
    const k = { ipvs: new FakeIpvsClient(), ipset: new FakeIpsetClient(), link: new FakeLinkClient(), dummyName: 'kube-ipvs0', binding: 'route' as const };
    await k.link.ensureDummy('kube-ipvs0');
    const idx = new DesiredIndex();
    for (let i = 0; i < SERVICES; i++) idx.set(`ns/svc-${i}:http/tcp`, contribution(i, endpointsOf(i)));
    const g = new GracefulState();
    const firstSync = async () => {
      const obs = await readObserved({ ...k, ownedSets: OWNED.map((o) => o.spec.name) });
      const first = await applyPlan(plan(idx, obs, 'full', g, opts), k, obs);
      const retry = () => applyPlan(plan(idx, obs, first.retryScope, g, opts), k, obs);
      return { obs, first, retry };
    };
    return { k, firstSync };
  }

  it('sends the ops in order in batches of BATCH_SIZE; a batch failing as a whole stops the rest, which the retry programs', async () => {
    const { k, firstSync } = await fresh();
    const sizes: number[] = [];
    const apply = k.ipvs.apply.bind(k.ipvs);
    k.ipvs.apply = async (ops) => {
      sizes.push(ops.length);
      if (sizes.length === 2) throw new Error('socket closed');
      return apply(ops);
    };
    const { obs, first, retry } = await firstSync();
    expect(sizes).toEqual([BATCH_SIZE, BATCH_SIZE]);
    expect(first.errors.map((e) => [e.object, e.error.message])).toEqual([['ipvs', 'socket closed']]);
    expect(first.retry).toBe(true);
    // The first batch is in the kernel and in observed; every service of the rest is to compare again.
    expect((await k.ipvs.dumpAll()).reduce((n, s) => n + 1 + s.destinations.length, 0)).toBe(BATCH_SIZE);
    const programmed = new Set((await k.ipvs.dumpAll()).map((s) => s.address));
    const rest = new Set(Array.from({ length: SERVICES }, (_, i) => vip(i)).filter((a) => !programmed.has(a) || (obs.virtualServers.get(`tcp/${a}:80`)?.destinations.size ?? 0) < ENDPOINTS));
    expect([...rest].every((a) => first.retryScope.virtualServers.has(`tcp/${a}:80`))).toBe(true);
    expect(await retry()).toMatchObject({ errors: [], retry: false });
    expect((await k.ipvs.dumpAll()).reduce((n, s) => n + 1 + s.destinations.length, 0)).toBe(SERVICES * (ENDPOINTS + 1));
  });

  it('ipset entries go out in batches of BATCH_SIZE per set; a failing batch is reported once and the rest retried', async () => {
    const { k, firstSync } = await fresh();
    const sizes: number[] = [];
    const add = k.ipset.add.bind(k.ipset);
    k.ipset.add = async (set, entries) => {
      if (set === 'KUBE-LOOP-BACK') sizes.push(entries.length);
      if (set === 'KUBE-LOOP-BACK' && sizes.length === 2) throw new Error('socket closed');
      return add(set, entries);
    };
    const { first, retry } = await firstSync();
    expect(sizes).toEqual([BATCH_SIZE, BATCH_SIZE]);
    expect(first.errors.map((e) => [e.object, e.error.message])).toEqual([['KUBE-LOOP-BACK', 'socket closed']]);
    expect(first.retryScope.ipsetEntries.get('KUBE-LOOP-BACK')!.size).toBe(SERVICES * ENDPOINTS - BATCH_SIZE);
    expect(await retry()).toMatchObject({ errors: [], retry: false });
    expect(k.ipset.members('KUBE-LOOP-BACK').length).toBe(SERVICES * ENDPOINTS);
  });
});
