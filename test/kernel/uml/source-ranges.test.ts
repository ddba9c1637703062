// loadBalancerSourceRanges inside UML, for every kind of client (kubernetes#119656): the demo's
// client namespace (outside), a pod namespace on the node (kip-be1, 10.244.1.2), and the node itself
// (UML's root namespace: a hostNetwork Pod is the same), from its default source address and bound
// to one of its addresses. Real HTTP connections to three LoadBalancer IPs whose ranges admit one
// kind of client each. kube-proxy's IPVS mode lets the node through whenever some node address is
// in the ranges, or whenever the node binds a source address of its own.
import { execFileSync } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { httpGets } from '../lib/clients.js';
import { CLI, Daemon, Manifests, demoNetworkUp, demoTeardown } from '../lib/daemon.js';
import { backendIP, demoService, demoSlice, docs } from '../lib/demo-manifests.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

/** name, LoadBalancer IP, cluster IP, the one range. Endpoints: be2 and be3. */
const SERVICES = [
  ['fw-client', '10.250.0.211', '10.96.0.61', '10.250.0.2/32'], // the client namespace only
  ['fw-pods', '10.250.0.212', '10.96.0.62', '10.244.1.0/24'], // kip-be1, and the node's 10.244.1.1
  ['fw-node', '10.250.0.213', '10.96.0.63', '10.250.0.1/32'], // the node's address on the client's link
] as const;
const MANIFEST = docs(
  ...SERVICES.flatMap(([name, lb, cluster, range]) => [
    demoService(name, { type: 'LoadBalancer', clusterIP: cluster, allocateLoadBalancerNodePorts: false, loadBalancerSourceRanges: [range] }, { lb }),
    demoSlice(name, [{ address: backendIP(2) }, { address: backendIP(3) }]),
  ]),
);

/** Who answers one GET to `lb`:80 from `client`: `ns:NAME`, `node`, or `node@ADDRESS` (bound source): `ok` for a backend, else `denied`. */
function get(client: string, lb: string): string {
  const [where, from] = client.split('@');
  const [answer] = httpGets(where!, lb, { timeoutMs: 1200, sources: from ? [from] : [] });
  const first = answer!.split(' ')[0]!;
  return answer!.startsWith('error:') ? 'denied' : /^be\d$/.test(first) ? 'ok' : first;
}

let manifests: Manifests;
let d: Daemon;
beforeAll(async () => {
  demoNetworkUp();
  manifests = new Manifests();
  manifests.write('source-ranges.yaml', MANIFEST);
  d = new Daemon(['--manifests', manifests.dir, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text']);
  d.start();
  await d.healthy();
});
afterAll(() => demoTeardown({ daemon: d, manifests }));

describe('loadBalancerSourceRanges for every client (kubernetes#119656)', () => {
  // client → [fw-client, fw-pods, fw-node]
  const MATRIX: Array<[string, [string, string, string]]> = [
    ['ns:kip-client', ['ok', 'denied', 'denied']],
    ['ns:kip-be1', ['denied', 'ok', 'denied']],
    // The node's default source to its own kube-ipvs0 address is that address: kube-proxy's rule,
    // allowed when a node address is in the ranges (10.244.1.1 for fw-pods, 10.250.0.1 for fw-node).
    ['node', ['denied', 'ok', 'ok']],
    // Bound to one of its addresses, the node is held to the ranges like any client.
    ['node@10.250.0.1', ['denied', 'denied', 'ok']],
    ['node@10.244.1.1', ['denied', 'ok', 'denied']],
    ['node@10.244.2.1', ['denied', 'denied', 'denied']],
  ];
  it.each(MATRIX)('from %s', (client, want) => {
    expect(SERVICES.map(([, lb]) => get(client, lb))).toEqual(want);
  });

  it('the cluster IPs of the same Services stay open to all of them (the ranges are for the LoadBalancer IP)', () => {
    for (const client of ['ns:kip-client', 'ns:kip-be1', 'node', 'node@10.244.2.1']) expect(get(client, '10.96.0.61'), client).toBe('ok');
  });

  it('the node-originated checks live in mangle OUTPUT; cleanup removes them with the rest', async () => {
    const mangle = () => execFileSync('iptables-legacy-save', ['-t', 'mangle'], { encoding: 'utf8' });
    expect(mangle()).toMatch(/^-A OUTPUT .*-j KUBE-PROXY-FIREWALL$/m);
    expect(mangle()).toMatch(/^-A KUBE-PROXY-FIREWALL .*--match-set KUBE-LOAD-BALANCER-FW dst,dst -j KUBE-SOURCE-RANGES-FIREWALL$/m);
    await d.stop();
    execFileSync(process.execPath, [CLI, 'cleanup'], { stdio: 'ignore' });
    expect(mangle()).not.toMatch(/KUBE-PROXY-FIREWALL|KUBE-SOURCE-RANGES-FIREWALL/);
    expect(execFileSync('ipset', ['list', '-n'], { encoding: 'utf8' })).not.toMatch(/^KUBE-/m);
  });
});
