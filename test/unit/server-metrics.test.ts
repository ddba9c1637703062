import { createServer, type Server } from 'node:http';
import perfHooks from 'node:perf_hooks';

import { afterEach, describe, expect, it, vi } from 'vitest';

import { ListenError } from '../../src/server/health.js';
import { EVENT_LOOP_RESOLUTION_MS, MetricsServer, NETWORK_PROGRAMMING_BUCKETS, ProxyMetrics, SYNC_BUCKETS } from '../../src/server/metrics.js';

const T0 = Date.UTC(2024, 0, 2, 3, 4, 5, 500);

/** The value of one sample line (`name` or `name{labels}`) in a text exposition, or undefined. */
function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

function metrics() {
  const clock = { t: T0 };
  return { m: new ProxyMetrics({ defaultMetrics: false, now: () => clock.t }), clock };
}

describe('ProxyMetrics', () => {
  it("declares kube-proxy's metric names and types, and ours", async () => {
    const text = await metrics().m.expose();
    const types = Object.fromEntries([...text.matchAll(/^# TYPE (\S+) (\S+)$/gm)].map((m) => [m[1], m[2]]));
    expect(types).toEqual({
      kubeproxy_sync_proxy_rules_duration_seconds: 'histogram',
      kubeproxy_sync_full_proxy_rules_duration_seconds: 'histogram',
      kubeproxy_sync_partial_proxy_rules_duration_seconds: 'histogram',
      kubeproxy_sync_proxy_rules_last_timestamp_seconds: 'gauge',
      kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds: 'gauge',
      kubeproxy_network_programming_duration_seconds: 'histogram',
      kubeproxy_sync_proxy_rules_endpoint_changes_pending: 'gauge',
      kubeproxy_sync_proxy_rules_endpoint_changes_total: 'counter',
      kubeproxy_sync_proxy_rules_service_changes_pending: 'gauge',
      kubeproxy_sync_proxy_rules_service_changes_total: 'counter',
      kubeproxy_sync_proxy_rules_iptables_restore_failures_total: 'counter',
      kubeproxy_sync_proxy_rules_no_local_endpoints_total: 'gauge',
      kubeproxy_proxy_healthz_total: 'counter',
      kubeproxy_proxy_livez_total: 'counter',
      kube_ipvs_proxy_virtual_servers: 'gauge',
      kube_ipvs_proxy_real_servers: 'gauge',
      kube_ipvs_proxy_kernel_ops_total: 'counter',
      kube_ipvs_proxy_sync_errors_total: 'counter',
      kube_ipvs_proxy_proxy_mode: 'gauge',
      kube_ipvs_proxy_ipset_entries: 'gauge',
      kube_ipvs_proxy_ipset_maxelem: 'gauge',
      kube_ipvs_proxy_objects: 'gauge',
      kube_ipvs_proxy_heap_bytes_per_object: 'gauge',
    });
    expect(text).toContain('# HELP kubeproxy_sync_proxy_rules_duration_seconds SyncProxyRules latency in seconds\n');
  });

  it("uses kube-proxy's buckets", async () => {
    expect(SYNC_BUCKETS).toEqual([0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192, 16.384]);
    expect(NETWORK_PROGRAMMING_BUCKETS).toHaveLength(1 + 2 + 59 + 12 + 7);
    expect(NETWORK_PROGRAMMING_BUCKETS.slice(0, 5)).toEqual([0, 0.25, 0.5, 1, 2]);
    expect(NETWORK_PROGRAMMING_BUCKETS.slice(-3)).toEqual([240, 270, 300]);
    const text = await metrics().m.expose();
    expect(text).toContain('kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="16.384"} 0\n');
    expect(text).toContain('kubeproxy_network_programming_duration_seconds_bucket{le="0"} 0\n');
  });

  it('observeSync: both histograms by kind, the last-sync timestamp on success, an error count on failure', async () => {
    const { m, clock } = metrics();
    m.observeSync(250, 'full');
    clock.t += 10_000;
    m.observeSync(3, 'partial');
    clock.t += 10_000;
    m.observeSync(7, 'partial', false);
    const text = await m.expose();
    expect(sample(text, 'kubeproxy_sync_proxy_rules_duration_seconds_count')).toBe(3);
    expect(sample(text, 'kubeproxy_sync_proxy_rules_duration_seconds_sum')).toBeCloseTo(0.26, 9);
    expect(sample(text, 'kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="0.004"}')).toBe(1);
    expect(sample(text, 'kubeproxy_sync_full_proxy_rules_duration_seconds_count')).toBe(1);
    expect(sample(text, 'kubeproxy_sync_partial_proxy_rules_duration_seconds_count')).toBe(2);
    expect(sample(text, 'kubeproxy_sync_proxy_rules_last_timestamp_seconds')).toBe((T0 + 10_000) / 1000);
    expect(sample(text, 'kube_ipvs_proxy_sync_errors_total')).toBe(1);
  });

  it('records queue time, changes, network programming and kernel state', async () => {
    const { m } = metrics();
    m.syncQueued();
    m.countChanges({ services: 2, endpoints: 5 });
    m.countChanges({ endpoints: 1 });
    m.trackObjects(() => ({ services: 3, endpointSlices: 9, pendingServices: 1, pendingSlices: 4 }));
    m.observeNetworkProgramming(1_500);
    m.observeNetworkProgramming(-20); // clock skew with the control plane: counted as 0
    m.setCounts({ virtualServers: 12, realServers: 34 });
    m.countKernelOps('ipvs.addDestination', 'ok', 30);
    m.countKernelOps('ipvs.addDestination', 'error');
    m.countKernelOps('ipset.add', 'ok', 0);
    m.iptablesRestoreFailed();
    m.setNoLocalEndpoints({ internal: 1, external: 2 });
    m.setIpsetSizes([{ set: 'KUBE-CLUSTER-IP', entries: 70_000, maxElem: 262144 }]);
    const text = await m.expose();
    expect(sample(text, 'kube_ipvs_proxy_ipset_entries{set="KUBE-CLUSTER-IP"}')).toBe(70_000);
    expect(sample(text, 'kube_ipvs_proxy_ipset_maxelem{set="KUBE-CLUSTER-IP"}')).toBe(262144);
    expect(sample(text, 'kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds')).toBe(T0 / 1000);
    expect(sample(text, 'kubeproxy_sync_proxy_rules_service_changes_total')).toBe(2);
    expect(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_total')).toBe(6);
    expect(sample(text, 'kubeproxy_sync_proxy_rules_service_changes_pending')).toBe(1);
    expect(sample(text, 'kubeproxy_sync_proxy_rules_endpoint_changes_pending')).toBe(4);
    expect(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="0"}')).toBe(1);
    expect(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="1"}')).toBe(1);
    expect(sample(text, 'kubeproxy_network_programming_duration_seconds_bucket{le="2"}')).toBe(2);
    expect(sample(text, 'kube_ipvs_proxy_virtual_servers')).toBe(12);
    expect(sample(text, 'kube_ipvs_proxy_real_servers')).toBe(34);
    expect(sample(text, 'kube_ipvs_proxy_kernel_ops_total{kind="ipvs.addDestination",result="ok"}')).toBe(30);
    expect(sample(text, 'kube_ipvs_proxy_kernel_ops_total{kind="ipvs.addDestination",result="error"}')).toBe(1);
    expect(text).not.toContain('kind="ipset.add"');
    expect(sample(text, 'kubeproxy_sync_proxy_rules_iptables_restore_failures_total')).toBe(1);
    expect(sample(text, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="internal"}')).toBe(1);
    expect(sample(text, 'kubeproxy_sync_proxy_rules_no_local_endpoints_total{traffic_policy="external"}')).toBe(2);
  });

  it('sets the mode gauge to 1 for the active mode only, and counts probes by code', async () => {
    const { m } = metrics();
    expect(m.proxyMode).toBeUndefined();
    m.setProxyMode('ipvs');
    m.setProxyMode('iptables');
    m.observeProbe('healthz', 200);
    m.observeProbe('healthz', 200);
    m.observeProbe('healthz', 503);
    m.observeProbe('livez', 200);
    const text = await m.expose();
    expect(m.proxyMode).toBe('iptables');
    expect(sample(text, 'kube_ipvs_proxy_proxy_mode{mode="iptables"}')).toBe(1);
    expect(sample(text, 'kube_ipvs_proxy_proxy_mode{mode="ipvs"}')).toBe(0);
    expect(sample(text, 'kubeproxy_proxy_healthz_total{code="200"}')).toBe(2);
    expect(sample(text, 'kubeproxy_proxy_healthz_total{code="503"}')).toBe(1);
    expect(sample(text, 'kubeproxy_proxy_livez_total{code="200"}')).toBe(1);
  });

  it('reads the objects held on each scrape: counts by kind and the heap in use per object', async () => {
    const { m } = metrics();
    expect(sample(await m.expose(), 'kube_ipvs_proxy_heap_bytes_per_object')).toBe(0);
    let counts = { services: 3, endpointSlices: 5 };
    m.trackObjects(() => counts);
    let text = await m.expose();
    expect(sample(text, 'kube_ipvs_proxy_objects{kind="Service"}')).toBe(3);
    expect(sample(text, 'kube_ipvs_proxy_objects{kind="EndpointSlice"}')).toBe(5);
    const perObject = sample(text, 'kube_ipvs_proxy_heap_bytes_per_object')!;
    expect(perObject).toBeGreaterThan(2 ** 20 / 8); // at least a MiB of heap over 8 objects
    counts = { services: 30, endpointSlices: 50 };
    text = await m.expose();
    expect(sample(text, 'kube_ipvs_proxy_objects{kind="EndpointSlice"}')).toBe(50);
    expect(sample(text, 'kube_ipvs_proxy_heap_bytes_per_object')).toBeLessThan(perObject);
  });

  it('includes process metrics by default; registries are private to each instance', async () => {
    const a = new ProxyMetrics();
    const b = new ProxyMetrics();
    a.setCounts({ virtualServers: 1, realServers: 0 });
    expect(await a.expose()).toContain('process_cpu_user_seconds_total');
    expect(sample(await b.expose(), 'kube_ipvs_proxy_virtual_servers')).toBe(0);
    expect(a.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  it('samples the event-loop delay every 100 ms (prom-client would wake the idle daemon every 10)', async () => {
    const spy = vi.spyOn(perfHooks, 'monitorEventLoopDelay');
    try {
      await new ProxyMetrics().expose();
      expect(EVENT_LOOP_RESOLUTION_MS).toBe(100);
      expect(spy).toHaveBeenCalledWith({ resolution: EVENT_LOOP_RESOLUTION_MS });
    } finally {
      spy.mockRestore();
    }
  });
});

describe('MetricsServer', () => {
  const cleanup: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const f of cleanup.splice(0).reverse()) await f();
  });

  async function serve(mode?: 'ipvs' | 'iptables') {
    const { m } = metrics();
    const server = new MetricsServer(m, { host: '127.0.0.1', port: 0 }, mode);
    await server.start();
    cleanup.push(() => server.stop());
    const base = `http://127.0.0.1:${server.address()!.port}`;
    const get = async (path: string) => {
      const r = await fetch(base + path);
      return { status: r.status, type: r.headers.get('content-type'), nosniff: r.headers.get('x-content-type-options'), text: await r.text() };
    };
    return { m, server, get };
  }

  it('serves /metrics in the Prometheus text format', async () => {
    const { m, get } = await serve('ipvs');
    m.setCounts({ virtualServers: 7, realServers: 21 });
    const r = await get('/metrics');
    expect(r.status).toBe(200);
    expect(r.type).toBe(m.contentType);
    expect(sample(r.text, 'kube_ipvs_proxy_virtual_servers')).toBe(7);
    expect(sample(r.text, 'kube_ipvs_proxy_proxy_mode{mode="ipvs"}')).toBe(1);
  });

  it('serves /proxyMode as plain text, as kube-proxy', async () => {
    const { m, get } = await serve('ipvs');
    expect(await get('/proxyMode')).toEqual({ status: 200, type: 'text/plain; charset=utf-8', nosniff: 'nosniff', text: 'ipvs' });
    m.setProxyMode('iptables');
    expect((await get('/proxyMode')).text).toBe('iptables');
  });

  it("serves /healthz like Kubernetes' generic healthz handler", async () => {
    const { get } = await serve();
    expect(await get('/healthz')).toEqual({ status: 200, type: 'text/plain; charset=utf-8', nosniff: 'nosniff', text: 'ok' });
    expect((await get('/healthz?verbose')).text).toBe('[+]ping ok\nhealthz check passed\n');
    expect((await get('/healthz/ping')).text).toBe('ok');
  });

  it('serves /configz: {} until a config is set, then the config under kubeproxy.config.k8s.io', async () => {
    const { server, get } = await serve();
    expect(await get('/configz')).toEqual({ status: 200, type: 'application/json', nosniff: 'nosniff', text: '{}' });
    server.setConfig({ mode: 'ipvs', ipvs: { scheduler: 'rr' } });
    expect(JSON.parse((await get('/configz')).text)).toEqual({ 'kubeproxy.config.k8s.io': { mode: 'ipvs', ipvs: { scheduler: 'rr' } } });
    server.setConfig({ big: 1n });
    expect(await get('/configz')).toMatchObject({ status: 500, text: expect.stringMatching(/^error marshaling json: /) });
  });

  it('answers 404 elsewhere', async () => {
    const { get } = await serve();
    expect(await get('/')).toMatchObject({ status: 404, text: '404 page not found\n' });
    expect((await get('/metrics/x')).status).toBe(404);
  });

  it('rejects start() with an error naming the address when the port is taken', async () => {
    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise<void>((r) => blocker.close(() => r())));
    const port = (blocker.address() as { port: number }).port;
    const server = new MetricsServer(metrics().m, { host: '127.0.0.1', port });
    const err = await server.start().catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ListenError);
    expect((err as Error).message).toBe(`failed to start metrics server on 127.0.0.1:${port}: address already in use (EADDRINUSE)`);
  });
});
