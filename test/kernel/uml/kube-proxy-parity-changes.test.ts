// The differential test against kube-proxy v1.34 in IPVS mode under change: one control plane,
// a few Services and Pods with pinned addresses (cluster IPs, node ports, health-check node port,
// Pod IPs), and a scripted sequence of API changes (scale up and down, endpoints ready →
// terminating → gone, type changes ClusterIP → NodePort → LoadBalancer → eTP Local → ClusterIP,
// port changes, a Service created and one deleted). kube-proxy runs through the whole sequence in
// one namespace, then this daemon through the same sequence in a second one (the first one's
// Services deleted, the kernel cleaned), neither restarted between steps. After each step, once
// the proxy's last-sync metric has passed the step's time, the step's effect is in the kernel and
// the state has settled, the kernel is captured; the captures are compared step by step: every
// difference must be a documented divergence (docs/kube-proxy-parity.md).
import { appendFileSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ensureTools } from '../../tools/build.mjs';
import { ControlPlane, service } from '../lib/cluster.js';
import { Daemon, waitFor } from '../lib/daemon.js';
import { assertIsolated } from '../lib/guard.js';
import {
  COMMON_FLAGS, KubeProxy, NODE, NODE_IP, type Capture, type Divergence, compare, divergences, expectClean, orderDifferences, settled, sh,
  startCluster, stopCluster, stopProxy, syncedAfter,
} from '../lib/kube-proxy.js';

assertIsolated();

/** kube-proxy's run and ours, each in a namespace of its own (the namespace is in no kernel state). */
const NS = { kubeProxy: 'chg-kp', ours: 'chg-ours' };
/** The eTP Local load-balancer IP of `morph` (it always has a local endpoint). */
const LB_IP = '10.250.0.212';
const DIVERGENCES = divergences([]);
/** The rows of DIVERGENCES this sequence must show at some step (the others are optional here). */
const EXPECTED = new Set([
  'eTP Local external / load-balancer IP: internal clients DNATed to the cluster IP',
  'source ranges also enforced for node-originated connections, in mangle OUTPUT',
  'source ranges also enforced for node-originated connections, in mangle OUTPUT (IPv6)',
]);

type Obj = Record<string, any>;
const HTTP = [{ name: 'http', port: 80, targetPort: 'http' }];
const WEB_PORTS = [{ name: 'http', containerPort: 8080 }];
type PodSpec = { name: string; node: string; ips: string[]; app: string };
const POD: Record<string, PodSpec> = {
  'web-1': { name: 'web-1', node: NODE, ips: ['10.244.1.11', 'fd00:10:244:1::11'], app: 'web' },
  'web-2': { name: 'web-2', node: 'node-b', ips: ['10.244.2.12', 'fd00:10:244:2::12'], app: 'web' },
  'web-3': { name: 'web-3', node: 'node-c', ips: ['10.244.3.13', 'fd00:10:244:3::13'], app: 'web' },
  'web-4': { name: 'web-4', node: NODE, ips: ['10.244.1.14', 'fd00:10:244:1::14'], app: 'web' },
  'term-1': { name: 'term-1', node: NODE, ips: ['10.244.1.21'], app: 'term' },
  'term-2': { name: 'term-2', node: 'node-b', ips: ['10.244.2.22'], app: 'term' },
};
const INITIAL_PODS = ['web-1', 'web-2', 'term-1', 'term-2'];
/** Services by name: their app label and spec, every address pinned. */
const SVC: Record<string, { app: string; spec: Obj }> = {
  scale: { app: 'web', spec: { ipFamilyPolicy: 'RequireDualStack', clusterIP: '10.96.200.10', clusterIPs: ['10.96.200.10', 'fd00:10:96::2010'], ports: HTTP } },
  term: { app: 'term', spec: { clusterIP: '10.96.200.11', ports: [{ port: 80, targetPort: 8080 }] } },
  morph: { app: 'web', spec: { clusterIP: '10.96.200.12', ports: HTTP } },
  ports: { app: 'web', spec: { clusterIP: '10.96.200.13', ports: [{ name: 'a', port: 80, targetPort: 8080 }] } },
  doomed: { app: 'web', spec: { type: 'NodePort', clusterIP: '10.96.200.14', ports: [{ ...HTTP[0], nodePort: 30114 }] } },
  aff: { app: 'web', spec: { clusterIP: '10.96.200.15', ports: HTTP } },
  ext: { app: 'web', spec: { clusterIP: '10.96.200.16', externalIPs: ['10.250.0.116'], ports: HTTP } },
  late: { app: 'web', spec: { type: 'NodePort', clusterIP: '10.96.200.17', ports: [{ ...HTTP[0], nodePort: 30117 }] } },
};
const INITIAL_SVCS = ['scale', 'term', 'morph', 'ports', 'doomed', 'aff', 'ext'];

let cp: ControlPlane;

const podRef = (ns: string, name: string) => ({ apiVersion: 'v1', kind: 'Pod', metadata: { namespace: ns, name } });
const svcRef = (ns: string, name: string) => ({ apiVersion: 'v1', kind: 'Service', metadata: { namespace: ns, name } });
const createPod = (ns: string, name: string) => {
  const p = POD[name]!;
  return cp.api.createPod(ns, name, { node: p.node, ips: p.ips, labels: { app: p.app }, ports: WEB_PORTS });
};
/** Creates a Service; a pinned address still held by the other namespace's deleted copy is retried. */
async function createSvc(ns: string, name: string): Promise<void> {
  const { app, spec } = SVC[name]!;
  await waitFor(`Service ${ns}/${name} created`, async () => {
    try {
      await cp.api.create(service(ns, name, { selector: { app }, ...spec }));
      return true;
    } catch (e) {
      if (/already allocated|provided IP is already/i.test((e as Error).message)) return false;
      throw e;
    }
  }, 30_000);
}
const patchSvc = (ns: string, name: string, spec: Obj) => cp.api.patch(svcRef(ns, name), { spec });

/**
 * One change to the API objects, and what must be in the kernel once a proxy has it (so two stale
 * sides never compare equal). Each step's `has` and `lacks` include the effect of its last event
 * (the EndpointSlice controller's write, where there is one): a sync that shows it had every
 * earlier event too. `dual`: the step changes both IP families.
 */
type Step = { name: string; apply: (ns: string) => Promise<unknown>; has?: string[]; lacks?: string[]; dual?: boolean };
const STEPS: Step[] = [
  {
    name: 'scale up (a Pod on this node, one on another); an endpoint terminating (its Pod deleted with a grace period nobody ends)',
    apply: (ns) => Promise.all([createPod(ns, 'web-3'), createPod(ns, 'web-4'), cp.api.delete(podRef(ns, 'term-1'), 600)]),
    has: ['-a -t 10.96.200.10:80 -r 10.244.3.13:8080', '-a -t [fd00:10:96::2010]:80 -r [fd00:10:244:1::14]:8080', '-a -t 10.96.200.16:80 -r 10.244.1.14:8080'],
    lacks: ['-a -t 10.96.200.11:80 -r 10.244.1.21:8080'],
    dual: true,
  },
  {
    name: 'only terminating endpoints (both serving); ClusterIP → NodePort; a port and target port changed, a UDP port added; session affinity',
    apply: (ns) => Promise.all([
      cp.api.delete(podRef(ns, 'term-2'), 600),
      patchSvc(ns, 'morph', { type: 'NodePort', ports: [{ ...HTTP[0], nodePort: 30112 }] }),
      patchSvc(ns, 'ports', { ports: [{ name: 'a', port: 81, targetPort: 9090 }, { name: 'dns', port: 53, targetPort: 5353, protocol: 'UDP' }] }),
      patchSvc(ns, 'aff', { sessionAffinity: 'ClientIP' }),
    ]),
    has: [
      '-a -t 10.96.200.11:80 -r 10.244.1.21:8080', '-a -t 10.96.200.11:80 -r 10.244.2.22:8080', `-A -t ${NODE_IP}:30112 `,
      '-a -t 10.96.200.13:81 -r 10.244.1.11:9090', '-a -u 10.96.200.13:53 -r 10.244.1.14:5353', '-A -t 10.96.200.15:80 -s rr -p 10800',
    ],
    lacks: ['-A -t 10.96.200.13:80 '],
  },
  {
    name: 'the terminating endpoints gone; scale down; NodePort → LoadBalancer with an ingress IP; externalIPs changed; a Service created',
    apply: async (ns) => {
      await patchSvc(ns, 'morph', { type: 'LoadBalancer' });
      await Promise.all([
        ...['term-1', 'term-2', 'web-2', 'web-3'].map((p) => cp.api.delete(podRef(ns, p), 0)),
        cp.api.patch(svcRef(ns, 'morph'), { status: { loadBalancer: { ingress: [{ ip: LB_IP }] } } }, 'status'),
        patchSvc(ns, 'ext', { externalIPs: ['10.250.0.117'] }),
        createSvc(ns, 'late'),
      ]);
    },
    has: [`-A -t ${LB_IP}:80 `, '-A -t 10.250.0.117:80 ', `-a -t ${NODE_IP}:30117 -r 10.244.1.14:8080`],
    lacks: ['-r 10.244.2.22:8080', '-r 10.244.3.13:8080', '-r [fd00:10:244:2::12]:8080', '10.250.0.116:80'],
    dual: true,
  },
  {
    name: 'externalTrafficPolicy Local with a health-check node port, source ranges; an affinity timeout; an endpoint not ready',
    apply: (ns) => Promise.all([
      patchSvc(ns, 'morph', { externalTrafficPolicy: 'Local', healthCheckNodePort: 30212, loadBalancerSourceRanges: ['10.250.0.0/28'] }),
      patchSvc(ns, 'aff', { sessionAffinityConfig: { clientIP: { timeoutSeconds: 60 } } }),
      cp.api.setPodReady(ns, 'web-4', false, POD['web-4']!.ips),
    ]),
    has: ['-A -t 10.96.200.15:80 -s rr -p 60', ':30212'], lacks: ['-r 10.244.1.14:8080', '-r [fd00:10:244:1::14]:8080'], dual: true,
  },
  {
    name: 'LoadBalancer → ClusterIP (its ingress cleared); a Service deleted',
    apply: (ns) => Promise.all([
      patchSvc(ns, 'morph', {
        type: 'ClusterIP', externalTrafficPolicy: null, healthCheckNodePort: null, loadBalancerSourceRanges: null, allocateLoadBalancerNodePorts: null, ports: HTTP,
      }).then(() => cp.api.patch(svcRef(ns, 'morph'), { status: { loadBalancer: { ingress: null } } }, 'status')),
      cp.api.delete(svcRef(ns, 'doomed')),
    ]),
    lacks: [':30112', LB_IP, ':30212', ':30114'],
  },
];

/** The IPVS table and the listeners, as `has` and `lacks` look at them (cheaper than capture()). */
const seen = () => `${sh('ipvsadm', '-Sn')}\n${sh('ss', '-Hltn')}`;
/** What of the step's `has` and `lacks` the kernel does not show. */
function missing(step: Pick<Step, 'has' | 'lacks'>, text = seen()): string[] {
  return [...(step.has ?? []).filter((s) => !text.includes(s)).map((s) => `no ${s}`), ...(step.lacks ?? []).filter((s) => text.includes(s)).map((s) => `still ${s}`)];
}

/** The initial objects of `ns`, written and their EndpointSlices in place. */
async function initial(ns: string): Promise<void> {
  await cp.api.ensureNamespace(ns);
  await Promise.all(INITIAL_PODS.map((p) => createPod(ns, p)));
  await Promise.all(INITIAL_SVCS.map((s) => createSvc(ns, s)));
  await waitFor(`the EndpointSlices of ${ns}`, async () => {
    const l = await cp.api.list(`/apis/discovery.k8s.io/v1/namespaces/${ns}/endpointslices`);
    const n = (svc: string) => l.items.filter((s: Obj) => s.metadata.labels['kubernetes.io/service-name'] === svc).flatMap((s: Obj) => s.endpoints ?? []).length;
    return n('scale') === 4 && n('term') === 2 && INITIAL_SVCS.every((s) => n(s) > 0);
  }, 60_000);
}

/**
 * Runs the sequence in `ns` with a proxy already started: waits for its first sync, then after
 * each step for `synced(t, dual)` (a sync that ended after the step's time `t`, in both IP
 * families when `dual`, nothing queued since), for the step's effect (with `syncAfterSeen`, and
 * for a sync that ended after it showed), and for the state to settle. Adds the captures to `captures` (the initial state first); returns what a step's effect lacked.
 */
async function sequence(
  ns: string, captures: Capture[], budgetMs: number, synced: (after: number, dual: boolean) => Promise<void>, { syncAfterSeen = false } = {},
): Promise<string[]> {
  const misses: string[] = [];
  const t0 = Date.now();
  const note = (what: string) => appendFileSync(join(outDir, 'progress.txt'), `${ns} +${((Date.now() - t0) / 1000).toFixed(1)} s: ${what}\n`);
  const settle = async (name: string, step: Pick<Step, 'has' | 'lacks'>, first = false) => {
    let ok = false;
    let seenAt = 0;
    for (const deadline = Date.now() + 60_000; !ok && Date.now() < deadline; await new Promise((r) => setTimeout(r, 300))) {
      seenAt = Date.now();
      ok = missing(step).length === 0;
    }
    note(`${name}: ${ok ? 'seen' : 'not seen'}`);
    // kube-proxy writes IPVS first, then the ipsets and iptables, in a sync of seconds here: the
    // sync that wrote the effect ends after it shows (or the periodic one comes).
    if (syncAfterSeen && !first) await synced(seenAt, false);
    captures.push(await settled(1000, 60_000, (change) => note(`${name}: still moving: ${change.slice(0, 2000)}`)));
    note(`${name}: captured`);
    if (!ok) misses.push(`${name}: ${missing(step).join(', ')}`);
  };
  await synced(-1, true);
  await settle('initial', { has: ['-A -t 10.96.200.10:80 ', '-A -t [fd00:10:96::2010]:80 ', `-A -t ${NODE_IP}:30114 `] }, true);
  for (const step of STEPS) {
    // Past the test's timeout, stop: the next test must not see this run's changes.
    if (Date.now() - t0 > budgetMs) throw new Error(`${ns}: out of time before "${step.name}"`);
    const t = Date.now();
    await step.apply(ns);
    await synced(t, step.dual ?? false);
    note(`${step.name}: synced`);
    await settle(step.name, step);
  }
  return misses;
}

let kubeProxyBin: string;
let baseline: Record<string, string>;
const runs: { kubeProxy: Capture[]; ours: Capture[] } = { kubeProxy: [], ours: [] };
/** The captures, their differences and both logs, for reading after a run. */
const outDir = '/tmp/kip-parity-changes';

beforeAll(async () => {
  kubeProxyBin = ensureTools(['kube-proxy'])['kube-proxy'];
  rmSync(outDir, { recursive: true, force: true });
  mkdirSync(outDir, { recursive: true });
  ({ cp, baseline } = await startCluster());
}, 120_000);

afterAll(() => stopCluster(cp, baseline), 120_000);

describe('kube-proxy v1.34 IPVS mode and this daemon through the same changes', () => {
  it('kube-proxy follows the sequence', async () => {
    await initial(NS.kubeProxy);
    const kp = new KubeProxy(kubeProxyBin);
    let misses: string[] = [];
    try {
      kp.start(['--proxy-mode=ipvs', ...COMMON_FLAGS(cp), '--v=2']);
      // The first sync in both families takes kube-proxy a while in UML (all its sets created, one exec each).
      misses = await sequence(NS.kubeProxy, runs.kubeProxy, 480_000, (after, every) => kp.synced(after, { every, timeoutMs: after < 0 ? 150_000 : 60_000 }), { syncAfterSeen: true });
    } finally {
      await stopProxy(kp, baseline);
      writeFileSync(join(outDir, 'kube-proxy.log'), kp.log);
    }
    expectClean();
    expect(misses, 'steps whose effect kube-proxy did not program').toEqual([]);
  }, 540_000);

  it('this daemon follows the sequence', async () => {
    // kube-proxy's Services deleted: only this namespace's copies (same addresses) are left to program.
    await Promise.all(Object.keys(SVC).map((s) => cp.api.delete(svcRef(NS.kubeProxy, s))));
    await initial(NS.ours);
    const d = new Daemon([...COMMON_FLAGS(cp)]);
    let misses: string[] = [];
    try {
      d.start();
      await d.healthy();
      misses = await sequence(NS.ours, runs.ours, 260_000, (after) => waitFor('the daemon to sync', () => {
        if (d.exitCode() !== null) throw new Error(`daemon exited: ${d.log.slice(-4000)}`);
        return syncedAfter(after, false);
      }, 60_000).then(() => undefined));
    } finally {
      await stopProxy(d, baseline);
      writeFileSync(join(outDir, 'ours.log'), d.log);
    }
    expectClean();
    expect(misses, 'steps whose effect this daemon did not program').toEqual([]);
  }, 300_000);

  it('at every step, every difference is a documented divergence', () => {
    const { kubeProxy: kp, ours } = runs;
    const names = ['initial', ...STEPS.map((s) => s.name)];
    writeFileSync(join(outDir, 'captures.json'), JSON.stringify(names.map((name, i) => ({ name, kubeProxy: kp[i], ours: ours[i] })), null, 1));
    const unexplained: string[] = [];
    const used = new Set<Divergence>();
    names.slice(0, Math.min(kp.length, ours.length)).forEach((name, i) => {
      const r = compare(kp[i]!, ours[i]!, DIVERGENCES);
      for (const d of r.used) used.add(d);
      unexplained.push(...r.unexplained.map((l) => `${name}: ${l}`), ...orderDifferences(kp[i]!, ours[i]!).map((l) => `${name}: order: ${l}`));
    });
    writeFileSync(join(outDir, 'diff.txt'), unexplained.join('\n'));
    expect(ours.length, 'captures of this daemon (the initial one and one per step)').toBe(kp.length);
    expect(unexplained, 'differences not in DIVERGENCES (docs/kube-proxy-parity.md)').toEqual([]);
    expect([...used].map((d) => d.what).sort(), 'DIVERGENCES this sequence shows').toEqual([...EXPECTED].sort());
  });
});
