// Internal clients of an externalTrafficPolicy: Local LoadBalancer IP or external IP
// (kubernetes#93456, #115931), inside UML with real HTTP connections. A pod namespace on the node
// (kip-be3, 10.244.3.2, inside --cluster-cidr) and the node itself reach every endpoint, local or
// not, as kube-proxy's iptables mode short-circuits them to the Service; the client namespace
// (10.250.0.2, outside the cluster CIDR) keeps Local: only this node's endpoints, source preserved,
// refused where there is none. The endpoints' nodeName says which are "on other nodes" (the demo's
// backends all run in namespaces of this one node).
import { execFileSync } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { httpGets, who } from '../lib/clients.js';
import { Daemon, Manifests, demoNetworkUp, demoTeardown } from '../lib/daemon.js';
import { backendIP, demoService, demoSlice, docs } from '../lib/demo-manifests.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

/** name, LoadBalancer IP, external IP, cluster IP, the node of be1 and of be2. */
const SERVICES = [
  ['remote', '10.250.0.221', '10.250.0.231', '10.96.0.71', 'kip-node-b', 'kip-node-c'], // no local endpoint
  ['local', '10.250.0.222', '10.250.0.232', '10.96.0.72', 'kip-node-b', 'kip-node'], // be2 is local
] as const;
const MANIFEST = docs(
  ...SERVICES.flatMap(([name, lb, ext, cluster, node1, node2]) => [
    demoService(name, { type: 'LoadBalancer', clusterIP: cluster, externalIPs: [ext], externalTrafficPolicy: 'Local', allocateLoadBalancerNodePorts: false }, { lb }),
    demoSlice(name, [{ address: backendIP(1), node: node1 }, { address: backendIP(2), node: node2 }]),
  ]),
);
/** name, LoadBalancer IP, cluster IP, the one source range; be1 on another node, be2 local. */
const RANGED = [
  ['ranged-client', '10.250.0.223', '10.96.0.73', '10.250.0.2/32'],
  ['ranged-pod', '10.250.0.224', '10.96.0.74', '10.244.3.0/24'],
] as const;
const RANGED_MANIFEST = docs(
  ...RANGED.flatMap(([name, lb, cluster, range]) => [
    demoService(name, { type: 'LoadBalancer', clusterIP: cluster, externalTrafficPolicy: 'Local', loadBalancerSourceRanges: [range], allocateLoadBalancerNodePorts: false }, { lb }),
    demoSlice(name, [{ address: backendIP(1), node: 'kip-node-b' }, { address: backendIP(2) }]),
  ]),
);

/** The answers to `n` GETs to `vip`:80 from `client` (`ns:NAME` or `node`): `be1 10.244.3.2` (the backend and the client address it saw), `refused`, … */
const gets = (client: string, vip: string, n = 6): string[] =>
  httpGets(client, vip, { count: n }).map((a) => (a === 'error:ECONNREFUSED' || a === 'error:EHOSTUNREACH' ? 'refused' : a));

let manifests: Manifests;
let d: Daemon;
beforeAll(async () => {
  demoNetworkUp();
  manifests = new Manifests();
  manifests.write('etp-local.yaml', MANIFEST);
  manifests.write('etp-local-ranged.yaml', RANGED_MANIFEST);
  d = new Daemon(['--manifests', manifests.dir, '--hostname-override', 'kip-node', '--cluster-cidr', '10.244.0.0/16', '--log-format', 'text']);
  d.start();
  await d.healthy();
});
afterAll(() => demoTeardown({ daemon: d, manifests }));

describe('internal clients of an externalTrafficPolicy: Local LoadBalancer or external IP (kubernetes#93456, #115931)', () => {
  const VIPS = SERVICES.flatMap(([name, lb, ext]) => [[`${name} lb`, lb], [`${name} external`, ext]] as const);

  it.each(VIPS)('%s: a Pod on the node reaches every endpoint, local or not, with its own address', (_, vip) => {
    const answers = gets('ns:kip-be3', vip);
    expect(who(answers)).toEqual(['be1', 'be2']);
    // The backend's page names the client address it saw: the Pod's, not masqueraded.
    for (const a of answers) expect(a).toMatch(/ 10\.244\.3\.2\b/);
  });

  it.each(VIPS)('%s: the node itself reaches every endpoint', (_, vip) => {
    expect(who(gets('node', vip))).toEqual(['be1', 'be2']);
  });

  it('from outside, the VIPs without a local endpoint are refused', () => {
    expect(who(gets('ns:kip-client', '10.250.0.221', 3))).toEqual(['refused']);
    expect(who(gets('ns:kip-client', '10.250.0.231', 3))).toEqual(['refused']);
  });

  it('from outside, the VIPs with a local endpoint reach only it, with the client address preserved', () => {
    for (const vip of ['10.250.0.222', '10.250.0.232']) {
      const answers = gets('ns:kip-client', vip);
      expect(who(answers)).toEqual(['be2']);
      for (const a of answers) expect(a).toMatch(/ 10\.250\.0\.2\b/);
    }
  });

  it('behind loadBalancerSourceRanges, only sources inside them get in: Pods are redirected only from inside', () => {
    const denied = (answers: string[]): boolean => answers.every((a) => !a.startsWith('be'));
    // ranged-client admits the client namespace only: it gets the local endpoint; the Pod and the node get nothing.
    expect(who(gets('ns:kip-client', '10.250.0.223'))).toEqual(['be2']);
    expect(denied(gets('ns:kip-be3', '10.250.0.223', 2))).toBe(true);
    expect(denied(gets('node', '10.250.0.223', 2))).toBe(true);
    // ranged-pod admits kip-be3's subnet: the Pod gets every endpoint; the client nothing.
    expect(who(gets('ns:kip-be3', '10.250.0.224'))).toEqual(['be1', 'be2']);
    expect(denied(gets('ns:kip-client', '10.250.0.224', 2))).toBe(true);
  });

  it('IPVS holds the local endpoints only for the VIPs, every endpoint for the cluster IPs', () => {
    const table = execFileSync('ipvsadm', ['-Ln'], { encoding: 'utf8' });
    const reals = (vs: string): string[] => {
      const at = table.indexOf(`TCP  ${vs} `);
      expect(at, vs).toBeGreaterThanOrEqual(0);
      const block = table.slice(at).split('\n').slice(1);
      const end = block.findIndex((l) => !l.trimStart().startsWith('->'));
      return block.slice(0, end).map((l) => l.trim().split(/\s+/)[1]!).sort();
    };
    expect(reals('10.250.0.221:80')).toEqual([]);
    expect(reals('10.250.0.231:80')).toEqual([]);
    expect(reals('10.250.0.222:80')).toEqual(['10.244.2.2:8080']);
    expect(reals('10.250.0.232:80')).toEqual(['10.244.2.2:8080']);
    for (const vs of ['10.96.0.71:80', '10.96.0.72:80']) expect(reals(vs)).toEqual(['10.244.1.2:8080', '10.244.2.2:8080']);
  });
});
