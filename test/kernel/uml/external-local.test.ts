// externalIPs and node addresses as load-balancer IPs with externalTrafficPolicy: Local, inside UML
// (kubernetes#124260, #121272, #117613, #115019). Upstream's IPVS mode rejected clients of an eTP
// Local external IP (KUBE-IPVS-FILTER returned only for KUBE-EXTERNAL-IP, not its -LOCAL twin), and
// bound a node address used as an external or load-balancer IP on kube-ipvs0 and put it in
// KUBE-IPVS-IPS, so every other port of the node's own address was refused. Here: three Services,
// each with one endpoint on this node and two elsewhere, reached by real HTTP connections from the
// client namespace (outside) and from the node itself (UML's root namespace, a hostNetwork Pod's).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { httpGets, tally } from '../lib/clients.js';
import { CLI, Daemon, Manifests, demoNetworkUp, waitFor } from '../lib/daemon.js';
import { backendIP, demoService, demoSlice, docs } from '../lib/demo-manifests.js';
import { boundRoutes } from '../lib/bound.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;
const sh = (cmd: string, ...args: string[]) => execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });

/** A second address of the node on the client's link, used as a load-balancer IP. */
const NODE_IP2 = '10.250.0.5';
/** name, cluster IP, how it is reached (external or load-balancer IP), the local backend (the others are on another node). */
const SERVICES = [
  ['ext-local', '10.96.0.71', '10.250.0.100', 'be1'], // spec.externalIPs, bound on kube-ipvs0
  ['lb-node-ip', '10.96.0.72', '10.250.0.1', 'be2'], // status ingress IP = the node's own address
  ['lb-node-ip2', '10.96.0.73', NODE_IP2, 'be3'], // ... = another address of the node
] as const;
const MANIFEST = docs(
  ...SERVICES.flatMap(([name, cluster, ip, local], i) => [
    name === 'ext-local'
      ? demoService(name, { type: 'ClusterIP', clusterIP: cluster, externalIPs: [ip], externalTrafficPolicy: 'Local' })
      : demoService(name, { type: 'LoadBalancer', clusterIP: cluster, externalTrafficPolicy: 'Local', healthCheckNodePort: 32071 + i, allocateLoadBalancerNodePorts: false }, { lb: ip }),
    demoSlice(name, [1, 2, 3].map((n) => ({ address: backendIP(n), node: `be${n}` === local ? 'kip-node' : 'other-node' }))),
  ]),
);

/** `n` GETs to ip:port from `from` (`ns:NAME` or `node`): answer ("be1 10.250.0.2": the backend and the source address it saw, or error:CODE) → count. */
const gets = (from: string, ip: string, port: number, n: number): Record<string, number> => tally(httpGets(from, ip, { port, count: n }));

/** A plain HTTP listener of the node's own on :2222 (sshd, the kubelet…): it must stay reachable on every node address. */
let nodeListener: ChildProcess | null = null;
let manifests: Manifests;
beforeAll(async () => {
  execFileSync('sh', ['-c', `${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`]);
  demoNetworkUp();
  sh('ip', 'addr', 'add', `${NODE_IP2}/24`, 'dev', 'kc0');
  nodeListener = spawn(process.execPath, ['-e', "require('node:http').createServer((q, s) => s.end('node ' + q.socket.remoteAddress)).listen(2222, '0.0.0.0')"], { stdio: 'ignore' });
  manifests = new Manifests();
  manifests.write('services.yaml', ''); // only this file's Services
  manifests.write('endpointslices.yaml', '');
  manifests.write('external-local.yaml', MANIFEST);
  await waitFor('the node listener', () => /:08AE /.test(sh('cat', '/proc/net/tcp')));
});
afterAll(async () => {
  nodeListener?.kill();
  execFileSync('sh', ['-c', `ip addr del ${NODE_IP2}/24 dev kc0 2>/dev/null; sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`]);
  manifests?.remove();
});

// With --nodeport-addresses, a node address outside it (NODE_IP2) is still the node's: never bound.
for (const extra of [[], ['--nodeport-addresses', '10.250.0.1/32']]) {
describe(`externalIPs and node addresses as load-balancer IPs, externalTrafficPolicy: Local (kubernetes#124260, #121272, #117613, #115019)${extra.length ? ` with ${extra.join(' ')}` : ''}`, () => {
  let d: Daemon;
  beforeAll(async () => {
    d = new Daemon(['--manifests', manifests.dir, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text', ...extra]);
    d.start();
    await d.healthy();
  });
  afterAll(async () => {
    await d?.stop();
    execFileSync('sh', ['-c', `${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`]);
  });

  it('each virtual server has only the local endpoint; node addresses are not bound on kube-ipvs0 nor in KUBE-IPVS-IPS', () => {
    const ipvs = sh('ipvsadm', '-Sn');
    for (const [, , ip, local] of SERVICES) {
      const reals = [...ipvs.matchAll(new RegExp(`^-a -t ${ip.replace(/\./g, '\\.')}:80 -r (\\S+)`, 'gm'))].map((m) => m[1]);
      expect(reals, ip).toEqual([`10.244.${local.slice(2)}.2:8080`]);
    }
    const bound = boundRoutes().join(' ');
    expect(bound).toContain('10.250.0.100/32');
    expect(bound).not.toMatch(/10\.250\.0\.1\/|10\.250\.0\.5\//);
    const ipvsIps = sh('ipset', 'list', 'KUBE-IPVS-IPS');
    expect(ipvsIps).toMatch(/^10\.250\.0\.100$/m);
    expect(ipvsIps).not.toMatch(/^10\.250\.0\.(1|5)$/m);
    expect(sh('ipset', 'list', 'KUBE-EXTERNAL-IP-LOCAL')).toContain('10.250.0.100,tcp:80');
    const lbLocal = sh('ipset', 'list', 'KUBE-LOAD-BALANCER-LOCAL');
    for (const ip of ['10.250.0.1', NODE_IP2]) expect(lbLocal).toContain(`${ip},tcp:80`);
  });

  it('from outside (ns:kip-client): every connection answered by the local endpoint, which sees the client address', () => {
    for (const [, , ip, local] of SERVICES) expect(gets('ns:kip-client', ip, 80, 12), ip).toEqual({ [`${local} 10.250.0.2`]: 12 });
  });

  it("from outside: the node's own listener on each node address is still answered (not refused by KUBE-IPVS-FILTER)", () => {
    for (const ip of ['10.250.0.1', NODE_IP2]) expect(gets('ns:kip-client', ip, 2222, 3), ip).toEqual({ 'node 10.250.0.2': 3 });
  });

  // Which endpoints the node reaches is the internal-traffic policy's business: kube-proxy's IPVS
  // mode gives it the local endpoint (one virtual server for every source), its iptables mode short-circuits it to every endpoint,
  // masqueraded (etp-local-internal.test.ts holds this daemon to the latter). Here: it works, and
  // is one of those two.
  it('from the node itself: every connection answered, by the local endpoint or (as internal traffic) every endpoint', () => {
    // Unmasqueraded, the source is the kernel's choice: the IP itself when kube-ipvs0 or kc0 holds
    // it as its first address, kc0's first address (10.250.0.1) for the second one.
    const local = (ip: string, be: string) => ({ [`${be} ${ip === NODE_IP2 ? '10.250.0.1' : ip}`]: 12 });
    const all = { 'be1 10.244.1.1': 4, 'be2 10.244.2.1': 4, 'be3 10.244.3.1': 4 };
    for (const [, , ip, be] of SERVICES) expect([local(ip, be), all], ip).toContainEqual(gets('node', ip, 80, 12));
  });
});
}
