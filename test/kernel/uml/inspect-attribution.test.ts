// inspect against a running daemon inside UML: every virtual server attributed to its Service
// (every Service type, traffic policies, scheduler origin, a serving-terminating endpoint and a
// draining one), disagreements made with ipvsadm, and IPVS's counters against the connections
// sent (inspect --stats and the opt-in Prometheus metrics).
import { execFileSync, spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { main } from '../../../src/cli.js';
import { defaultConfig } from '../../../src/config.js';
import { inspectSourcesFor, type InspectReport, type InspectService, type InspectSources } from '../../../src/inspect.js';
import { CLI, Daemon, Manifests, demoNetworkUp, waitFor } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

const ep = (i: number, node: string, cond = 'ready: true, serving: true, terminating: false') => `- {addresses: [10.244.${i}.2], nodeName: ${node}, conditions: {${cond}}}`;
const slice = (svc: string, port: string, proto: string, targetPort: number, eps: string[]) => `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ${svc}-1, namespace: demo, labels: {kubernetes.io/service-name: ${svc}}}
addressType: IPv4
ports: [{name: ${port}, port: ${targetPort}, protocol: ${proto}}]
endpoints:
${eps.join('\n')}
`;

const SERVICES = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: demo}
spec: {type: NodePort, clusterIP: 10.96.0.10, externalIPs: [10.250.0.100], ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30080}]}
---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: demo}
spec: {type: LoadBalancer, clusterIP: 10.96.0.11, externalTrafficPolicy: Local, healthCheckNodePort: 30300, ports: [{name: http, port: 80, targetPort: 8080, nodePort: 30081}]}
status: {loadBalancer: {ingress: [{ip: 10.250.0.200}]}}
---
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: demo, annotations: {kube-ipvs-proxy.io/scheduler: sh}}
spec: {clusterIP: 10.96.0.53, internalTrafficPolicy: Local, ports: [{name: dns, protocol: UDP, port: 53, targetPort: 5353}]}
---
apiVersion: v1
kind: Service
metadata: {name: term, namespace: demo}
spec: {clusterIP: 10.96.0.14, sessionAffinity: ClientIP, sessionAffinityConfig: {clientIP: {timeoutSeconds: 600}}, ports: [{name: http, port: 80, targetPort: 8080}]}
---
apiVersion: v1
kind: Service
metadata: {name: drain, namespace: demo}
spec: {clusterIP: 10.96.0.30, ports: [{name: http, port: 80, targetPort: 8080}]}
`;
const SLICES = [
  slice('web', 'http', 'TCP', 8080, [ep(1, 'kip-node'), ep(2, 'node-b')]),
  slice('lb', 'http', 'TCP', 8080, [ep(1, 'kip-node'), ep(2, 'node-b')]),
  slice('dns', 'dns', 'UDP', 5353, [ep(1, 'kip-node'), ep(3, 'node-b')]),
  slice('term', 'http', 'TCP', 8080, [ep(3, 'kip-node', 'ready: false, serving: true, terminating: true')]),
].join('');
const DRAIN_SLICE = (eps: number[]) => slice('drain', 'http', 'TCP', 8080, eps.map((i) => ep(i, 'kip-node')));

/** A connection held open from the client namespace; the first line is the backend's name. */
class Held {
  private readonly proc: ChildProcessWithoutNullStreams;
  readonly first: Promise<string>;
  constructor(host: string, port: number) {
    this.proc = spawn('ip', ['netns', 'exec', 'kip-client', process.execPath, `${REPO}test/kernel/lib/held-connection.mjs`, host, String(port)]);
    const lines = createInterface({ input: this.proc.stdout });
    this.first = new Promise((r) => lines.once('line', r));
  }
  close(): void {
    this.proc.stdin.write('close\n');
  }
}

/** IPVS and the desired state as the CLI reads them; ipsets and iptables skipped (slow in UML, not under test here). */
const LIGHT: InspectSources = {
  ...inspectSourcesFor(defaultConfig()),
  ipset: async () => ({ list: async () => [], close: () => {} }) as never,
  iptables: async () => ({ backend: 'legacy', nat: [], filter: [] }),
};

async function inspect(...args: string[]): Promise<InspectReport> {
  const out: string[] = [];
  const full = args[0] === 'full';
  const argv = ['inspect', '--json', ...args.slice(full ? 1 : 0)];
  expect(await main(argv, { stdout: (t) => out.push(t), stderr: () => {}, ...(full ? {} : { inspectSources: LIGHT }) })).toBe(0);
  return JSON.parse(out.join('')) as InspectReport;
}
const servicesOf = (r: InspectReport): InspectService[] => (r.ipvs.available ? r.ipvs.services : []);

function fromClient(count: number, target: string): Record<string, number> {
  const out = sh('ip', 'netns', 'exec', 'kip-client', process.execPath, `${REPO}examples/demo/client.mjs`, String(count), target);
  return (JSON.parse(out) as Record<string, Record<string, number>>)[target]!;
}

let manifests: Manifests;
let daemon: Daemon;
let held: Held;
let victim: string;

beforeAll(async () => {
  demoNetworkUp();
  manifests = new Manifests();
  manifests.write('services.yaml', SERVICES);
  manifests.write('endpointslices.yaml', SLICES);
  manifests.write('drain.yaml', DRAIN_SLICE([1, 2]));
  // A long sync period: no full resync repairs the ipvsadm edits before inspect reads them.
  daemon = new Daemon([
    '--manifests', manifests.dir, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text',
    '--nodeport-addresses', '10.250.0.0/24', '--ipvs-min-sync-period', '100ms', '--ipvs-sync-period', '600s',
    '--metrics-service-stats', '--metrics-service-stats-period', '1s',
  ]);
  daemon.start();
  await daemon.healthy();
  // The drain service's held backend is removed: it drains at weight 0 with the connection open.
  held = new Held('10.96.0.30', 80);
  victim = await held.first;
  const keep = victim === 'be1' ? 2 : 1;
  manifests.write('drain.yaml', DRAIN_SLICE([keep]));
  await waitFor('the removed backend to drain', () => sh('ipvsadm', '-Sn').includes(`-a -t 10.96.0.30:80 -r 10.244.${victim.slice(2)}.2:8080 -m -w 0`));
}, 120_000);

afterAll(async () => {
  held?.close();
  await daemon?.stop();
  execFileSync('sh', ['-c', `sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; ipvsadm -C; true`]);
  manifests?.remove();
});

const owner = (name: string, type: string, vip: string, o: Record<string, unknown> = {}) => ({
  service: `demo/${name}:${o.portName ?? 'http'}`, namespace: 'demo', name, portName: 'http', protocol: 'tcp', type, vip,
  externalTrafficPolicy: 'Cluster', internalTrafficPolicy: 'Cluster', scheduler: 'rr', schedulerSource: 'flag', sessionAffinitySeconds: null, ...o,
});
const be = (i: number, o: Record<string, unknown> = {}) => ({
  address: `10.244.${i}.2`, port: 8080, forward: 'masq', weight: 1, upperThreshold: 0, lowerThreshold: 0, activeConns: 0, inactiveConns: 0,
  state: 'ready', node: 'kip-node', local: true, status: 'ok', ...o,
});
const remote = { node: 'node-b', local: false };
const tcp = (address: string, port: number, destinations: object[], ownedBy: object, o: Record<string, unknown> = {}) => ({
  family: 'ipv4', protocol: 'tcp', address, port, fwmark: null, scheduler: 'rr', flags: [], timeout: 0, netmask: 32, destinations, owner: ownedBy, status: 'ok', ...o,
});

describe('inspect with the daemon running', () => {
  it('attributes every virtual server and real server (exact JSON)', async () => {
    const r = await inspect('full');
    expect(r.desired).toEqual({ available: true, source: 'http://127.0.0.1:10249/desired', node: 'kip-node', defaultScheduler: 'rr' });
    const v = Number(victim.slice(2));
    const kept = v === 1 ? 2 : 1;
    expect(servicesOf(r)).toEqual([
      tcp('10.250.0.100', 80, [be(1), be(2, remote)], owner('web', 'NodePort', 'externalIP')),
      tcp('10.250.0.1', 30080, [be(1), be(2, remote)], owner('web', 'NodePort', 'nodePort')),
      tcp('10.250.0.1', 30081, [be(1)], owner('lb', 'LoadBalancer', 'nodePort', { externalTrafficPolicy: 'Local' })),
      tcp('10.250.0.200', 80, [be(1)], owner('lb', 'LoadBalancer', 'loadBalancerIP', { externalTrafficPolicy: 'Local' })),
      tcp('10.96.0.10', 80, [be(1), be(2, remote)], owner('web', 'NodePort', 'clusterIP')),
      tcp('10.96.0.11', 80, [be(1), be(2, remote)], owner('lb', 'LoadBalancer', 'clusterIP', { externalTrafficPolicy: 'Local' })),
      tcp('10.96.0.14', 80, [be(3, { state: 'serving-terminating' })], owner('term', 'ClusterIP', 'clusterIP', { sessionAffinitySeconds: 600 }), { flags: ['persistent'], timeout: 600 }),
      tcp('10.96.0.30', 80, [
        be(kept),
        { ...be(v, { weight: 0, activeConns: 1, state: 'draining', drainingSince: expect.any(Number) }), node: undefined, local: undefined },
      ].map((d) => Object.fromEntries(Object.entries(d).filter(([, x]) => x !== undefined))), owner('drain', 'ClusterIP', 'clusterIP')),
      { ...tcp('10.96.0.53', 53, [be(1, { port: 5353 })], owner('dns', 'ClusterIP', 'clusterIP', { portName: 'dns', service: 'demo/dns:dns', protocol: 'udp', internalTrafficPolicy: 'Local', scheduler: 'sh', schedulerSource: 'annotation' })), protocol: 'udp', scheduler: 'sh', flags: ['sh-fallback'] },
    ]);
    expect(r.errors).toBeUndefined();
    expect(r.ipsets.map((x) => x.name)).toContain('KUBE-CLUSTER-IP');
  });

  it('filters: --service and --vip', async () => {
    expect(servicesOf(await inspect('--service', 'demo/lb')).map((s) => `${s.address}:${s.port}`)).toEqual(['10.250.0.1:30081', '10.250.0.200:80', '10.96.0.11:80']);
    expect(servicesOf(await inspect('--vip', '10.250.0.1:30080')).map((s) => s.owner?.service)).toEqual(['demo/web:http']);
  });

  it('the table: owner, endpoint states, the draining server with its connection', async () => {
    const out: string[] = [];
    expect(await main(['inspect', '--service', 'demo/drain'], { stdout: (t) => out.push(t), stderr: () => {}, inspectSources: LIGHT })).toBe(0);
    const text = out.join('');
    expect(text).toContain('TCP  10.96.0.30:80 rr  demo/drain:http ClusterIP clusterIP eTP=Cluster iTP=Cluster scheduler=rr(flag)\n');
    expect(text).toMatch(new RegExp(`  -> 10\\.244\\.${victim.slice(2)}\\.2:8080 +Masq +0 +1 +0  draining since \\S+, 1 conns left\\n`));
    expect(text).not.toContain('ipsets');
  });

  it('IPVS counters match the connections sent: inspect --stats and the Prometheus metrics', async () => {
    // A real server re-added within 120 s of its deletion comes back from the kernel's trash list
    // with its counters (ip_vs_ctl.c, ip_vs_trash_get_dest): an earlier file's connections to the
    // same backend can still be in them, so the real servers are compared by what they gained.
    const destConns = async (): Promise<number[]> => servicesOf(await inspect('--stats', '--vip', '10.96.0.10:80'))[0]!.destinations.map((d) => d.stats!.conns);
    const before = await destConns();
    expect(Object.values(fromClient(10, 'tcp:10.96.0.10:80')).reduce((a, b) => a + b, 0)).toBe(10);
    expect(Object.values(fromClient(6, 'tcp:10.250.0.1:30080')).reduce((a, b) => a + b, 0)).toBe(6);
    // The kernel folds its per-CPU counters into the dumped ones every 2 s (ip_vs_est.c).
    const r = await waitFor('the counters', async () => {
      const x = await inspect('--stats', '--service', 'demo/web');
      return x.traffic?.[0]?.conns === 16 ? x : null;
    }, 20_000);
    expect(r.traffic).toEqual([expect.objectContaining({ service: 'demo/web:http', virtualServers: 3, conns: 16, activeConns: 0 })]);
    const byVip = Object.fromEntries(servicesOf(r).map((s) => [`${s.address}:${s.port}`, s]));
    expect(byVip['10.96.0.10:80']!.stats!.conns).toBe(10);
    expect(byVip['10.250.0.1:30080']!.stats!.conns).toBe(6);
    expect(byVip['10.250.0.100:80']!.stats!.conns).toBe(0);
    expect(byVip['10.96.0.10:80']!.destinations.map((d, i) => d.stats!.conns - before[i]!)).toEqual([5, 5]); // rr
    const t = r.traffic![0]!;
    expect(t.inPkts).toBeGreaterThanOrEqual(16 * 3); // SYN, ACK, request, FIN... per connection
    expect(t.outPkts).toBeGreaterThanOrEqual(16 * 2);
    expect(t.inBytes).toBeGreaterThan(t.inPkts * 40);

    const web = 'namespace="demo",service="web",port="http",protocol="tcp"';
    const metric = async (series: string) => {
      const text = await (await fetch('http://127.0.0.1:10249/metrics')).text();
      return Number(text.split('\n').find((l) => l.startsWith(`${series} `))?.split(' ')[1]);
    };
    await waitFor('the connections metric', async () => (await metric(`kube_ipvs_proxy_service_connections_total{${web}}`)) === 16, 20_000);
    expect(await metric(`kube_ipvs_proxy_service_packets_total{${web},direction="in"}`)).toBeGreaterThanOrEqual(16 * 3);
    expect(await metric(`kube_ipvs_proxy_service_active_connections{namespace="demo",service="drain",port="http",protocol="tcp"}`)).toBe(1);
    expect(await metric('kube_ipvs_proxy_service_stats_omitted')).toBe(0);
  });

  it('reports what the kernel holds that the daemon does not want, and the other way round', async () => {
    sh('ipvsadm', '-E', '-t', '10.96.0.10:80', '-s', 'wlc');
    sh('ipvsadm', '-a', '-t', '10.96.0.10:80', '-r', '10.244.3.2:8080', '-m', '-w', '1');
    sh('ipvsadm', '-D', '-t', '10.250.0.100:80');
    sh('ipvsadm', '-A', '-t', '10.96.7.7:80', '-s', 'rr');
    const byVip = Object.fromEntries(servicesOf(await inspect()).map((s) => [`${s.address}:${s.port}`, s]));
    expect(byVip['10.96.0.10:80']).toMatchObject({ status: 'different', differences: ['scheduler: want rr, kernel wlc'] });
    expect(byVip['10.96.0.10:80']!.destinations.find((d) => d.address === '10.244.3.2')).toMatchObject({ state: 'unknown', status: 'extra' });
    expect(byVip['10.250.0.100:80']).toMatchObject({ status: 'missing', destinations: [{ status: 'missing' }, { status: 'missing' }] });
    expect(byVip['10.96.7.7:80']).toMatchObject({ status: 'extra', owner: null });
  });

  it('without the daemon: the kernel view only, as before', async () => {
    expect(await daemon.stop()).toBe(0);
    const r = await inspect();
    expect(r.desired).toMatchObject({ available: false, reason: expect.stringContaining('ECONNREFUSED') });
    expect(servicesOf(r).length).toBeGreaterThan(5);
    expect(servicesOf(r).every((s) => s.owner === undefined && s.status === undefined)).toBe(true);
  });
});
