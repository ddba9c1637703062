// The daemon against a real control plane in the same UML boot: etcd, kube-apiserver (RBAC,
// ServiceAccount tokens, dual-stack Service CIDRs) and kube-controller-manager, whose
// EndpointSlice controller writes the slices from Pods this file creates as kubelet would. The
// chart is installed with real Helm and the daemon runs with exactly its DaemonSet container's
// args, env and mounts, in-cluster, with a TokenRequest token. Real TCP from a client namespace.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ChartDaemon, ControlPlane, SA_USER, installChart, metrics, service, startControlPlane, sumMetric } from '../lib/cluster.js';
import { CLI, demoNetworkUp, waitFor } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const NODE = 'kip-node';
const NODE_IP = '10.250.0.1';
const NS = 'demo';
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
const ipvsadm = () => sh('ipvsadm', '-Sn');

/** N fresh connections from the client namespace to `tcp:host:port`: backend → count. */
function fromClient(count: number, target: string): Record<string, number> {
  const out = sh('ip', 'netns', 'exec', 'kip-client', process.execPath, `${REPO}examples/demo/client.mjs`, String(count), target);
  return (JSON.parse(out) as Record<string, Record<string, number>>)[target]!;
}

/** The real servers of one virtual server in `ipvsadm -Sn` (`-t 10.96.x.y:80`): address → weight. */
function realServers(vs: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of ipvsadm().split('\n')) {
    const m = line.match(/^-a (\S+ \S+) -r (\S+) -\w -w (\d+)/);
    if (m && m[1] === vs) out[m[2]!] = Number(m[3]);
  }
  return out;
}

/** Waits until the virtual server's real servers are exactly `want`. */
async function expectReal(vs: string, want: Record<string, number>, timeoutMs = 30_000): Promise<void> {
  await waitFor(`${vs} → ${JSON.stringify(want)}`, () => JSON.stringify(realServers(vs)) === JSON.stringify(sortKeys(want)), timeoutMs).catch((e: Error) => {
    throw new Error(`${e.message}; have ${JSON.stringify(realServers(vs))}\n${ipvsadm()}`);
  });
}

function sortKeys(o: Record<string, number>): Record<string, number> {
  return Object.fromEntries(Object.entries(o).sort(([a], [b]) => (a < b ? -1 : 1)));
}

const BACKENDS = [
  { name: 'be1', node: NODE, ip: '10.244.1.2', ip6: 'fd00:10:244:1::2' },
  { name: 'be2', node: 'node-b', ip: '10.244.2.2', ip6: 'fd00:10:244:2::2' },
  { name: 'be3', node: 'node-c', ip: '10.244.3.2', ip6: 'fd00:10:244:3::2' },
];
const ALL3 = { '10.244.1.2:8080': 1, '10.244.2.2:8080': 1, '10.244.3.2:8080': 1 };

let cp: ControlPlane;
let daemon: ChartDaemon;
/** The resourceVersion of a change to another Node, which the daemon's Node watch does not see. */
let invisibleNodeRv = 0;
const clusterIP = async (name: string): Promise<string> => (await cp.api.get(service(NS, name, {})))!.spec.clusterIP;

/** A TokenRequest token of the chart's ServiceAccount bound to a new Secret `secret`: refused once the Secret is deleted. */
async function boundToken(secret: string): Promise<string> {
  await cp.api.call('POST', '/api/v1/namespaces/kube-system/secrets', { apiVersion: 'v1', kind: 'Secret', metadata: { name: secret } });
  return (await cp.api.call('POST', '/api/v1/namespaces/kube-system/serviceaccounts/kip-kube-ipvs-proxy/token', {
    apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds: 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Secret', name: secret } },
  })).status.token;
}

/** Creates a Service, returns what the server stored (allocated IPs and ports). */
async function createService(name: string, spec: Record<string, unknown>, metadata: Record<string, unknown> = {}, app = 'web'): Promise<any> {
  const svc = service(NS, name, { selector: { app }, ...spec }, metadata);
  return cp.api.create(svc);
}

/** IPv6 on the demo network: node, client and backends (each with an IPv6-only HTTP listener). */
function ipv6Up(): void {
  const script = [
    'sysctl -qw net.ipv6.conf.all.forwarding=1',
    'ip addr add fd00:10:250::1/64 dev kc0 nodad',
    'ip -n kip-client addr add fd00:10:250::2/64 dev eth0 nodad',
    'ip -n kip-client route add default via fd00:10:250::1',
    ...[1, 2, 3].flatMap((i) => [
      `ip addr add fd00:10:244:${i}::1/64 dev kb${i} nodad`,
      `ip -n kip-be${i} addr add fd00:10:244:${i}::2/64 dev eth0 nodad`,
      `ip -n kip-be${i} route add default via fd00:10:244:${i}::1`,
      `ip netns exec kip-be${i} ${process.execPath} -e "require('http').createServer((q,s)=>s.end('be${i}6 '+q.socket.remoteAddress+'\\\\n')).listen({host:'::',port:8080,ipv6Only:true})" >/dev/null 2>&1 &`,
    ]),
  ];
  execFileSync('sh', ['-c', script.join('\n')]);
}

beforeAll(async () => {
  demoNetworkUp();
  ipv6Up();
  cp = await startControlPlane({ address: NODE_IP });
  await cp.api.createNode(NODE, { addresses: [NODE_IP], zone: 'zone-a' });
  await cp.api.createNode('node-b', { addresses: ['10.250.0.11'], zone: 'zone-b' });
  await cp.api.createNode('node-c', { addresses: ['10.250.0.12'], zone: 'zone-c' });
  await cp.api.ensureNamespace(NS);
  for (const b of BACKENDS) {
    await cp.api.createPod(NS, `web-${b.name}`, { node: b.node, ips: [b.ip, b.ip6], labels: { app: 'web' }, ports: [{ name: 'http', containerPort: 8080 }] });
  }
}, 240_000);

afterAll(async () => {
  await daemon?.stop();
  daemon?.remove();
  await cp?.stop();
  execFileSync('sh', ['-c', `sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`]);
}, 120_000);

describe('the chart, installed with real Helm', () => {
  it('installs; its ServiceAccount may do exactly what the daemon needs', async () => {
    const ds = await installChart(cp, { apiServer: { host: NODE_IP, port: 6443 }, clusterCIDR: '10.244.0.0/16', minSyncPeriod: '100ms', syncPeriod: '10s', logging: { format: 'text', verbosity: 2 } });
    expect(ds.spec.template.spec.serviceAccountName).toBe('kip-kube-ipvs-proxy');
    const list = cp.kubectl(['auth', 'can-i', '--list', `--as=${SA_USER}`]);
    const granted = list.split('\n').slice(1).filter(Boolean).map((l) => l.trim().split(/\s{2,}/)).map(([res, , , verbs]) => `${res} ${verbs}`);
    // Every resource grant (non-resource URLs aside) but the self reviews every authenticated user has.
    expect(granted.filter((g) => !g.startsWith('[') && !/^self\w+reviews\./.test(g)).sort()).toEqual([
      'endpointslices.discovery.k8s.io [list watch]',
      'events.events.k8s.io [create patch]',
      'nodes [list watch]',
      'services [list watch]',
    ]);
    // A token bound to a Secret, so that deleting the Secret refuses it (the rotation test below).
    const token = await boundToken('tok-0');
    daemon = new ChartDaemon(cp, ds, NODE, token);
    await daemon.start();
    await daemon.healthy(10256, 90_000);
    // The API server's own Service, served from the slice kube-apiserver writes.
    await expectReal('-t 10.96.0.1:443', { [`${NODE_IP}:6443`]: 1 });
    // The daemon watches its own Node only (a field selector): another Node's change reaches its
    // watch only as a later bookmark's resourceVersion (checked in "watch semantics", a minute on).
    const patched = await cp.api.patch({ apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-b' } }, { metadata: { labels: { 'kip.test/bookmark': 'yes' } } });
    invisibleNodeRv = Number(patched.metadata.resourceVersion);
  });
});

describe('Services written by the real EndpointSlice controller', () => {
  it('ClusterIP, NodePort, externalIPs and a LoadBalancer IP carry real traffic', async () => {
    const ip = (await createService('web', {})).spec.clusterIP;
    const np = (await createService('web-np', { type: 'NodePort' })).spec.ports[0].nodePort;
    await createService('web-ext', { externalIPs: ['10.250.0.100'] });
    const lb = await createService('web-lb', { type: 'LoadBalancer' });
    await cp.api.patch(lb, { status: { loadBalancer: { ingress: [{ ip: '10.250.0.200' }] } } }, 'status');
    await expectReal(`-t ${ip}:80`, ALL3);
    await expectReal(`-t ${NODE_IP}:${np}`, ALL3);
    await expectReal('-t 10.250.0.100:80', ALL3);
    await expectReal('-t 10.250.0.200:80', ALL3);
    expect(fromClient(30, `tcp:${ip}:80`)).toEqual({ be1: 10, be2: 10, be3: 10 });
    for (const target of [`tcp:${NODE_IP}:${np}`, 'tcp:10.250.0.100:80', 'tcp:10.250.0.200:80']) {
      expect(Object.keys(fromClient(9, target)).sort(), target).toEqual(['be1', 'be2', 'be3']);
    }
  });

  it('externalTrafficPolicy Local: only the local endpoint, and the health-check node port says so', async () => {
    const svc = await createService('web-local', { type: 'LoadBalancer', externalTrafficPolicy: 'Local' });
    await cp.api.patch(svc, { status: { loadBalancer: { ingress: [{ ip: '10.250.0.201' }] } } }, 'status');
    const hc = svc.spec.healthCheckNodePort;
    expect(hc).toBeGreaterThan(0);
    await expectReal('-t 10.250.0.201:80', { '10.244.1.2:8080': 1 });
    await expectReal(`-t ${NODE_IP}:${svc.spec.ports[0].nodePort}`, { '10.244.1.2:8080': 1 });
    expect(fromClient(6, 'tcp:10.250.0.201:80')).toEqual({ be1: 6 });
    // The health-check servers are updated at the end of a sync, after IPVS and iptables.
    let last = '';
    await waitFor('the health-check node port to count the local endpoint', async () => {
      const r = await fetch(`http://${NODE_IP}:${hc}/`).catch(() => null);
      last = r ? await r.text() : '';
      return r?.status === 200;
    }).catch((e: Error) => {
      throw new Error(`${e.message}: ${last}`);
    });
    expect(JSON.parse(last)).toMatchObject({ service: { namespace: NS, name: 'web-local' }, localEndpoints: 1 });
  });

  it('internalTrafficPolicy Local, session affinity, and a dual-stack Service (IPv6 traffic too)', async () => {
    const itp = (await createService('web-itp', { internalTrafficPolicy: 'Local' })).spec.clusterIP;
    const aff = (await createService('web-aff', { sessionAffinity: 'ClientIP' })).spec.clusterIP;
    const ds = await createService('web-ds', { ipFamilyPolicy: 'RequireDualStack' });
    const [v4, v6] = ds.spec.clusterIPs as string[];
    expect(v6).toContain(':');
    await expectReal(`-t ${itp}:80`, { '10.244.1.2:8080': 1 });
    await expectReal(`-t ${aff}:80`, ALL3);
    expect(ipvsadm()).toMatch(new RegExp(`-A -t ${aff.replaceAll('.', '\\.')}:80 -s rr -p 10800`));
    expect(Object.keys(fromClient(12, `tcp:${aff}:80`))).toHaveLength(1);
    await expectReal(`-t ${v4}:80`, ALL3);
    await expectReal(`-t [${v6}]:80`, { '[fd00:10:244:1::2]:8080': 1, '[fd00:10:244:2::2]:8080': 1, '[fd00:10:244:3::2]:8080': 1 });
    const body = sh('ip', 'netns', 'exec', 'kip-client', process.execPath, '-e',
      `fetch('http://[${v6}]/').then(r=>r.text()).then(t=>process.stdout.write(t))`);
    expect(body).toMatch(/^be[123]6 /);
  });

  it('trafficDistribution PreferClose: the controller writes zone hints and this node (zone-a) uses its zone', async () => {
    const ip = (await createService('web-topo', { trafficDistribution: 'PreferClose' })).spec.clusterIP;
    await waitFor('hints in the slice', async () => {
      const slices = await cp.api.list(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices?labelSelector=kubernetes.io/service-name=web-topo`);
      return slices.items.some((s: any) => s.endpoints?.every((e: any) => e.hints?.forZones?.[0]?.name === e.zone));
    });
    await expectReal(`-t ${ip}:80`, { '10.244.1.2:8080': 1 });
  });

  it('Pods scaled up and down; a Pod deleted with a grace period drains at weight 0, then goes', async () => {
    const ip = (await createService('scale', {}, {}, 'scale')).spec.clusterIP;
    const pod = (i: number) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: NS, name: `scale-${i}` } });
    await cp.api.createPod(NS, 'scale-1', { node: NODE, ips: ['10.244.1.2'], labels: { app: 'scale' } });
    await expectReal(`-t ${ip}:80`, { '10.244.1.2:8080': 1 });
    await cp.api.createPod(NS, 'scale-2', { node: 'node-b', ips: ['10.244.2.2'], labels: { app: 'scale' } });
    await cp.api.createPod(NS, 'scale-3', { node: 'node-c', ips: ['10.244.3.2'], labels: { app: 'scale' } });
    await expectReal(`-t ${ip}:80`, ALL3);
    await cp.api.delete(pod(3), 0);
    await expectReal(`-t ${ip}:80`, { '10.244.1.2:8080': 1, '10.244.2.2:8080': 1 });
    // A connection held on be2 keeps it draining (a drained real server goes within a second).
    const held: ChildProcess[] = [];
    let onBe2: ChildProcess | undefined;
    for (let i = 0; i < 4 && !onBe2; i++) {
      const c = spawn('ip', ['netns', 'exec', 'kip-client', process.execPath, `${REPO}test/kernel/lib/held-connection.mjs`, ip, '80']);
      held.push(c);
      const first = await new Promise<string>((r) => createInterface({ input: c.stdout! }).once('line', r));
      if (first === 'be2') onBe2 = c;
    }
    expect(onBe2, 'a held connection on be2').toBeDefined();
    // Terminating with a grace period: no kubelet ends it, so the endpoint stays serving + terminating.
    await cp.api.delete(pod(2), 30);
    await waitFor('a terminating endpoint in the slice', async () => {
      const slices = await cp.api.list(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices?labelSelector=kubernetes.io/service-name=scale`);
      return slices.items.some((s: any) => s.endpoints?.some((e: any) => e.conditions.terminating && e.conditions.serving));
    });
    await expectReal(`-t ${ip}:80`, { '10.244.1.2:8080': 1, '10.244.2.2:8080': 0 });
    expect(fromClient(6, `tcp:${ip}:80`)).toEqual({ be1: 6 });
    await cp.api.delete(pod(2), 0);
    expect(realServers(`-t ${ip}:80`)).toEqual({ '10.244.1.2:8080': 1, '10.244.2.2:8080': 0 }); // still draining
    // Its removal once the connection is gone is draining.test.ts's (the IPVS entry outlives the close).
    for (const c of held) c.stdin!.write('close\n');
  });

  it('records Events through events.k8s.io/v1 that kubectl describe shows', async () => {
    await createService('bad-sched', {}, { annotations: { 'kube-ipvs-proxy.io/scheduler': 'no-such-scheduler' } });
    const events = await waitFor('an Event on demo/bad-sched', async () => {
      const l = await cp.api.list(`/apis/events.k8s.io/v1/namespaces/${NS}/events?fieldSelector=regarding.name=bad-sched`);
      return l.items.length > 0 ? l.items : null;
    });
    expect(events[0]).toMatchObject({ type: 'Warning', regarding: { kind: 'Service', name: 'bad-sched' }, reportingController: expect.stringContaining('kube-ipvs-proxy') });
    const described = cp.kubectl(['describe', 'service', '-n', NS, 'bad-sched']);
    expect(described).toMatch(/Warning\s+\S+\s+.*no-such-scheduler/);
  });
});

describe('watch semantics against the real server', () => {
  it("a real bookmark moves the Node watch past a change it does not see", async () => {
    // kube-apiserver's watch cache sends a bookmark on each watch a minute after the last one.
    const bookmarks = () => [...daemon.log.matchAll(/kubernetes: bookmark\b.*path="\/api\/v1\/nodes".*resourceVersion="(\d+)"/g)].map((m) => Number(m[1]));
    await waitFor(`a bookmark on the Node watch at resourceVersion >= ${invisibleNodeRv}`, () => bookmarks().some((rv) => rv >= invisibleNodeRv), 130_000)
      .catch((e: Error) => { throw new Error(`${e.message}; bookmarks seen: ${JSON.stringify(bookmarks())}`); });
  }, 150_000);

  it('kube-apiserver restarted under the daemon, its token rotated meanwhile: nothing lost, nothing re-programmed', async () => {
    const before = sumMetric(await metrics(), 'kube_ipvs_proxy_kernel_ops_total');
    // A rotated token (new file contents), and the one the daemon started with refused: the new
    // watches after the restart are accepted only if the daemon reads the file again.
    daemon.writeToken(await boundToken('tok-1'));
    await cp.api.call('DELETE', '/api/v1/namespaces/kube-system/secrets/tok-0');
    const restarting = daemon.log.length;
    await cp.restartApiserver();
    const ready = daemon.log.length;
    const ip = (await createService('after-restart', {})).spec.clusterIP;
    await expectReal(`-t ${ip}:80`, ALL3, 90_000);
    const writes = sumMetric(await metrics(), 'kube_ipvs_proxy_kernel_ops_total') - before;
    // One Service with 3 endpoints: its virtual server, real servers, ipset entries and address.
    expect(writes).toBeLessThan(20);
    // A kube-apiserver that is starting answers 403 until its RBAC authorizer's caches are filled
    // (the daemon retries): the grants are checked before the restart and once it is ready.
    expect(daemon.log.slice(0, restarting) + daemon.log.slice(ready)).not.toMatch(/HTTP 403|forbidden/i);
  }, 200_000);

  it('a restart resumes its watches from the saved resourceVersions (no list)', async () => {
    await daemon.stop();
    const logBefore = daemon.log.length;
    const ip = (await createService('while-down', {})).spec.clusterIP;
    await daemon.start();
    await daemon.healthy(10256, 90_000);
    await expectReal(`-t ${ip}:80`, ALL3);
    expect(daemon.log.slice(logBefore)).toMatch(/resum/i);
    expect(daemon.log.slice(logBefore)).not.toMatch(/relisting/);
  });

  it('etcd compacted past the saved resourceVersion: 410, relist of > 2,000 objects in real pages, state converges', async () => {
    await daemon.stop();
    const logBefore = daemon.log.length;
    await cp.api.delete(service(NS, 'while-down', {}));
    const ip = (await createService('after-compact', {})).spec.clusterIP;
    // 2,100 more Services (ExternalName: listed, nothing to program) make the list 5 pages of 500.
    await cp.api.ensureNamespace('bulk');
    for (let i = 0; i < 2100; i += 50) {
      await Promise.all(Array.from({ length: 50 }, (_, j) => cp.api.create({ apiVersion: 'v1', kind: 'Service', metadata: { namespace: 'bulk', name: `x-${i + j}` }, spec: { type: 'ExternalName', externalName: 'example.invalid' } })));
    }
    // The last page: a Service (no endpoints) in the namespace listed after every other.
    await cp.api.ensureNamespace('zz-last');
    const last = (await cp.api.create(service('zz-last', 'last', { selector: { app: 'none' } }))).spec.clusterIP;
    const gone = await clusterIP('web');
    await cp.api.delete(service(NS, 'web', {}));
    await cp.compact();
    await cp.restartApiserver(); // its watch cache starts after the compaction
    await daemon.start();
    await daemon.healthy(10256, 90_000);
    await expectReal(`-t ${ip}:80`, ALL3, 60_000);
    await waitFor("the last page's Service programmed", () => ipvsadm().includes(`-A -t ${last}:80 `), 60_000);
    await waitFor('the Service deleted while down removed', () => !ipvsadm().includes(`-A -t ${gone}:80 `), 60_000);
    expect(daemon.log.slice(logBefore)).toMatch(/relisting/);
    expect(fromClient(6, `tcp:${ip}:80`)).toEqual({ be1: 2, be2: 2, be3: 2 });
  }, 300_000);
});
