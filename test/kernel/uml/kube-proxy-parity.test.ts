// A differential test against the real kube-proxy v1.34 in IPVS mode: one control plane (etcd,
// kube-apiserver, kube-controller-manager's EndpointSlice controller), one set of Services and
// Pods, then kube-proxy and this daemon in turn on the same kernel with the same flags. Each
// one's kernel state (IPVS, ipsets, kube-ipvs0's addresses, iptables, sysctls, health-check
// listeners) is captured, normalised and compared section by section. Every difference must be
// one of DIVERGENCES (each documented in docs/kube-proxy-parity.md), and each of those must
// still occur, so an undocumented difference or a stale entry fails the test.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ensureTools } from '../../tools/build.mjs';
import { ControlPlane, service } from '../lib/cluster.js';
import { Daemon, waitFor } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';
import {
  COMMON_FLAGS, KubeProxy, NODE, type Capture, type Divergence, compare, divergences, expectClean, orderDifferences, settled, startCluster, stopCluster, stopProxy,
} from '../lib/kube-proxy.js';

assertIsolated();

const NS = 'parity';
/** Load-balancer ingress IPs the Services get. */
const LB = { plain: '10.250.0.200', ranges: '10.250.0.201', local: '10.250.0.202', localNone: '10.250.0.203', proxy: '10.250.0.204', mixed: '10.250.0.205', noNp: '10.250.0.206', rangesLocal: '10.250.0.207', aff: '10.250.0.208', dsLocal: '10.250.0.209', v6: 'fd00:10:250::200', dsLocal6: 'fd00:10:250::209' };
/** The documented divergences: lb-local-none is the eTP Local load-balancer IP without a local endpoint. */
const DIVERGENCES = divergences([`${LB.localNone}:80`]);

// ---------------------------------------------------------------------------------------------
// The cluster: Pods and Services
// ---------------------------------------------------------------------------------------------

type PodSpec = { name: string; node: string; ips: string[]; app: string; ports?: object[]; ready?: boolean; terminating?: boolean };
const WEB_PORTS = [
  { name: 'http', containerPort: 8080 }, { name: 'metrics', containerPort: 9090 },
  { name: 'dns', containerPort: 5353, protocol: 'UDP' }, { name: 'sctp', containerPort: 7777, protocol: 'SCTP' },
];
const PODS: PodSpec[] = [
  { name: 'web-a', node: NODE, ips: ['10.244.1.10', 'fd00:10:244:1::10'], app: 'web', ports: WEB_PORTS },
  { name: 'web-b', node: 'node-b', ips: ['10.244.2.10', 'fd00:10:244:2::10'], app: 'web', ports: WEB_PORTS },
  { name: 'web-c', node: 'node-c', ips: ['10.244.3.10', 'fd00:10:244:3::10'], app: 'web', ports: WEB_PORTS },
  { name: 'remote-b', node: 'node-b', ips: ['10.244.2.20'], app: 'remote' },
  { name: 'remote-c', node: 'node-c', ips: ['10.244.3.20'], app: 'remote' },
  { name: 'term-a', node: NODE, ips: ['10.244.1.30'], app: 'term' },
  { name: 'term-a2', node: NODE, ips: ['10.244.1.31'], app: 'term', terminating: true },
  { name: 'term-b', node: 'node-b', ips: ['10.244.2.30'], app: 'term', terminating: true },
  { name: 'allterm-a', node: NODE, ips: ['10.244.1.40'], app: 'allterm', terminating: true },
  { name: 'allterm-b', node: 'node-b', ips: ['10.244.2.40'], app: 'allterm', terminating: true },
  { name: 'nr-a', node: NODE, ips: ['10.244.1.50'], app: 'nr', ready: false },
  { name: 'nr-b', node: 'node-b', ips: ['10.244.2.50'], app: 'nr' },
  { name: 'named-a', node: NODE, ips: ['10.244.1.60'], app: 'named', ports: [{ name: 'web', containerPort: 8080 }] },
  { name: 'named-b', node: 'node-b', ips: ['10.244.2.60'], app: 'named', ports: [{ name: 'web', containerPort: 8081 }] },
];

type SvcSpec = { name: string; app?: string; spec: Record<string, unknown>; ingress?: object[] };
const HTTP = [{ name: 'http', port: 80, targetPort: 'http' }];
const SERVICES: SvcSpec[] = [
  { name: 'cip', spec: { ports: HTTP } },
  { name: 'cip-multi', spec: { ports: [...HTTP, { name: 'metrics', port: 9090, targetPort: 'metrics' }] } },
  { name: 'cip-udp', spec: { ports: [{ name: 'dns', port: 53, targetPort: 'dns', protocol: 'UDP' }] } },
  { name: 'cip-sctp', spec: { ports: [{ name: 'sctp', port: 7777, targetPort: 7777, protocol: 'SCTP' }] } },
  { name: 'np', spec: { type: 'NodePort', ports: HTTP } },
  { name: 'np-udp', spec: { type: 'NodePort', ports: [{ name: 'dns', port: 53, targetPort: 'dns', protocol: 'UDP' }] } },
  { name: 'np-local', spec: { type: 'NodePort', externalTrafficPolicy: 'Local', ports: HTTP } },
  { name: 'np-local-none', app: 'remote', spec: { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'lb', spec: { type: 'LoadBalancer', ports: HTTP }, ingress: [{ ip: LB.plain }] },
  { name: 'lb-ranges', spec: { type: 'LoadBalancer', ports: HTTP, loadBalancerSourceRanges: ['10.250.0.0/28', '192.0.2.0/24'] }, ingress: [{ ip: LB.ranges }] },
  { name: 'lb-local', spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', ports: HTTP }, ingress: [{ ip: LB.local }] },
  { name: 'lb-local-none', app: 'remote', spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', ports: [{ port: 80, targetPort: 8080 }] }, ingress: [{ ip: LB.localNone }] },
  { name: 'lb-proxy-mode', spec: { type: 'LoadBalancer', ports: HTTP }, ingress: [{ ip: LB.proxy, ipMode: 'Proxy' }] },
  { name: 'lb-mixed', spec: { type: 'LoadBalancer', ports: [...HTTP, { name: 'dns', port: 53, targetPort: 'dns', protocol: 'UDP' }] }, ingress: [{ ip: LB.mixed }] },
  { name: 'lb-no-nodeports', spec: { type: 'LoadBalancer', allocateLoadBalancerNodePorts: false, ports: HTTP }, ingress: [{ ip: LB.noNp }] },
  { name: 'lb-pending', spec: { type: 'LoadBalancer', ports: HTTP } },
  { name: 'ext', spec: { externalIPs: ['10.250.0.100'], ports: HTTP } },
  { name: 'ext-local', spec: { type: 'NodePort', externalIPs: ['10.250.0.101'], externalTrafficPolicy: 'Local', ports: HTTP } },
  { name: 'itp-local', spec: { internalTrafficPolicy: 'Local', ports: HTTP } },
  { name: 'itp-local-none', app: 'remote', spec: { internalTrafficPolicy: 'Local', ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'aff', spec: { sessionAffinity: 'ClientIP', ports: HTTP } },
  { name: 'aff-np', spec: { type: 'NodePort', sessionAffinity: 'ClientIP', sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } }, ports: HTTP } },
  { name: 'ds', spec: { ipFamilyPolicy: 'RequireDualStack', ports: HTTP } },
  { name: 'ds-np', spec: { type: 'NodePort', ipFamilyPolicy: 'RequireDualStack', ports: HTTP } },
  { name: 'v6', spec: { ipFamilies: ['IPv6'], ports: HTTP } },
  { name: 'v6-lb', spec: { type: 'LoadBalancer', ipFamilies: ['IPv6'], ports: HTTP }, ingress: [{ ip: LB.v6 }] },
  { name: 'term', app: 'term', spec: { ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'term-local', app: 'term', spec: { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'allterm', app: 'allterm', spec: { ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'notready', app: 'nr', spec: { ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'publish-notready', app: 'nr', spec: { publishNotReadyAddresses: true, ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'named', app: 'named', spec: { ports: [{ name: 'web', port: 80, targetPort: 'web' }] } },
  { name: 'no-endpoints', app: 'nothing', spec: { ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'lb-ranges-local', spec: { type: 'LoadBalancer', externalTrafficPolicy: 'Local', loadBalancerSourceRanges: ['10.250.0.2/32'], ports: HTTP }, ingress: [{ ip: LB.rangesLocal }] },
  { name: 'lb-aff', spec: { type: 'LoadBalancer', sessionAffinity: 'ClientIP', ports: HTTP }, ingress: [{ ip: LB.aff }] },
  { name: 'np-sctp', spec: { type: 'NodePort', ports: [{ name: 'sctp', port: 7777, targetPort: 7777, protocol: 'SCTP' }] } },
  { name: 'allterm-local', app: 'allterm', spec: { type: 'NodePort', externalTrafficPolicy: 'Local', ports: [{ port: 80, targetPort: 8080 }] } },
  { name: 'ext-v6', spec: { ipFamilies: ['IPv6'], externalIPs: ['fd00:10:250::100'], ports: HTTP } },
  { name: 'ds-lb-local', spec: { type: 'LoadBalancer', ipFamilyPolicy: 'RequireDualStack', externalTrafficPolicy: 'Local', ports: HTTP }, ingress: [{ ip: LB.dsLocal }, { ip: LB.dsLocal6 }] },
  { name: 'headless', spec: { clusterIP: 'None', ports: HTTP } },
  { name: 'extname', spec: { type: 'ExternalName', externalName: 'example.invalid', selector: undefined } },
];

/** Endpoints (all slices, all families) each selector Service should list: service → count. */
const WANT_ENDPOINTS: Record<string, number> = { cip: 3, ds: 6, term: 3, allterm: 2, notready: 2, named: 2, 'np-local-none': 2 };

let cp: ControlPlane;
let kubeProxyBin: string;
let baseline: Record<string, string>;
/** The captures, their differences and both logs, for reading after a run. */
const outDir = '/tmp/kip-parity';

beforeAll(async () => {
  kubeProxyBin = ensureTools(['kube-proxy'])['kube-proxy'];
  mkdirSync(outDir, { recursive: true });
  ({ cp, baseline } = await startCluster());
  await cp.api.ensureNamespace(NS);
  await Promise.all(PODS.map((p) => cp.api.createPod(NS, p.name, { node: p.node, ips: p.ips, labels: { app: p.app }, ports: p.ports ?? [{ containerPort: 8080 }], ready: p.ready ?? true })));
  await Promise.all(SERVICES.map(async (s) => {
    const svc = service(NS, s.name, { selector: { app: s.app ?? 'web' }, ...s.spec });
    if (svc.spec.type === 'ExternalName') delete svc.spec.ports;
    const stored = await cp.api.create(svc);
    if (s.ingress) await cp.api.patch(stored, { status: { loadBalancer: { ingress: s.ingress } } }, 'status');
  }));
  // Endpoints written, then the terminating Pods deleted with a grace period nobody ends.
  const endpoints = async (name: string) => {
    const l = await cp.api.list(`/apis/discovery.k8s.io/v1/namespaces/${NS}/endpointslices?labelSelector=kubernetes.io/service-name=${name}`);
    return l.items.flatMap((s: any) => s.endpoints ?? []);
  };
  await waitFor('every EndpointSlice', async () => {
    for (const [name, n] of Object.entries(WANT_ENDPOINTS)) if ((await endpoints(name)).length !== n) return false;
    return true;
  }, 60_000);
  await Promise.all(PODS.filter((p) => p.terminating).map((p) => cp.api.delete({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: NS, name: p.name } }, 600)));
  await waitFor('terminating endpoints', async () => (await endpoints('term')).filter((e: any) => e.conditions.terminating).length === 2
    && (await endpoints('allterm')).every((e: any) => e.conditions.terminating), 60_000);
}, 300_000);

afterAll(() => stopCluster(cp, baseline), 120_000);

/**
 * The flag sets both sides run with, in turn: the defaults, then the ones that change what is
 * programmed (masquerade everything, node ports on some addresses only, another scheduler, strict
 * ARP). Every documented divergence must occur under the first; under the others none may be missing
 * from the table, but a row may not occur (e.g. without node ports on IPv6 addresses).
 */
/**
 * With --nodeport-addresses, kube-proxy also serves node ports on the addresses it bound on
 * kube-ipvs0 that are in the CIDRs (the external and load-balancer IPs 10.250.0.100–209 here);
 * this daemon takes the node's addresses but kube-ipvs0's, as both do without the flag. kube-proxy
 * reads them at each sync, before it binds that sync's addresses: whether its settled table has
 * them depends on how many syncs it ran (optional rows).
 */
const NODE_PORTS_ON_SERVICE_IPS: Divergence[] = [
  { what: '--nodeport-addresses: no node ports on Service IPs bound on kube-ipvs0', section: 'ipvs', only: 'kube-proxy', line: /^-[Aa] (-t|-u|--sctp-service) 10\.250\.0\.[12]\d\d:3\d{4} /, optional: true },
  { what: '--nodeport-addresses: no node ports on Service IPs bound on kube-ipvs0 (SCTP set)', section: 'ipset', only: 'kube-proxy', line: /^add KUBE-NODE-PORT-SCTP-HASH 10\.250\.0\.[12]\d\d,sctp:3\d{4}$/, optional: true },
];
const FLAG_SETS = [
  { name: 'default flags', flags: [] as string[], rows: DIVERGENCES, allRows: true },
  { name: '--masquerade-all --nodeport-addresses=10.250.0.0/24 --ipvs-scheduler=wlc --ipvs-strict-arp', flags: ['--masquerade-all', '--nodeport-addresses=10.250.0.0/24', '--ipvs-scheduler=wlc', '--ipvs-strict-arp'], rows: [...DIVERGENCES, ...NODE_PORTS_ON_SERVICE_IPS], allRows: false },
];
const flagsOf = (extra: string[]) => [...COMMON_FLAGS(cp).filter((f) => !(extra.some((e) => e.startsWith('--ipvs-scheduler=')) && f.startsWith('--ipvs-scheduler='))), ...extra];

describe.each(FLAG_SETS)('kube-proxy v1.34 IPVS mode and this daemon on the same cluster, $name', ({ flags, rows, allRows }) => {
  const captures: { kubeProxy?: Capture; ours?: Capture } = {};
  const tag = allRows ? '' : '-variant';
  it('kube-proxy programs the kernel', async () => {
    const kp = new KubeProxy(kubeProxyBin);
    try {
      kp.start(['--proxy-mode=ipvs', ...flagsOf(flags), '--v=1']);
      await kp.synced();
      captures.kubeProxy = await settled();
    } finally {
      await stopProxy(kp, baseline);
      writeFileSync(join(outDir, `kube-proxy${tag}.log`), kp.log);
    }
    expectClean();
    expect(captures.kubeProxy.ipvs.length).toBeGreaterThan(30);
  }, 180_000);

  it('this daemon programs the kernel', async () => {
    const d = new Daemon(flagsOf(flags));
    try {
      d.start();
      await d.healthy();
      captures.ours = await settled();
    } finally {
      await stopProxy(d, baseline);
      writeFileSync(join(outDir, `ours${tag}.log`), d.log);
    }
    expectClean();
    expect(captures.ours.ipvs.length).toBeGreaterThan(30);
  }, 180_000);

  it('every difference is a documented divergence, and each of those occurs', () => {
    const kp = captures.kubeProxy!;
    const ours = captures.ours!;
    writeFileSync(join(outDir, `captures${tag}.json`), JSON.stringify({ kubeProxy: kp, ours }, null, 1));
    const { unexplained, used } = compare(kp, ours, rows);
    const unused = rows.filter((d) => allRows && !d.optional && !used.has(d)).map((d) => d.what);
    writeFileSync(join(outDir, `diff${tag}.txt`), unexplained.join('\n'));
    expect(unexplained, 'differences not in DIVERGENCES (docs/kube-proxy-parity.md)').toEqual([]);
    expect(unused, 'DIVERGENCES that no longer occur').toEqual([]);
  });

  it('the rules both sides write are in the same order in every chain', () => {
    expect(orderDifferences(captures.kubeProxy!, captures.ours!)).toEqual([]);
  });
});
