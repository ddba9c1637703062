// iptables mode against a real control plane on the host kernel, in a fresh network namespace
// that plays the node: kube-apiserver and kube-controller-manager (its EndpointSlice controller
// writes the slices from Pods created here as kubelet would), the chart's RBAC installed with real
// Helm, and the daemon with a TokenRequest token of the chart's ServiceAccount. Real HTTP from a
// client namespace to backends in their own namespaces.
import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ControlPlane, installChart, service, startControlPlane } from '../lib/cluster.js';
import { CLI, Daemon, waitFor } from '../lib/daemon.js';
import { NetLab } from '../lib/netns.js';

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const NODE = 'kip-node';
const NS = 'demo';

function fromClient(count: number, target: string): Record<string, number> {
  const out = sh('ip', 'netns', 'exec', 'kip-client', process.execPath, `${REPO}examples/demo/client.mjs`, String(count), target);
  return (JSON.parse(out) as Record<string, Record<string, number>>)[target]!;
}

const lab = new NetLab();
const backends: ChildProcess[] = [];
const scratch = mkdtempSync(join(tmpdir(), 'kip-cluster-ipt-'));
let cp: ControlPlane;
let d: Daemon;
let madeHint = false;

/** Waits until `count` connections to `target` reach exactly the backends `want` (names). */
async function expectBackends(target: string, want: string[]): Promise<void> {
  let seen: Record<string, number> = {};
  await waitFor(`${target} → ${want.join(',')}`, () => {
    seen = fromClient(want.length * 6, target);
    return JSON.stringify(Object.keys(seen).sort()) === JSON.stringify([...want].sort());
  }, 30_000).catch((e: Error) => {
    throw new Error(`${e.message}; last ${JSON.stringify(seen)}\n${d.log.slice(-2000)}\n${sh('iptables-nft-save', '-t', 'nat')}`);
  });
}

beforeAll(async () => {
  sh('sysctl', '-qw', 'net.ipv4.ip_forward=1');
  await lab.netns('kip-client');
  await lab.veth({ name: 'kc0', address: '10.250.0.1/24' }, { ns: 'kip-client', name: 'eth0', address: '10.250.0.2/24', gateway: '10.250.0.1' });
  for (const i of [1, 2, 3]) {
    const ns = await lab.netns(`kip-be${i}`);
    await lab.veth({ name: `kb${i}`, address: `10.244.${i}.1/24` }, { ns, name: 'eth0', address: `10.244.${i}.2/24`, gateway: `10.244.${i}.1` });
    backends.push(spawn('ip', ['netns', 'exec', ns, process.execPath, `${REPO}examples/demo/backend.mjs`, `be${i}`], { stdio: 'ignore' }));
  }
  for (const i of [1, 2, 3]) await waitFor(`backend ${i}`, () => sh('ip', 'netns', 'exec', `kip-be${i}`, 'cat', '/proc/net/tcp').includes(':1F90 '));
  // As kubelet does: the node uses nft (the chain is removed again in afterAll if made here).
  madeHint = !sh('iptables-nft-save', '-t', 'mangle').includes(':KUBE-IPTABLES-HINT');
  if (madeHint) sh('iptables-nft', '-t', 'mangle', '-N', 'KUBE-IPTABLES-HINT');

  cp = await startControlPlane({ address: '10.250.0.1', port: 16443, etcdPort: 12379 });
  await cp.api.createNode(NODE, { addresses: ['10.250.0.1'], zone: 'zone-a' });
  await cp.api.createNode('node-b', { addresses: ['10.250.0.11'], zone: 'zone-b' });
  await cp.api.ensureNamespace(NS);
  for (const [i, node] of [[1, NODE], [2, 'node-b'], [3, 'node-b']] as const) {
    await cp.api.createPod(NS, `web-${i}`, { node, ips: [`10.244.${i}.2`], labels: { app: 'web' } });
  }
  await installChart(cp, { mode: 'iptables' });
  const token = await cp.api.token('kube-system', 'kip-kube-ipvs-proxy');
  const kubeconfig = join(scratch, 'sa.kubeconfig');
  writeFileSync(kubeconfig, JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'sa',
    clusters: [{ name: 'kip', cluster: { server: cp.server, 'certificate-authority-data': Buffer.from(cp.caPem()).toString('base64') } }],
    users: [{ name: 'sa', user: { token } }],
    contexts: [{ name: 'sa', context: { cluster: 'kip', user: 'sa' } }],
  }));
  d = new Daemon(['--proxy-mode', 'iptables', '--kubeconfig', kubeconfig, '--hostname-override', NODE, '--cluster-cidr', '10.244.0.0/16',
    '--log-format', 'text', '--iptables-min-sync-period', '100ms', '--iptables-sync-period', '5s']);
  d.start();
  await d.healthy();
}, 240_000);

afterAll(async () => {
  await d?.stop();
  // The next file in this namespace starts from a clean table: the daemon's rules, then the hint.
  execFileSync(process.execPath, [CLI, 'cleanup'], { stdio: 'ignore', env: { ...process.env, KUBE_IPVS_PROXY_STATE_DIR: d.stateDir } });
  if (madeHint) sh('iptables-nft', '-t', 'mangle', '-X', 'KUBE-IPTABLES-HINT');
  for (const b of backends) b.kill();
  await cp?.stop();
  await lab.cleanup();
  rmSync(scratch, { recursive: true, force: true });
}, 120_000);

describe('iptables mode on Services the real controller serves', () => {
  it('ClusterIP and NodePort spread over every ready Pod; externalTrafficPolicy Local keeps the local one', async () => {
    const ip = (await cp.api.create(service(NS, 'web', {}))).spec.clusterIP;
    const np = (await cp.api.create(service(NS, 'web-np', { type: 'NodePort', selector: { app: 'web' } }))).spec.ports[0].nodePort;
    const local = (await cp.api.create(service(NS, 'web-local', { type: 'NodePort', externalTrafficPolicy: 'Local', selector: { app: 'web' } }))).spec.ports[0].nodePort;
    await expectBackends(`tcp:${ip}:80`, ['be1', 'be2', 'be3']);
    await expectBackends(`tcp:10.250.0.1:${np}`, ['be1', 'be2', 'be3']);
    await expectBackends(`tcp:10.250.0.1:${local}`, ['be1']);
  });

  it('a LoadBalancer with externalTrafficPolicy Local: its health-check node port counts the local endpoint', async () => {
    const svc = await cp.api.create(service(NS, 'web-lb-local', { type: 'LoadBalancer', externalTrafficPolicy: 'Local', selector: { app: 'web' } }));
    const hc = svc.spec.healthCheckNodePort;
    let last = '';
    await waitFor('the health-check node port to report 1 local endpoint', async () => {
      const r = await fetch(`http://10.250.0.1:${hc}/`).catch(() => null);
      last = r ? `${r.status} ${await r.text()}` : 'no answer';
      return r?.status === 200 && JSON.parse(last.slice(4)).localEndpoints === 1;
    }, 20_000).catch((e: Error) => {
      throw new Error(`${e.message}: ${last}`);
    });
  });

  it('scaled down, and a Pod deleted with a grace period: no new connection to the terminating one', async () => {
    const ip = (await cp.api.get(service(NS, 'web', {})))!.spec.clusterIP;
    await cp.api.delete({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: NS, name: 'web-3' } }, 0);
    await expectBackends(`tcp:${ip}:80`, ['be1', 'be2']);
    await cp.api.delete({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: NS, name: 'web-2' } }, 30);
    await expectBackends(`tcp:${ip}:80`, ['be1']);
    expect(d.log).not.toMatch(/HTTP 403|forbidden/i);
  });
});
