// End to end on the host kernel (no IPVS) in a fresh network namespace that plays the node:
// examples/demo/network.sh's topology (client + three backends over veth, built here so the
// backends are this test's children), the built daemon in iptables mode from a copy of the
// example manifests, real HTTP/UDP traffic from the client through ClusterIP, NodePort, external
// and LB IPs, spread by `statistic --mode random`; affinity; an endpoint removal; iptables-save
// cross-checks; a restart (as `--proxy-mode ipvs`, which falls back) keeps chain names.
import { assertIsolated } from '../lib/guard.js';
assertIsolated();

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { fromClient } from '../lib/clients.js';
import { CLI, Daemon, Manifests, waitFor } from '../lib/daemon.js';
import { demoEndpoints, demoService, demoSlice, docs } from '../lib/demo-manifests.js';
import { NetLab } from '../lib/netns.js';

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8' });
const save = (table = 'nat') => sh('iptables-nft-save', '-t', table);
const ARGS = ['--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text', '--iptables-min-sync-period', '100ms', '--iptables-sync-period', '5s'];
const BACKENDS = ['be1', 'be2', 'be3'];

/** KUBE-SVC/SEP chain names in nat. */
const serviceChainNames = () => save().split('\n').filter((l) => /^:KUBE-(SVC|SEP)-/.test(l)).map((l) => l.slice(1).split(' ')[0]).sort();

/** Two LoadBalancer Services with source ranges: one admits the client (10.250.0.2), one does not. */
const EXTRA = docs(
  ...([
    ['fw-open', '10.250.0.201', '10.250.0.0/24', '10.96.0.30', 30090],
    ['fw-closed', '10.250.0.202', '192.0.2.0/24', '10.96.0.31', 30091],
  ] as const).flatMap(([name, lb, range, cluster, nodePort]) => [
    demoService(name, { type: 'LoadBalancer', clusterIP: cluster, loadBalancerSourceRanges: [range], ports: [{ name: 'http', port: 80, nodePort }] }, { lb }),
    demoSlice(name, demoEndpoints()),
  ]),
);

const lab = new NetLab();
const backends: ChildProcess[] = [];
let manifests: Manifests;
let stubDir: string;
let d: Daemon;

beforeAll(async () => {
  sh('sysctl', '-qw', 'net.ipv4.ip_forward=1');
  await lab.netns('kip-client');
  await lab.veth({ name: 'kc0', address: '10.250.0.1/24' }, { ns: 'kip-client', name: 'eth0', address: '10.250.0.2/24', gateway: '10.250.0.1' });
  // External and LB IPs are routed to the node (nothing binds them in iptables mode).
  for (const vip of ['10.250.0.100', '10.250.0.200', '10.250.0.201', '10.250.0.202']) sh('ip', '-n', 'kip-client', 'route', 'add', `${vip}/32`, 'via', '10.250.0.1');
  for (const [i, name] of BACKENDS.entries()) {
    const ns = await lab.netns(`kip-${name}`);
    await lab.veth({ name: `kb${i + 1}`, address: `10.244.${i + 1}.1/24` }, { ns, name: 'eth0', address: `10.244.${i + 1}.2/24`, gateway: `10.244.${i + 1}.1` });
    backends.push(spawn('ip', ['netns', 'exec', ns, process.execPath, `${REPO}examples/demo/backend.mjs`, name], { stdio: 'ignore' }));
  }
  for (const i of [1, 2, 3]) await waitFor(`backend ${i}`, () => sh('ip', 'netns', 'exec', `kip-be${i}`, 'cat', '/proc/net/tcp').includes(':1F90 '));
  sh('iptables-nft', '-t', 'mangle', '-N', 'KUBE-IPTABLES-HINT'); // as kubelet does: the node uses nft
  manifests = new Manifests();
  manifests.write('firewalled.yaml', EXTRA);
  // `modprobe` that always fails: the host's kernel must never be asked to load a module.
  stubDir = mkdtempSync(join(tmpdir(), 'kip-stub-'));
  writeFileSync(join(stubDir, 'modprobe'), '#!/bin/sh\necho "modprobe: FATAL: Module $* not found (test stub)" >&2\nexit 1\n');
  chmodSync(join(stubDir, 'modprobe'), 0o755);
  d = new Daemon(['--proxy-mode', 'iptables', '--manifests', manifests.dir, ...ARGS]);
  d.start();
  await d.healthy();
}, 60_000);

afterAll(async () => {
  await d?.stop();
  for (const b of backends) b.kill('SIGKILL');
  await lab.cleanup();
  execFileSync('sh', ['-c', `${process.execPath} ${CLI} cleanup >/dev/null 2>&1; iptables-nft -t mangle -X KUBE-IPTABLES-HINT; true`]);
  manifests?.remove();
  if (stubDir) rmSync(stubDir, { recursive: true, force: true });
});

describe('the daemon in iptables mode', () => {
  it('spreads ClusterIP connections over the three backends, roughly evenly (statistic random)', () => {
    const seen = fromClient(60, 'tcp:10.96.0.10:80');
    expect(Object.keys(seen).sort()).toEqual(BACKENDS);
    // 20 expected each; all three binomial(60, 1/3) counts stay within [4, 40] but for 5 runs in 10 million.
    // (The probabilities themselves are checked exactly by the golden tests.)
    for (const b of BACKENDS) expect(seen[b]).toBeGreaterThanOrEqual(4), expect(seen[b]).toBeLessThanOrEqual(40);
  });

  it('serves NodePort, externalIP and LoadBalancer IP over TCP, and UDP', () => {
    for (const target of ['tcp:10.250.0.1:30080', 'tcp:10.250.0.100:80', 'tcp:10.250.0.200:80', 'tcp:10.250.0.1:30081', 'udp:10.96.0.53:53']) {
      expect(Object.keys(fromClient(40, target)).sort(), target).toEqual(BACKENDS);
    }
  });

  it('session affinity (recent) pins a client to one backend', () => {
    expect(Object.keys(fromClient(15, 'tcp:10.96.0.12:80'))).toHaveLength(1);
  });

  it('hairpin: a backend reaching its own Service (and itself behind it) is masqueraded', () => {
    expect(Object.keys(fromClient(24, 'tcp:10.96.0.10:80', 'kip-be1')).sort()).toEqual(BACKENDS);
  });

  it('loadBalancerSourceRanges: a client inside the ranges gets through, one outside is dropped (its NodePort stays open)', () => {
    expect(Object.keys(fromClient(40, 'tcp:10.250.0.201:80')).sort()).toEqual(BACKENDS);
    expect(fromClient(1, 'tcp:10.250.0.202:80')).toEqual({ 'error:timeout': 1 });
    expect(Object.keys(fromClient(40, 'tcp:10.250.0.1:30091')).sort()).toEqual(BACKENDS);
    expect(save('filter')).toMatch(/^-A KUBE-PROXY-FIREWALL -d 10\.250\.0\.202\/32 -p tcp -m comment --comment "demo\/fw-closed:http traffic not accepted by KUBE-FW-\w{16}" -m tcp --dport 80 -j DROP$/m);
  });

  it('answers /proxyMode with iptables, and says once that the sh annotation is not honoured', async () => {
    expect(await (await fetch('http://127.0.0.1:10249/proxyMode')).text()).toBe('iptables');
    expect(await (await fetch('http://127.0.0.1:10249/metrics')).text()).toMatch(/^kube_ipvs_proxy_proxy_mode\{mode="iptables"\} 1$/m);
    expect(d.log.match(/cannot honour the scheduler annotation.*demo\/hashed/g)).toHaveLength(1);
  });

  it('iptables-save shows kube-proxy\'s chains: KUBE-SERVICES -> KUBE-SVC -> KUBE-SEP DNAT, NodePorts, masquerade', () => {
    const nat = save();
    const svc = /-A KUBE-SERVICES -d 10\.96\.0\.10\/32 -p tcp -m comment --comment "demo\/web:http cluster IP" -m tcp --dport 80 -j (KUBE-SVC-\w{16})/.exec(nat)?.[1];
    expect(svc).toBeDefined();
    const seps = [...nat.matchAll(new RegExp(`^-A ${svc} .*-j (KUBE-SEP-\\w{16})$`, 'gm'))].map((m) => m[1]);
    expect(seps).toHaveLength(3);
    for (const [i, sep] of seps.entries()) expect(nat).toMatch(new RegExp(`^-A ${sep} -p tcp .*-j DNAT --to-destination 10\\.244\\.${i + 1}\\.2:8080$`, 'm'));
    expect(nat).toMatch(/^-A KUBE-NODEPORTS -p tcp -m comment --comment "demo\/web:http" -m tcp --dport 30080 -j KUBE-EXT-\w{16}$/m);
    expect(nat).toMatch(/^-A KUBE-SVC-\w{16} ! -s 10\.244\.0\.0\/16 -d 10\.96\.0\.10\/32 .*-j KUBE-MARK-MASQ$/m);
    expect(nat).toMatch(/^-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully$/m);
    expect(save('filter')).toMatch(/^-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD$/m);
    const inspect = JSON.parse(sh(process.execPath, CLI, 'inspect', '--json')) as { mode: string; iptables: { backend: string } };
    expect(inspect).toMatchObject({ mode: 'iptables', iptables: { backend: 'nft' } });
  });

  it('removing an endpoint: its KUBE-SEP chain goes and new connections avoid it', async () => {
    manifests.edit('endpointslices.yaml', (doc) =>
      doc.metadata?.labels?.['kubernetes.io/service-name'] === 'web'
        ? { ...doc, endpoints: doc.endpoints.filter((e: { addresses: string[] }) => !e.addresses.includes('10.244.3.2')) }
        : doc,
    );
    await waitFor('the endpoint chain to go', () => !/comment "demo\/web:http" -m tcp -j DNAT --to-destination 10\.244\.3\.2:8080/.test(save()));
    const seen = fromClient(30, 'tcp:10.96.0.10:80');
    expect(seen.be3).toBeUndefined();
    expect(Object.keys(seen).sort()).toEqual(['be1', 'be2']);
  });

  it('UDP: removing the endpoint a flow is pinned to (by conntrack) moves the flow, as its entries are cleared', async () => {
    // One datagram from a fixed source port: the same flow (conntrack entry) every time.
    const udp = `const s = require('node:dgram').createSocket('udp4'); s.bind(40000, () => s.send('x', 53, '10.96.0.53'));
      s.on('message', (m) => { process.stdout.write(m.toString().split(' ')[0]); process.exit(0); }); setTimeout(() => process.exit(1), 2000);`;
    const ask = () => sh('ip', 'netns', 'exec', 'kip-client', process.execPath, '-e', udp);
    const pinned = ask();
    expect(ask()).toBe(pinned);
    const ip = `10.244.${pinned.slice(2)}.2`;
    manifests.edit('endpointslices.yaml', (doc) =>
      doc.metadata?.labels?.['kubernetes.io/service-name'] === 'dns' ? { ...doc, endpoints: doc.endpoints.filter((e: { addresses: string[] }) => !e.addresses.includes(ip)) } : doc,
    );
    await waitFor('the flow to move off the removed endpoint', () => ask() !== pinned, 10_000);
  });

  it('a periodic full sync over unchanged tables runs no iptables-save; a rule deleted by hand is back at the next one', async () => {
    const fullSyncs = (from: number) => d.log.slice(from).split('\n').filter((l) => /synced/.test(l) && /full=true/.test(l));
    let mark = d.log.length;
    // The first full sync after a partial one reads the tables (and keeps their token), the next ones need not.
    await waitFor('a periodic full sync that found the tables unchanged', () => fullSyncs(mark).some((l) => /unchanged=true/.test(l)), 25_000);
    const portal = save().split('\n').find((l) => /^-A KUBE-SERVICES .*demo\/web:http cluster IP/.test(l))!;
    expect(portal).toBeDefined();
    sh('iptables-nft', '-t', 'nat', '-D', ...portal.slice(3).match(/"[^"]*"|\S+/g)!.map((t) => t.replace(/^"|"$/g, '')));
    expect(save()).not.toContain(portal);
    mark = d.log.length;
    // Put back by the next full sync (or a partial one, which moves the token); its line is logged after the restore.
    await waitFor('the deleted rule back, and a full sync logged', () => save().includes(portal) && fullSyncs(mark).length > 0, 15_000);
    expect(fullSyncs(mark)[0]).not.toMatch(/unchanged/);
    expect(Object.keys(fromClient(12, 'tcp:10.96.0.10:80')).length).toBeGreaterThan(0);
  });

  it('a restart keeps the rules in place and the chain names; `--proxy-mode ipvs` without IPVS falls back', async () => {
    const names = serviceChainNames();
    expect(await d.stop()).toBe(0);
    expect(serviceChainNames()).toEqual(names); // SIGTERM leaves the rules
    expect(Object.keys(fromClient(24, 'tcp:10.96.0.10:80')).sort()).toEqual(['be1', 'be2']);
    d = new Daemon(['--proxy-mode', 'ipvs', '--manifests', manifests.dir, ...ARGS]);
    const path = process.env.PATH;
    process.env.PATH = `${stubDir}:${path}`; // the child inherits it: its modprobe is the stub
    d.start();
    process.env.PATH = path;
    await d.healthy();
    expect(d.log).toMatch(/WARN IPVS is unavailable: falling back to the iptables proxy mode.*reason=".*modprobe ip_vs did not help"/);
    expect(await (await fetch('http://127.0.0.1:10249/proxyMode')).text()).toBe('iptables');
    expect(serviceChainNames()).toEqual(names);
    expect(Object.keys(fromClient(24, 'tcp:10.250.0.1:30080')).sort()).toEqual(['be1', 'be2']);
  });

  it('`cleanup` removes every iptables-mode chain and jump (KUBE-SVC/SEP/EXT/FW… are owned KUBE-* chains)', async () => {
    expect(await d.stop()).toBe(0);
    sh(process.execPath, CLI, 'cleanup');
    const all = sh('iptables-nft-save');
    expect(all.split('\n').filter((l) => l.includes('KUBE-'))).toEqual([':KUBE-IPTABLES-HINT - [0:0]']); // kubelet's, not ours
  });

  it('`--proxy-mode ipvs --ipvs-fallback=false` without IPVS exits 1 with a clear error', () => {
    let code = 0;
    let out = '';
    try {
      execFileSync(process.execPath, [CLI, '--proxy-mode', 'ipvs', '--ipvs-fallback=false', '--once', '--manifests', manifests.dir, ...ARGS], {
        encoding: 'utf8',
        stdio: 'pipe',
        env: { ...process.env, PATH: `${stubDir}:${process.env.PATH}` },
      });
    } catch (e) {
      const err = e as { status: number; stderr: string; stdout: string };
      code = err.status;
      out = err.stderr + err.stdout;
    }
    expect(code).toBe(1);
    expect(out).toMatch(/ERROR IPVS is unavailable and the iptables fallback is disabled/);
  });
});
