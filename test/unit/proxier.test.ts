// The IPVS proxier wired to in-memory kernels (no kernel, no host state): what a sync costs,
// how one bad Service is isolated, and what reaches health and metrics.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';

import { parseArgs } from '../../src/config.js';
import { FakeIpsetClient } from '../../src/kernel/ipset/fake.js';
import { FakeIpvsClient } from '../../src/kernel/ipvs/fake.js';
import { FakeLinkClient } from '../../src/kernel/link.js';
import { createLogger } from '../../src/log-json.js';
import { nodeSchema } from '../../src/model/k8s-schemas.js';
import { DRAIN_CHECK_INTERVAL_MS, DRAIN_READ_DELAY_MS, IpvsProxier } from '../../src/proxy/ipvs/proxier.js';
import { ProxyHealth } from '../../src/server/health.js';
import { ProxyMetrics } from '../../src/server/metrics.js';
import type { SourceHandler } from '../../src/source/types.js';
import { fakeIptables, type FakeIptables } from './lib/fake-iptables.js';
import { slice, svc } from './lib/objects.js';


let ipvs: FakeIpvsClient;
let ipset: FakeIpsetClient;
let link: FakeLinkClient;
let proxier: IpvsProxier;
let handler: SourceHandler;
let health: ProxyHealth;
let metrics: ProxyMetrics;
let iptables: FakeIptables;
let errors: string[];

beforeEach(() => {
  ipvs = new FakeIpvsClient();
  ipset = new FakeIpsetClient();
  link = new FakeLinkClient();
  link.addLink('eth0', null, true, ['192.0.2.10']);
  errors = [];
  iptables = fakeIptables();
  health = new ProxyHealth({ syncPeriodMs: 30_000 });
  metrics = new ProxyMetrics({ defaultMetrics: false });
  const logger = createLogger({ format: 'json', verbosity: 0 }, { write: (l: string) => (JSON.parse(l).level >= 50 && errors.push(l), true) } as never);
  proxier = new IpvsProxier({
    config: parseArgs(['--hostname-override', 'n1']).config,
    nodeName: 'n1',
    logger,
    dummyName: 'kube-ipvs0',
    clients: { ipvs, ipset, link, iptables: { ipv4: iptables.ipt, ipv6: null } },
    health,
    metrics,
    sysctl: () => [],
  });
  handler = proxier.handler(() => {});
});

afterEach(() => vi.useRealTimers());

/** The draining servers' count comes DRAIN_READ_DELAY_MS after a sync (fake setTimeout in the tests that look at it). */
async function drainCountDue(): Promise<void> {
  await vi.advanceTimersByTimeAsync(DRAIN_READ_DELAY_MS);
  await proxier.drainingCounted();
}

describe('IpvsProxier', () => {
  it('a full sync programs virtual servers, ipsets, dummy addresses and iptables', async () => {
    handler.onService('ns/web', svc('web', '10.96.0.10'));
    handler.onEndpointSlice('ns/web-1', slice('web', ['10.244.1.2', '10.244.2.2']));
    const r = await proxier.sync({ full: true });
    expect(r.full).toBe(true);
    expect(ipvs.weights()).toEqual({ 'tcp/10.96.0.10:80': { '10.244.1.2:8080': 1, '10.244.2.2:8080': 1 } });
    expect(ipset.members('KUBE-CLUSTER-IP')).toEqual(['10.96.0.10,tcp:80']);
    expect(await link.listLocalRoutes('kube-ipvs0')).toEqual(['10.96.0.10']);
    expect(iptables.restores).toBe(1);
    expect(health.snapshot().healthy).toBe(true);
    expect(await metrics.expose()).toMatch(/kube_ipvs_proxy_virtual_servers 1\n/);
  });

  it('one endpoint change costs its own ops: writes first, reads nothing, no iptables restore; the drain is counted (and the drained server deleted) after it', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    for (let i = 0; i < 50; i++) {
      handler.onService(`ns/s${i}`, svc(`s${i}`, `10.96.1.${i}`));
      handler.onEndpointSlice(`ns/s${i}-1`, slice(`s${i}`, ['10.244.1.2', '10.244.2.2', '10.244.3.2']));
    }
    await proxier.sync({ full: true });
    ipvs.resetCounters();
    handler.onEndpointSlice('ns/s7-1', slice('s7', ['10.244.1.2', '10.244.2.2', '10.244.4.2']));
    const r = await proxier.sync();
    expect(r.full).toBe(false);
    expect(ipvs.ops).toMatchObject({ addDestination: 1, updateDestination: 1, deleteDestination: 0, addService: 0 });
    // Nothing is read before the change is written, nor by its sync after it.
    expect(ipvs.callLog).toEqual(['apply']);
    expect(iptables.restores).toBe(1);
    expect(ipvs.weights()['tcp/10.96.1.7:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 1, '10.244.3.2:8080': 0, '10.244.4.2:8080': 1 });
    // The server left draining is counted a little later; with no connections it is deleted then,
    // in one write of its own, not by the next sync.
    await vi.advanceTimersByTimeAsync(DRAIN_READ_DELAY_MS - 1);
    expect(ipvs.callLog).toEqual(['apply']);
    await drainCountDue();
    expect(ipvs.callLog).toEqual(['apply', 'listDestinations', 'apply']);
    expect(ipvs.log.map((op) => op.kind).slice(-1)).toEqual(['deleteDestination']);
    expect(ipvs.weights()['tcp/10.96.1.7:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 1, '10.244.4.2:8080': 1 });

    // Nothing drains any more: the next change's sync is its one write, and no count follows.
    ipvs.resetCounters();
    handler.onEndpointSlice('ns/s8-1', slice('s8', ['10.244.1.2', '10.244.2.2', '10.244.4.2']));
    await proxier.sync();
    expect(ipvs.callLog).toEqual(['apply']);
    await vi.advanceTimersByTimeAsync(DRAIN_READ_DELAY_MS + DRAIN_CHECK_INTERVAL_MS);
    expect(ipvs.callLog).toEqual(['apply', 'listDestinations', 'apply']);
    await proxier.drainingCounted();
  });

  it('a server draining with connections is counted every DRAIN_CHECK_INTERVAL_MS, only its virtual server, and deleted at the first count that finds it drained', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    for (let i = 0; i < 20; i++) {
      handler.onService(`ns/s${i}`, svc(`s${i}`, `10.96.1.${i}`));
      handler.onEndpointSlice(`ns/s${i}-1`, slice(`s${i}`, ['10.244.1.2', '10.244.2.2']));
    }
    await proxier.sync({ full: true });
    ipvs.setConnections('tcp/10.96.1.3:80', '10.244.2.2:8080', 1);
    handler.onEndpointSlice('ns/s3-1', slice('s3', ['10.244.1.2']));
    await proxier.sync();
    ipvs.resetCounters();
    await drainCountDue();
    for (let i = 0; i < 3; i++) {
      await vi.advanceTimersByTimeAsync(DRAIN_CHECK_INTERVAL_MS);
      await proxier.drainingCounted();
    }
    // Four counts (each one dump of the draining virtual server), no write while it has a connection.
    expect(ipvs.callLog).toEqual(['listDestinations', 'listDestinations', 'listDestinations', 'listDestinations']);
    expect(ipvs.weights()['tcp/10.96.1.3:80']).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 0 });
    ipvs.setConnections('tcp/10.96.1.3:80', '10.244.2.2:8080', 0);
    await vi.advanceTimersByTimeAsync(DRAIN_CHECK_INTERVAL_MS);
    await proxier.drainingCounted();
    expect(ipvs.callLog.slice(4)).toEqual(['listDestinations', 'apply']);
    expect(ipvs.log.map((op) => op.kind)).toEqual(['deleteDestination']);
    expect(ipvs.weights()['tcp/10.96.1.3:80']).toEqual({ '10.244.1.2:8080': 1 });
    // Nothing drains: no more counts.
    await vi.advanceTimersByTimeAsync(3 * DRAIN_CHECK_INTERVAL_MS);
    expect(ipvs.callLog).toHaveLength(6);
    proxier.close();
  });

  it('a burst of syncs that leave servers draining shares one count of them', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout'] });
    for (let i = 0; i < 3; i++) {
      handler.onService(`ns/s${i}`, svc(`s${i}`, `10.96.1.${i}`));
      handler.onEndpointSlice(`ns/s${i}-1`, slice(`s${i}`, ['10.244.1.2', '10.244.2.2']));
    }
    await proxier.sync({ full: true });
    ipvs.resetCounters();
    for (let i = 0; i < 3; i++) {
      handler.onEndpointSlice(`ns/s${i}-1`, slice(`s${i}`, ['10.244.1.2', '10.244.5.2']));
      await proxier.sync();
    }
    // Counted after each sync, the first service would have been read three times; the drained
    // servers (no connections) are deleted in one write after the count.
    expect(ipvs.callLog).toEqual(['apply', 'apply', 'apply']);
    await drainCountDue();
    expect(ipvs.callLog).toEqual(['apply', 'apply', 'apply', 'listDestinations', 'listDestinations', 'listDestinations', 'apply']);
    expect(Object.values(ipvs.weights()).flatMap((w) => Object.values(w))).not.toContain(0);
    // Nothing drains any more: no count is due after the next sync.
    handler.onService('ns/s9', svc('s9', '10.96.1.9'));
    await proxier.sync();
    ipvs.resetCounters();
    await drainCountDue();
    await vi.advanceTimersByTimeAsync(DRAIN_CHECK_INTERVAL_MS);
    expect(ipvs.callLog).toEqual([]);
  });

  it('an unknown scheduler on one Service is reported; the others are served', async () => {
    handler.onService('ns/good', svc('good', '10.96.0.10'));
    handler.onService('ns/bad', svc('bad', '10.96.0.11', { 'kube-ipvs-proxy.io/scheduler': 'nope' }));
    await proxier.sync({ full: true });
    expect(Object.keys(ipvs.weights())).toEqual(['tcp/10.96.0.10:80']);
    expect(errors.map((l) => JSON.parse(l))).toContainEqual(
      expect.objectContaining({ object: 'Service ns/bad', reason: expect.stringContaining('unknown scheduler "nope"') }),
    );
  });

  it('a node being deleted makes /healthz unhealthy-by-eligibility', () => {
    handler.onNode(nodeSchema.parse({ metadata: { name: 'n1' }, spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] } }));
    expect(health.nodeEligible).toBe(false);
  });

  it('drift: someone flushes IPVS, the next full sync restores it', async () => {
    handler.onService('ns/web', svc('web', '10.96.0.10'));
    handler.onEndpointSlice('ns/web-1', slice('web', ['10.244.1.2']));
    await proxier.sync({ full: true });
    await ipvs.flush();
    await proxier.sync({ full: true });
    expect(ipvs.weights()).toEqual({ 'tcp/10.96.0.10:80': { '10.244.1.2:8080': 1 } });
  });
});
