// Graceful termination end to end on the fake kernel: plan -> apply -> refreshDraining -> plan.
import { beforeEach, describe, expect, it, vi } from 'vitest';

import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import type { Destination, Protocol, VirtualService } from '../../src/kernel/ipvs/types.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { applyPlan, type ApplyResult } from '../../src/proxy/ipvs/apply.js';
import { GracefulState, refreshDraining } from '../../src/proxy/ipvs/graceful.js';
import { DesiredIndex, type DesiredDelta } from '../../src/proxy/ipvs/desired-index.js';
import { emptyObserved, readObserved } from '../../src/proxy/ipvs/observe.js';
import { plan, type Plan } from '../../src/proxy/ipvs/plan.js';
import type { ObservedState, ServiceContribution } from '../../src/proxy/ipvs/types.js';

const TIMEOUT = 60_000;
const svc = (port: number, protocol: Protocol = 'tcp'): VirtualService => ({
  family: 'ipv4', protocol, address: '10.96.0.1', port, fwmark: null, scheduler: 'rr', flags: [], timeout: 0, netmask: 32,
});
const dst = (address: string, port = 8080): Destination => ({ address, port, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0 });
const contrib = (key: string, service: VirtualService, endpoints: string[], port = 8080): ServiceContribution => ({
  key, virtualServers: [{ service, destinations: endpoints.map((e) => dst(e, port)) }], ipsetEntries: [], addresses: [], healthCheck: null, errors: [],
});

let ipvs: FakeIpvsClient;
let index: DesiredIndex;
let graceful: GracefulState;
let observed: ObservedState;
let now: number;
let last: Plan;
const clients = () => ({ ipvs, ipset: new FakeIpsetClient(), link: new FakeLinkClient(), dummyName: 'kube-ipvs0', binding: 'route' as const });

async function sync(scope: DesiredDelta | 'full'): Promise<ApplyResult> {
  last = plan(index, observed, scope, graceful, { now, gracefulTimeoutMs: TIMEOUT, excludeCIDRs: [], ownedSets: [] });
  return applyPlan(last, clients(), observed);
}
/** What the runner does on a drain tick: read the draining services, then an (empty-scope) partial sync. */
async function tick(advanceMs: number): Promise<void> {
  now += advanceMs;
  await refreshDraining(ipvs, observed, graceful, now);
  await sync(index.mergeDeltas([]));
}

beforeEach(async () => {
  ipvs = new FakeIpvsClient();
  index = new DesiredIndex();
  graceful = new GracefulState();
  observed = emptyObserved();
  now = 1_000_000;
});

describe('graceful termination', () => {
  it('TCP: weight 0, kept while it has connections, deleted once they drain', async () => {
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1', '10.0.0.2'])));
    ipvs.setConnections(svc(80), dst('10.0.0.2'), 4, 1);
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1'])));
    expect(ipvs.weights()).toEqual({ 'tcp/10.96.0.1:80': { '10.0.0.1:8080': 1, '10.0.0.2:8080': 0 } });
    expect(graceful.size).toBe(1);

    await tick(1000);
    expect(ipvs.weights()['tcp/10.96.0.1:80']).toHaveProperty('10.0.0.2:8080', 0);
    expect(observed.virtualServers.get('tcp/10.96.0.1:80')!.destinations.get('10.0.0.2:8080')).toMatchObject({ activeConns: 4, inactiveConns: 1 });

    ipvs.setConnections(svc(80), dst('10.0.0.2'), 0, 1);
    await tick(1000);
    expect(ipvs.weights()['tcp/10.96.0.1:80']).toHaveProperty('10.0.0.2:8080', 0); // inactive ones count too

    ipvs.setConnections(svc(80), dst('10.0.0.2'), 0, 0);
    await tick(1000);
    expect(last.draining.end).toEqual([{ vs: 'tcp/10.96.0.1:80', dest: '10.0.0.2:8080', reason: 'drained', op: 0 }]);
    expect(ipvs.weights()).toEqual({ 'tcp/10.96.0.1:80': { '10.0.0.1:8080': 1 } });
    expect(graceful.size).toBe(0);
  });

  it('TCP: deleted when the timeout passes, connections or not', async () => {
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1', '10.0.0.2'])));
    ipvs.setConnections(svc(80), dst('10.0.0.2'), 9);
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1'])));
    await tick(TIMEOUT - 1);
    expect(graceful.size).toBe(1);
    await tick(1);
    expect(last.draining.end.map((e) => e.reason)).toEqual(['timeout']);
    expect(ipvs.weights()).toEqual({ 'tcp/10.96.0.1:80': { '10.0.0.1:8080': 1 } });
    expect(graceful.size).toBe(0);
  });

  it('UDP: deleted at once', async () => {
    await sync(index.set('u', contrib('u', svc(53, 'udp'), ['10.0.0.1', '10.0.0.2'], 53)));
    ipvs.setConnections(svc(53, 'udp'), dst('10.0.0.2', 53), 0, 7);
    await sync(index.set('u', contrib('u', svc(53, 'udp'), ['10.0.0.1'], 53)));
    expect(ipvs.weights()).toEqual({ 'udp/10.96.0.1:53': { '10.0.0.1:53': 1 } });
    expect(graceful.size).toBe(0);
  });

  it('an endpoint that comes back while draining gets its weight back: not deleted, its connections kept', async () => {
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1', '10.0.0.2'])));
    ipvs.setConnections(svc(80), dst('10.0.0.2'), 3);
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1'])));
    await tick(1000);
    ipvs.resetCounters();
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1', '10.0.0.2'])));
    expect(ipvs.log).toEqual([{ kind: 'updateDestination', service: svc(80), destination: dst('10.0.0.2') }]);
    expect(await ipvs.listDestinations(svc(80))).toContainEqual({ ...dst('10.0.0.2'), activeConns: 3, inactiveConns: 0, persistConns: 0 });
    expect(graceful.size).toBe(0);
  });

  it('a service removed while draining: the virtual server is deleted at once (documented), draining forgotten', async () => {
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1', '10.0.0.2'])));
    ipvs.setConnections(svc(80), dst('10.0.0.2'), 3);
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1'])));
    await sync(index.set('a', null));
    expect(ipvs.weights()).toEqual({});
    expect(graceful.size).toBe(0);
  });

  it('refreshDraining keeps the observed objects of the real servers that read as they were (shared with the desired state)', async () => {
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1', '10.0.0.2', '10.0.0.3'])));
    ipvs.setConnections(svc(80), dst('10.0.0.3'), 2, 0);
    ipvs.setConnections(svc(80), dst('10.0.0.2'), 0, 1);
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1', '10.0.0.2'])));
    const desired = index.virtualServers().get('tcp/10.96.0.1:80')!.destinations;
    const o = observed.virtualServers.get('tcp/10.96.0.1:80')!.destinations;
    expect(o.get('10.0.0.1:8080')).toBe(desired[0]);
    await tick(1000);
    // Read back as observed: the same object. With connections: a copy that carries them.
    expect(o.get('10.0.0.1:8080')).toBe(desired[0]);
    expect(o.get('10.0.0.2:8080')).not.toBe(desired[1]);
    expect(o.get('10.0.0.2:8080')).toMatchObject({ weight: 1, activeConns: 0, inactiveConns: 1 });
    expect(o.get('10.0.0.3:8080')).toMatchObject({ weight: 0, activeConns: 2 });
  });

  it('refreshDraining reads only the virtual servers with draining destinations: one dump each, in one call, never a full dump', async () => {
    for (let i = 0; i < 100; i++) await sync(index.set(`s${i}`, contrib(`s${i}`, svc(1000 + i), ['10.0.0.1', '10.0.0.2'])));
    await sync(index.set('s7', contrib('s7', svc(1007), ['10.0.0.1'])));
    await sync(index.set('s9', contrib('s9', svc(1009), ['10.0.0.1'])));
    ipvs.resetCounters();
    const many = vi.spyOn(ipvs, 'listDestinationsMany');
    const r = await refreshDraining(ipvs, observed, graceful, now + 1);
    expect(r).toEqual({ reads: 2, drained: 2, gone: 0, errors: [] });
    expect(ipvs.calls).toMatchObject({ listDestinations: 2, dumpAll: 0, listServices: 0 });
    // One trip to the addon, not one per virtual server (each costs a thread hand-off).
    expect(many.mock.calls.map(([services]) => services.map((s) => s.port))).toEqual([[1007, 1009]]);
    await sync(index.mergeDeltas([]));
    expect(last.counts).toMatchObject({ virtualServers: 2, deleteDestination: 2 });
  });

  it('refreshDraining forgets destinations removed behind its back and reports read errors', async () => {
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1', '10.0.0.2'])));
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1'])));
    await ipvs.apply([{ kind: 'deleteDestination', service: svc(80), destination: { address: '10.0.0.2', port: 8080 } }]);
    ipvs.failCall('listDestinations', new Error('EINTR'));
    expect((await refreshDraining(ipvs, observed, graceful, now)).errors.map((e) => e.object)).toEqual(['tcp/10.96.0.1:80']);
    expect(graceful.size).toBe(1);
    expect(await refreshDraining(ipvs, observed, graceful, now)).toMatchObject({ reads: 1, gone: 1 });
    expect(graceful.size).toBe(0);
    expect([...observed.virtualServers.get('tcp/10.96.0.1:80')!.destinations.keys()]).toEqual(['10.0.0.1:8080']);
  });

  it('after a restart, a weight-0 destination nobody wants drains again (adopted, not flushed)', async () => {
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1', '10.0.0.2'])));
    ipvs.setConnections(svc(80), dst('10.0.0.2'), 2);
    await sync(index.set('a', contrib('a', svc(80), ['10.0.0.1'])));
    // restart: new process state, full read
    graceful = new GracefulState();
    index = new DesiredIndex();
    index.set('a', contrib('a', svc(80), ['10.0.0.1']));
    observed = await readObserved({ ...clients(), ownedSets: [] });
    ipvs.resetCounters();
    await sync('full');
    expect(ipvs.log).toEqual([]);
    expect(graceful.get('tcp/10.96.0.1:80', '10.0.0.2:8080')).toMatchObject({ since: now, countedAt: null });
    ipvs.setConnections(svc(80), dst('10.0.0.2'), 0);
    await tick(10);
    expect(ipvs.weights()).toEqual({ 'tcp/10.96.0.1:80': { '10.0.0.1:8080': 1 } });
  });
});
