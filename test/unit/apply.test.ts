// applyPlan() against the fake kernels: batching, idempotency (EEXIST on add, not-found on
// delete), partial failure, observed state kept equal to the kernel, drift repair.
import { beforeEach, describe, expect, it } from 'vitest';

import { NetlinkError } from '../../src/kernel/errors.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import { serviceId, type Destination, type VirtualService } from '../../src/kernel/ipvs/types.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { applyPlan, type ApplyResult } from '../../src/proxy/ipvs/apply.js';
import { GracefulState } from '../../src/proxy/ipvs/graceful.js';
import { DesiredIndex, type DesiredDelta } from '../../src/proxy/ipvs/desired-index.js';
import { DestinationTable } from '../../src/proxy/ipvs/destination-table.js';
import { emptyObserved, readObserved } from '../../src/proxy/ipvs/observe.js';
import { plan, type Plan } from '../../src/proxy/ipvs/plan.js';
import type { ObservedState, OwnedSet, ServiceContribution } from '../../src/proxy/ipvs/types.js';

const svc = (address: string, port: number, extra: Partial<VirtualService> = {}): VirtualService => ({
  family: 'ipv4', protocol: 'tcp', address, port, fwmark: null, scheduler: 'rr', flags: [], timeout: 0, netmask: 32, ...extra,
});
const dst = (address: string, port = 8080, extra: Partial<Destination> = {}): Destination => ({ address, port, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, ...extra });
const OWNED: OwnedSet[] = [
  { spec: { name: 'KUBE-CLUSTER-IP', type: 'hash:ip,port', family: 'inet' }, comment: 'Kubernetes service cluster ip + port' },
  { spec: { name: 'KUBE-LOOP-BACK', type: 'hash:ip,port,ip', family: 'inet' }, comment: 'Kubernetes endpoints dst ip:port, source ip' },
];
/** A ClusterIP service port: its VS, KUBE-CLUSTER-IP and KUBE-LOOP-BACK entries, its address. */
function clusterIP(key: string, ip: string, endpoints: string[], extra: Partial<VirtualService> = {}): ServiceContribution {
  return {
    key,
    virtualServers: [{ service: svc(ip, 80, extra), destinations: endpoints.map((e) => dst(e)) }],
    ipsetEntries: [{ set: 'KUBE-CLUSTER-IP', entry: `${ip},tcp:80` }, ...endpoints.map((e) => ({ set: 'KUBE-LOOP-BACK', entry: `${e},tcp:8080,${e}` }))],
    addresses: [ip],
    healthCheck: null,
    errors: [],
  };
}

/** Fake kernels, a desired index, observed and graceful state, and sync helpers. */
class Env {
  ipvs = new FakeIpvsClient();
  ipset = new FakeIpsetClient();
  link = new FakeLinkClient();
  index = new DesiredIndex();
  graceful = new GracefulState();
  observed: ObservedState = emptyObserved();
  clients = { ipvs: this.ipvs, ipset: this.ipset, link: this.link, dummyName: 'kube-ipvs0', binding: 'route' as const };
  lastPlan!: Plan;

  async init(): Promise<this> {
    await this.link.ensureDummy('kube-ipvs0');
    return this;
  }
  async read(): Promise<ObservedState> {
    return readObserved({ ...this.clients, ownedSets: OWNED.map((o) => o.spec.name) });
  }
  async full(): Promise<ApplyResult> {
    this.observed = await this.read();
    return this.sync('full');
  }
  async sync(scope: DesiredDelta | 'full'): Promise<ApplyResult> {
    this.lastPlan = plan(this.index, this.observed, scope, this.graceful, { now: 0, gracefulTimeoutMs: 60_000, excludeCIDRs: [], ownedSets: OWNED });
    return applyPlan(this.lastPlan, this.clients, this.observed);
  }
  resetCounters(): void {
    this.ipvs.resetCounters();
    this.ipset.resetCounters();
    this.link.calls.length = 0;
  }
  /** The in-memory observed state equals a fresh read of the kernel. */
  async expectConsistent(): Promise<void> {
    const fresh = await this.read();
    // After a write, a real server without connections is kept without counts (the desired object itself).
    const counted = (vs: ObservedState['virtualServers']) =>
      new Map([...vs].map(([id, o]) => [id, { service: o.service, destinations: new Map([...o.destinations].map(([did, d]) => [did, { activeConns: 0, inactiveConns: 0, ...d }])) }]));
    expect(counted(this.observed.virtualServers)).toEqual(counted(fresh.virtualServers));
    expect(this.observed.ipsets).toEqual(fresh.ipsets);
    expect(this.observed.addresses).toEqual(fresh.addresses);
  }
}

let env: Env;
beforeEach(async () => {
  env = await new Env().init();
});

describe('applyPlan', () => {
  it('from empty: sets created, entries, addresses and IPVS in one batched call each; observed equals the kernel', async () => {
    env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2', '10.244.1.3']));
    env.index.set('b', clusterIP('b', '10.96.0.2', ['10.244.1.4']));
    const r = await env.full();
    expect(r).toMatchObject({ errors: [], retry: false });
    expect(env.ipvs.weights()).toEqual({
      'tcp/10.96.0.1:80': { '10.244.1.2:8080': 1, '10.244.1.3:8080': 1 },
      'tcp/10.96.0.2:80': { '10.244.1.4:8080': 1 },
    });
    expect(env.ipset.members('KUBE-CLUSTER-IP')).toEqual(['10.96.0.1,tcp:80', '10.96.0.2,tcp:80']);
    expect(await env.link.listLocalRoutes('kube-ipvs0')).toEqual(['10.96.0.1', '10.96.0.2']);
    expect(env.ipvs.calls.apply).toBe(1);
    expect(env.ipset.calls).toMatchObject({ create: 2, add: 2, del: 0 });
    expect(env.link.calls.filter((c) => c.startsWith('addLocalRoutes'))).toHaveLength(1);
    expect(r.counts).toMatchObject({ ipvsOps: 5, ipvsCalls: 1, ipsetEntries: 5, ipsetCalls: 4, addresses: 2, linkCalls: 1, followUps: 0 });
    await env.expectConsistent();

    // a second full sync: nothing to do, no write calls
    env.resetCounters();
    const again = await env.full();
    expect(again).toMatchObject({ errors: [], retry: false, counts: { ipvsOps: 0, ipvsCalls: 0, ipsetCalls: 0, linkCalls: 0 } });
    expect(env.ipvs.calls.apply).toBe(0);
  });

  it('EEXIST on addService: the existing service is taken over (updated to our parameters), its real destinations read back, compared again', async () => {
    const A = svc('10.96.0.1', 80);
    await env.ipvs.apply([
      { kind: 'addService', service: { ...A, scheduler: 'wlc' } },
      { kind: 'addDestination', service: A, destination: dst('10.9.9.9') },
    ]);
    env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2']));
    const r = await env.sync('full'); // observed is empty: the plan adds
    expect(r.errors).toEqual([]);
    expect(r.counts.followUps).toBe(1);
    expect((await env.ipvs.dumpAll())[0]!.scheduler).toBe('rr');
    expect(r.retry).toBe(true);
    expect([...r.retryScope.virtualServers]).toEqual([serviceId(A)]);
    await env.expectConsistent();
    // the retry drains the stranger (TCP: weight 0), without a dump
    env.resetCounters();
    const retry = await env.sync(r.retryScope);
    expect(retry).toMatchObject({ errors: [], retry: false });
    expect(env.ipvs.weights()).toEqual({ 'tcp/10.96.0.1:80': { '10.9.9.9:8080': 0, '10.244.1.2:8080': 1 } });
    expect(env.ipvs.dumpCount).toBe(0);
  });

  it('EEXIST on addDestination: updated to the desired weight; EEXIST on entries and addresses: success', async () => {
    const A = svc('10.96.0.1', 80);
    await env.ipvs.apply([{ kind: 'addService', service: A }, { kind: 'addDestination', service: A, destination: dst('10.244.1.2', 8080, { weight: 7 }) }]);
    await env.ipset.create(OWNED[0]!.spec);
    await env.ipset.add('KUBE-CLUSTER-IP', ['10.96.0.1,tcp:80']);
    await env.link.addLocalRoutes('kube-ipvs0', ['10.96.0.1']);
    env.observed = await env.read();
    env.observed.virtualServers.get(serviceId(A))!.destinations = new DestinationTable(); // stale: it thinks the destination is missing
    env.observed.ipsets.get('KUBE-CLUSTER-IP')!.clear();
    env.observed.addresses.clear();
    env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2']));
    const r = await env.sync('full');
    expect(r.errors).toEqual([]);
    expect(r.retry).toBe(false);
    expect(env.lastPlan.ipvs.map((o) => o.kind)).toEqual(['addDestination']);
    expect(env.ipvs.weights()).toEqual({ 'tcp/10.96.0.1:80': { '10.244.1.2:8080': 1 } });
    await env.expectConsistent();
  });

  it('deletes of what is already gone (ESRCH, ENOENT, IPSET_ERR_EXIST, EADDRNOTAVAIL) are successes', async () => {
    env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2']));
    await env.full();
    env.index.set('a', null);
    // someone removes everything first
    await env.ipvs.flush();
    await env.ipset.flush('KUBE-CLUSTER-IP');
    await env.ipset.flush('KUBE-LOOP-BACK');
    await env.link.deleteLocalRoutes('kube-ipvs0', ['10.96.0.1']);
    const r = await env.sync('full'); // observed is stale: it still has everything
    expect(env.lastPlan.counts).toMatchObject({ deleteService: 1, ipsetDel: 2, addressDel: 1 });
    expect(r).toMatchObject({ errors: [], retry: false });
    await env.expectConsistent();
  });

  it('one op fails: the others are applied, the error names the object, observed stays consistent, retry is flagged', async () => {
    env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2', '10.244.1.3']));
    env.index.set('b', clusterIP('b', '10.96.0.2', ['10.244.1.4']));
    env.ipvs.failOps('ENOMEM', (op) => op.kind === 'addDestination' && op.destination.address === '10.244.1.3');
    env.ipset.failEntries('ENOMEM', (_op, set, e) => set === 'KUBE-LOOP-BACK' && e.startsWith('10.244.1.4'));
    env.link.failAddress('10.96.0.2', 'EBUSY');
    const r = await env.full();
    expect(r.errors.map((e) => [e.object, (e.error as NetlinkError).code])).toEqual([
      ['KUBE-LOOP-BACK 10.244.1.4,tcp:8080,10.244.1.4', 'ENOMEM'],
      ['10.96.0.2 dev kube-ipvs0', 'EBUSY'],
      ['tcp/10.96.0.1:80 -> 10.244.1.3:8080', 'ENOMEM'],
    ]);
    expect(r.retry).toBe(true);
    expect([...r.retryScope.virtualServers]).toEqual(['tcp/10.96.0.1:80']);
    expect([...r.retryScope.addresses]).toEqual(['10.96.0.2']);
    expect(env.ipvs.weights()).toEqual({ 'tcp/10.96.0.1:80': { '10.244.1.2:8080': 1 }, 'tcp/10.96.0.2:80': { '10.244.1.4:8080': 1 } });
    await env.expectConsistent();

    // the retry over retryScope fixes exactly what failed
    env.resetCounters();
    const retry = await env.sync(r.retryScope);
    expect(retry).toMatchObject({ errors: [], retry: false, counts: { ipvsOps: 1, ipsetEntries: 1, addresses: 1 } });
    expect(env.ipvs.weights()['tcp/10.96.0.1:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.1.3:8080': 1 });
    await env.expectConsistent();
  });

  it('the kernel contradicts observed (service flushed behind our back): ESRCH is drift, not an error; it drops the service from observed and the retry re-adds it whole', async () => {
    env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2']));
    await env.full();
    await env.ipvs.flush();
    const d = env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2', '10.244.1.3']));
    const r = await env.sync(d);
    expect(r.errors).toEqual([]);
    expect(r.drift.map((e) => [e.object, (e.error as NetlinkError).code])).toEqual([['tcp/10.96.0.1:80 -> 10.244.1.3:8080', 'ESRCH']]);
    expect(r.retry).toBe(true);
    expect(env.observed.virtualServers.size).toBe(0);
    const retry = await env.sync(r.retryScope);
    expect(retry.errors).toEqual([]);
    expect(env.ipvs.weights()).toEqual({ 'tcp/10.96.0.1:80': { '10.244.1.2:8080': 1, '10.244.1.3:8080': 1 } });
    await env.expectConsistent();
  });

  it('errors another attempt cannot fix (invalid input, unknown scheduler) are reported but not retried', async () => {
    env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2'], { scheduler: 'nosuch' }));
    env.index.set('b', clusterIP('b', '10.96.0.2', ['10.244.1.3'], { scheduler: 'BAD NAME' }));
    const r = await env.full();
    // the destinations' ESRCH follow from their service's failure: not reported again, not retried
    expect(r.errors.map((e) => [e.object, e.error.name, (e.error as { code?: string }).code])).toEqual([
      ['tcp/10.96.0.1:80', 'NetlinkError', 'ENOENT'],
      ['tcp/10.96.0.2:80', 'ValidationError', 'ERR_INVALID_INPUT'],
    ]);
    expect(r.errors[0]!.error.message).toMatch(/scheduler "nosuch" is not available/);
    expect(r.retry).toBe(false);
    expect(env.ipvs.weights()).toEqual({});
    await env.expectConsistent();
  });

  it('a whole call failing: every object of it reported for retry, observed unchanged', async () => {
    env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2']));
    env.ipvs.failCall('apply', new Error('socket closed'));
    env.ipset.failCall('add', new NetlinkError({ op: 'ipset.add', code: 'ENOBUFS', errno: 105 }));
    const r = await env.full();
    expect(r.errors.map((e) => e.object)).toEqual(['KUBE-CLUSTER-IP', 'ipvs']);
    expect(r.retry).toBe(true);
    expect([...r.retryScope.virtualServers]).toEqual(['tcp/10.96.0.1:80']);
    expect([...r.retryScope.ipsetEntries.get('KUBE-CLUSTER-IP')!]).toEqual(['10.96.0.1,tcp:80']);
    expect(env.observed.virtualServers.size).toBe(0);
    await env.expectConsistent();
    const retry = await env.sync(r.retryScope);
    expect(retry).toMatchObject({ errors: [], retry: false });
    await env.expectConsistent();
  });

  it('draining starts only when its weight-0 update is acknowledged', async () => {
    env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2', '10.244.1.3']));
    await env.full();
    const d = env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2']));
    env.ipvs.failOps('ENOMEM', (op) => op.kind === 'updateDestination');
    const r = await env.sync(d);
    expect(r.retry).toBe(true);
    expect(env.graceful.size).toBe(0);
    await env.sync(r.retryScope);
    expect(env.graceful.get('tcp/10.96.0.1:80', '10.244.1.3:8080')).toEqual({ since: 0, protocol: 'tcp', countedAt: null });
    expect(env.ipvs.weights()['tcp/10.96.0.1:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.1.3:8080': 0 });
  });

  it('drift repair: after someone flushes everything, a full sync with readObserved restores it all', async () => {
    env.index.set('a', clusterIP('a', '10.96.0.1', ['10.244.1.2', '10.244.1.3']));
    env.index.set('b', clusterIP('b', '10.96.0.2', ['10.244.1.4']));
    await env.full();
    const before = { ipvs: await env.ipvs.dumpAll(), sets: await env.ipset.list(), addrs: await env.link.listLocalRoutes('kube-ipvs0') };
    await env.ipvs.flush(); // ipvsadm -C
    await env.ipset.destroy('KUBE-LOOP-BACK');
    await env.ipset.del('KUBE-CLUSTER-IP', ['10.96.0.2,tcp:80']);
    await env.link.deleteLocalRoutes('kube-ipvs0', ['10.96.0.1']);
    await env.ipvs.apply([{ kind: 'addService', service: svc('10.96.7.7', 80) }]); // and adds a stranger
    const r = await env.full();
    expect(r).toMatchObject({ errors: [], retry: false });
    expect(await env.ipvs.dumpAll()).toEqual(before.ipvs);
    expect(await env.ipset.list()).toEqual(expect.arrayContaining(before.sets));
    expect(await env.link.listLocalRoutes('kube-ipvs0')).toEqual(expect.arrayContaining(before.addrs));
    await env.expectConsistent();
  });
});
