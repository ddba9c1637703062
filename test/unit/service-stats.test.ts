// Per-Service traffic: sums of IPVS counters, the opt-in metrics (names, labels, cap, one dump per
// period), and /desired on the metrics server.
import { createServer } from 'node:net';

import { afterEach, describe, expect, it } from 'vitest';

import { fetchDesired, desiredUrl } from '../../src/inspect/desired-client.js';
import type { ServiceWithDestinations } from '../../src/kernel/ipvs/client.js';
import type { IpvsStats } from '../../src/kernel/ipvs/types.js';
import { MetricsServer, ProxyMetrics } from '../../src/server/metrics.js';
import { ServiceTrafficMetrics, trafficByService } from '../../src/server/service-stats.js';

const stats = (conns: number): IpvsStats => ({ conns, inPkts: conns * 5, outPkts: conns * 4, inBytes: conns * 300, outBytes: conns * 400, cps: 1, inPps: 2, outPps: 3, inBps: 4, outBps: 5 });
const vs = (address: string, port: number, conns: number, active = 0): ServiceWithDestinations => ({
  family: 'ipv4', protocol: 'tcp', address, port, fwmark: null, scheduler: 'rr', flags: [], timeout: 0, netmask: 32, stats: stats(conns),
  destinations: [{ address: '10.244.1.2', port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, activeConns: active, inactiveConns: 1, persistConns: 0, stats: stats(conns) }],
});
const OWNERS: Record<string, string> = {
  'tcp/10.96.0.10:80': 'demo/web:http/tcp',
  'tcp/10.250.0.1:30080': 'demo/web:http/tcp',
  'tcp/10.96.0.53:53': 'kube-system/kube-dns:dns-tcp/tcp',
};
const dump = () => [vs('10.96.0.10', 80, 7, 2), vs('10.250.0.1', 30080, 3), vs('10.96.0.53', 53, 1), vs('10.1.1.1', 1, 100)];

function sample(text: string, series: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

describe('trafficByService', () => {
  it('sums the counters of each Service port over its virtual servers; unowned ones are left out', () => {
    expect(trafficByService(dump(), (id) => OWNERS[id])).toEqual([
      { key: 'demo/web:http/tcp', virtualServers: 2, conns: 10, inPkts: 50, outPkts: 40, inBytes: 3000, outBytes: 4000, cps: 2, inPps: 4, outPps: 6, inBps: 8, outBps: 10, activeConns: 2, inactiveConns: 2 },
      { key: 'kube-system/kube-dns:dns-tcp/tcp', virtualServers: 1, conns: 1, inPkts: 5, outPkts: 4, inBytes: 300, outBytes: 400, cps: 1, inPps: 2, outPps: 3, inBps: 4, outBps: 5, activeConns: 0, inactiveConns: 1 },
    ]);
  });
});

describe('ServiceTrafficMetrics', () => {
  function setup(maxServices = 10, fail = false) {
    const m = new ProxyMetrics({ defaultMetrics: false });
    const clock = { t: 0 };
    const errors: string[] = [];
    const t = new ServiceTrafficMetrics(m.registry, {
      dump: async () => {
        if (fail) throw new Error('ipvs.listServices: EPERM');
        return dump();
      },
      ownerOf: (id) => OWNERS[id], maxServices, periodMs: 15_000, now: () => clock.t, onError: (e) => errors.push(e.message),
    });
    return { m, t, clock, errors };
  }

  it('exports counters per Service port under kube_ipvs_proxy_service_* with namespace, service, port, protocol', async () => {
    const text = await setup().m.expose();
    const types = Object.fromEntries([...text.matchAll(/^# TYPE (kube_ipvs_proxy_service_\S+) (\S+)$/gm)].map((x) => [x[1], x[2]]));
    expect(types).toEqual({
      kube_ipvs_proxy_service_connections_total: 'counter',
      kube_ipvs_proxy_service_packets_total: 'counter',
      kube_ipvs_proxy_service_bytes_total: 'counter',
      kube_ipvs_proxy_service_active_connections: 'gauge',
      kube_ipvs_proxy_service_inactive_connections: 'gauge',
      kube_ipvs_proxy_service_stats_omitted: 'gauge',
    });
    const web = 'namespace="demo",service="web",port="http",protocol="tcp"';
    expect(sample(text, `kube_ipvs_proxy_service_connections_total{${web}}`)).toBe(10);
    expect(sample(text, `kube_ipvs_proxy_service_packets_total{${web},direction="in"}`)).toBe(50);
    expect(sample(text, `kube_ipvs_proxy_service_bytes_total{${web},direction="out"}`)).toBe(4000);
    expect(sample(text, `kube_ipvs_proxy_service_active_connections{${web}}`)).toBe(2);
    expect(sample(text, 'kube_ipvs_proxy_service_connections_total{namespace="kube-system",service="kube-dns",port="dns-tcp",protocol="tcp"}')).toBe(1);
    expect(sample(text, 'kube_ipvs_proxy_service_stats_omitted')).toBe(0);
    expect(text.match(/^kube_ipvs_proxy_service_\w+\{/gm)).toHaveLength(14); // 7 series per Service port
  });

  it('one dump per period, however many scrapes (and metrics) read it', async () => {
    const { m, t, clock } = setup();
    await Promise.all([m.expose(), m.expose()]);
    await m.expose();
    expect(t.dumps).toBe(1);
    clock.t = 14_999;
    await m.expose();
    expect(t.dumps).toBe(1);
    clock.t = 15_000;
    await m.expose();
    expect(t.dumps).toBe(2);
  });

  it('bounds the label cardinality: the first N Service ports by key, the rest counted', async () => {
    const text = await setup(1).m.expose();
    expect(text).toContain('service="web"');
    expect(text).not.toContain('service="kube-dns"');
    expect(sample(text, 'kube_ipvs_proxy_service_stats_omitted')).toBe(1);
  });

  it('a failed dump leaves the other metrics served', async () => {
    const { m, errors } = setup(10, true);
    m.setCounts({ virtualServers: 3, realServers: 4 });
    const text = await m.expose();
    expect(sample(text, 'kube_ipvs_proxy_virtual_servers')).toBe(3);
    expect(text).not.toContain('service="web"');
    expect(errors).toEqual(['ipvs.listServices: EPERM']);
  });
});

describe('/desired on the metrics server', () => {
  const stops: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const s of stops.splice(0)) await s();
  });

  it('404 until set (iptables mode); then the document, which inspect reads and checks', async () => {
    const server = new MetricsServer(new ProxyMetrics({ defaultMetrics: false }), { host: '127.0.0.1', port: 0 }, 'ipvs');
    await server.start();
    stops.push(() => server.stop());
    const url = desiredUrl({ host: '127.0.0.1', port: server.address()!.port });
    await expect(fetchDesired(url)).rejects.toThrow(`${url}: HTTP 404 no desired IPVS state (not in ipvs mode)`);
    const doc = { kind: 'DesiredState', version: 1, node: 'n', defaultScheduler: 'rr', virtualServers: [] };
    server.setDesired(() => doc);
    expect(await fetchDesired(url)).toEqual(doc);
    server.setDesired(() => ({ kind: 'Other' }));
    await expect(fetchDesired(url)).rejects.toThrow('not a version 1 DesiredState document');
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const port = (probe.address() as { port: number }).port;
    await new Promise((r) => probe.close(r));
    await expect(fetchDesired(`http://127.0.0.1:${port}/desired`)).rejects.toThrow(`http://127.0.0.1:${port}/desired: ECONNREFUSED`);
  });

  it('a wildcard metrics address is reached over loopback', () => {
    expect(desiredUrl({ host: '0.0.0.0', port: 10249 })).toBe('http://127.0.0.1:10249/desired');
    expect(desiredUrl({ host: '::', port: 10249 })).toBe('http://[::1]:10249/desired');
    expect(desiredUrl({ host: '127.0.0.1', port: 10249 })).toBe('http://127.0.0.1:10249/desired');
  });
});
