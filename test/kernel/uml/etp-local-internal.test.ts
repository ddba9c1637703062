// Internal clients of an externalTrafficPolicy: Local LoadBalancer IP or external IP
// (kubernetes#93456, #115931), inside UML with real HTTP connections. A pod namespace on the node
// (kip-be3, 10.244.3.2, inside --cluster-cidr) and the node itself reach every endpoint, local or
// not, as kube-proxy's iptables mode short-circuits them to the Service; the client namespace
// (10.250.0.2, outside the cluster CIDR) keeps Local: only this node's endpoints, source preserved,
// refused where there is none. The endpoints' nodeName says which are "on other nodes" (the demo's
// backends all run in namespaces of this one node).
import { execFileSync } from 'node:child_process';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CLI, Daemon, Manifests, demoNetworkUp } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';

assertIsolated();

const REPO = new URL('../../../', import.meta.url).pathname;

/** name, LoadBalancer IP, external IP, cluster IP, the node of be1 and of be2. */
const SERVICES = [
  ['remote', '10.250.0.221', '10.250.0.231', '10.96.0.71', 'kip-node-b', 'kip-node-c'], // no local endpoint
  ['local', '10.250.0.222', '10.250.0.232', '10.96.0.72', 'kip-node-b', 'kip-node'], // be2 is local
] as const;
const MANIFEST = SERVICES.map(
  ([name, lb, ext, cluster, node1, node2]) => `apiVersion: v1
kind: Service
metadata: {name: ${name}, namespace: demo}
spec: {type: LoadBalancer, clusterIP: ${cluster}, externalIPs: [${ext}], externalTrafficPolicy: Local, allocateLoadBalancerNodePorts: false, ports: [{name: http, port: 80, targetPort: 8080}]}
status: {loadBalancer: {ingress: [{ip: ${lb}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ${name}-1, namespace: demo, labels: {kubernetes.io/service-name: ${name}}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.244.1.2], nodeName: ${node1}, conditions: {ready: true}}
- {addresses: [10.244.2.2], nodeName: ${node2}, conditions: {ready: true}}`,
).join('\n---\n');
/** name, LoadBalancer IP, cluster IP, the one source range; be1 on another node, be2 local. */
const RANGED = [
  ['ranged-client', '10.250.0.223', '10.96.0.73', '10.250.0.2/32'],
  ['ranged-pod', '10.250.0.224', '10.96.0.74', '10.244.3.0/24'],
] as const;
const RANGED_MANIFEST = RANGED.map(
  ([name, lb, cluster, range]) => `apiVersion: v1
kind: Service
metadata: {name: ${name}, namespace: demo}
spec: {type: LoadBalancer, clusterIP: ${cluster}, externalTrafficPolicy: Local, loadBalancerSourceRanges: [${range}], allocateLoadBalancerNodePorts: false, ports: [{name: http, port: 80, targetPort: 8080}]}
status: {loadBalancer: {ingress: [{ip: ${lb}}]}}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {name: ${name}-1, namespace: demo, labels: {kubernetes.io/service-name: ${name}}}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- {addresses: [10.244.1.2], nodeName: kip-node-b, conditions: {ready: true}}
- {addresses: [10.244.2.2], nodeName: kip-node, conditions: {ready: true}}`,
).join('\n---\n');

// GETs to argv[1]:80, argv[2] times in turn; prints "backend client-address" (what the backend saw) or "refused" per line.
const GET_JS = `
const get = () => new Promise((done) => {
  const req = require('node:http').request({ host: process.argv[1], port: 80, path: '/', agent: false, timeout: 1500 }, (res) => {
    let body = ''; res.on('data', (d) => (body += d)); res.on('end', () => done(body.trim()));
  });
  req.on('timeout', () => req.destroy(new Error('timeout')));
  req.on('error', (e) => done(e.code === 'ECONNREFUSED' || e.code === 'EHOSTUNREACH' ? 'refused' : 'failed ' + (e.code || e.message)));
  req.end();
});
(async () => { for (let i = 0; i < Number(process.argv[2]); i++) console.log(await get()); })();
`;

/** The answers to `n` GETs to `vip` from `client` (`ns:NAME` or `node`): `be1`, `refused`, … */
function gets(client: string, vip: string, n = 6): string[] {
  const argv = [process.execPath, '-e', GET_JS, vip, String(n)];
  const cmd = client.startsWith('ns:') ? ['ip', 'netns', 'exec', client.slice(3), ...argv] : argv;
  return execFileSync(cmd[0]!, cmd.slice(1), { encoding: 'utf8' }).trim().split('\n');
}
/** The distinct backends (or `refused`) that answered, sorted. */
const who = (answers: string[]): string[] => [...new Set(answers.map((a) => a.split(' ')[0]!))].sort();

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
afterAll(async () => {
  await d?.stop();
  execFileSync('sh', ['-c', `sh ${REPO}examples/demo/network.sh down; ${process.execPath} ${CLI} cleanup >/dev/null 2>&1; true`]);
  manifests?.remove();
});

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
