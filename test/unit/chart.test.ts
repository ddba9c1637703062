// The Helm chart, rendered by real Helm (`helm template`, test/chart/helm.ts) with
// several value sets: every object valid against the Kubernetes API schemas (no unknown
// fields), the security-relevant fields, exact RBAC, and the rendered KubeProxyConfiguration
// and container args accepted by the daemon's own parser through the pod's volume mounts.

import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { ServiceMonitor } from '@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1';
import { DaemonSet } from 'kubernetes-models/apps/v1';
import { ClusterRole, ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { ConfigMap, Service, ServiceAccount } from 'kubernetes-models/v1';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { parseArgs, parseKubeProxyConfiguration, type Config } from '../../src/config.js';
import { readBlockYaml, UNSUPPORTED } from '../../src/source/yaml-block.js';
import { buildRenderer, CHART_DIR, lint, parseManifests, render, ROOT, validateStrict, type Manifest } from '../chart/helm.js';
import { VALUE_SETS } from '../chart/value-sets.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Obj = any;

const MODELS: Record<string, { prototype: { validate(this: unknown): void } }> = {
  'v1/ServiceAccount': ServiceAccount,
  'v1/ConfigMap': ConfigMap,
  'v1/Service': Service,
  'apps/v1/DaemonSet': DaemonSet,
  'rbac.authorization.k8s.io/v1/ClusterRole': ClusterRole,
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': ClusterRoleBinding,
  'monitoring.coreos.com/v1/ServiceMonitor': ServiceMonitor,
};

/** The value sets the chart is rendered with; each must install. */

const NODE = 'worker-7';

let renderer: string;
const rendered = new Map<string, Manifest[]>();
let scratch: string;

beforeAll(() => {
  renderer = buildRenderer();
  for (const [name, values] of Object.entries(VALUE_SETS)) {
    const r = render(renderer, [values]);
    if (!r.ok) throw new Error(`rendering "${name}" failed:\n${r.stderr}`);
    rendered.set(name, parseManifests(r.stdout));
  }
  scratch = mkdtempSync(join(tmpdir(), 'kip-chart-'));
}, 180_000);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

function objects(set: string): Obj[] {
  return rendered.get(set)!.map((m) => m.obj);
}
function one(set: string, kind: string): Obj {
  const found = objects(set).filter((o) => o.kind === kind);
  expect(found, `${set}: one ${kind}`).toHaveLength(1);
  return found[0];
}
function container(set: string): Obj {
  const ds = one(set, 'DaemonSet');
  expect(ds.spec.template.spec.containers).toHaveLength(1);
  return ds.spec.template.spec.containers[0];
}

/** What the kubelet does with a container's args: $(VAR) from the container's env (fieldRef spec.nodeName = the node). */
function expandArgs(c: Obj): string[] {
  const env = new Map<string, string>();
  for (const e of c.env ?? []) {
    if (e.value !== undefined) env.set(e.name, e.value);
    else if (e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName') env.set(e.name, NODE);
  }
  return (c.args ?? []).map((a: string) => a.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, v: string) => env.get(v) ?? m));
}

/** Writes the pod's ConfigMap volumes under a fake root, as mounted; returns a reader for parseArgs. */
function mountConfigMaps(set: string): (path: string) => string {
  const root = join(scratch, set.replace(/\W+/g, '-'));
  const ds = one(set, 'DaemonSet');
  const spec = ds.spec.template.spec;
  for (const m of container(set).volumeMounts) {
    const vol = spec.volumes.find((v: Obj) => v.name === m.name);
    if (!vol?.configMap) continue;
    const cm = objects(set).find((o) => o.kind === 'ConfigMap' && o.metadata.name === vol.configMap.name);
    expect(cm, `ConfigMap ${vol.configMap.name} for volume ${m.name}`).toBeDefined();
    for (const [key, text] of Object.entries(cm.data as Record<string, string>)) {
      const file = join(root, m.mountPath, key);
      mkdirSync(dirname(file), { recursive: true });
      writeFileSync(file, text);
    }
  }
  return (path) => readFileSync(join(root, path), 'utf8');
}

/** The daemon's Config for a rendered value set, parsed from the container's args and mounted config file. */
function daemonConfig(set: string): { config: Config; warnings: string[] } {
  const parsed = parseArgs(expandArgs(container(set)), { readFile: mountConfigMaps(set) });
  expect(parsed.command).toBe('run');
  return { config: parsed.config, warnings: parsed.warnings };
}

function rbacTriples(rules: Obj[]): string[] {
  const out: string[] = [];
  for (const r of rules) {
    for (const g of r.apiGroups) for (const res of r.resources) for (const v of r.verbs) out.push(`${g || 'core'}/${res}:${v}`);
  }
  return out.sort();
}

describe.each(Object.keys(VALUE_SETS))('chart rendered with %s values', (set) => {
  it('renders only objects of known kinds, each valid against its Kubernetes schema with no unknown field', () => {
    const manifests = rendered.get(set)!;
    expect(manifests.length).toBeGreaterThanOrEqual(3);
    for (const { source, obj } of manifests) {
      const model = MODELS[`${obj.apiVersion}/${obj.kind}`];
      expect(model, `${source}: ${obj.apiVersion} ${obj.kind} has a schema`).toBeDefined();
      expect(validateStrict(model!, obj), `${source}: ${obj.kind} ${obj.metadata?.name}`).toEqual([]);
      expect(obj.metadata.name).toMatch(/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/);
    }
  });

  it('runs on every node in the host network namespace, with the config and --hostname-override from the downward API', () => {
    const ds = one(set, 'DaemonSet');
    const pod = ds.spec.template.spec;
    expect(pod.hostNetwork).toBe(true);
    expect(pod.hostPID).toBeUndefined();
    expect(pod.hostIPC).toBeUndefined();
    expect(pod.dnsPolicy).toBe('Default');
    expect(pod.priorityClassName).toBe('system-node-critical');
    expect(ds.spec.updateStrategy.type).toBe('RollingUpdate');
    expect(ds.spec.template.metadata.labels).toMatchObject(ds.spec.selector.matchLabels);
    const c = container(set);
    expect(c.args.slice(0, 2)).toEqual(['--config=/var/lib/kube-ipvs-proxy/config.conf', '--hostname-override=$(NODE_NAME)']);
    expect(c.env.find((e: Obj) => e.name === 'NODE_NAME')).toEqual({ name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } });
    expect(c.command).toBeUndefined(); // the image's ENTRYPOINT (node /app/dist/bin/cli.js) runs
  });

  it('mounts /lib/modules read-only, /run/xtables.lock (FileOrCreate) and the state directory /run/kube-ipvs-proxy (DirectoryOrCreate, so the next pod of a rollout finds what the last one left), and no other host path', () => {
    const pod = one(set, 'DaemonSet').spec.template.spec;
    const hostPaths = pod.volumes.filter((v: Obj) => v.hostPath);
    expect(hostPaths.map((v: Obj) => v.hostPath)).toEqual([
      { path: '/lib/modules' },
      { path: '/run/xtables.lock', type: 'FileOrCreate' },
      { path: '/run/kube-ipvs-proxy', type: 'DirectoryOrCreate' },
    ]);
    const mounts = new Map(container(set).volumeMounts.map((m: Obj) => [m.name, m]));
    const byPath = (p: string) => hostPaths.find((v: Obj) => v.hostPath.path === p).name;
    expect(mounts.get(byPath('/lib/modules'))).toMatchObject({ mountPath: '/lib/modules', readOnly: true });
    expect(mounts.get(byPath('/run/xtables.lock'))).toMatchObject({ mountPath: '/run/xtables.lock' });
    expect(mounts.get(byPath('/run/kube-ipvs-proxy'))).toMatchObject({ mountPath: '/run/kube-ipvs-proxy' });
    for (const m of mounts.values() as Iterable<Obj>) {
      if (m.mountPath !== '/run/xtables.lock' && m.mountPath !== '/run/kube-ipvs-proxy') expect(m.readOnly, m.mountPath).toBe(true);
    }
  });

  it('probes /livez (liveness) and /healthz (readiness) on the port the health server binds', () => {
    const c = container(set);
    const { config } = daemonConfig(set);
    const health = config.healthzBindAddress!;
    const port = c.ports.find((p: Obj) => p.name === c.livenessProbe.httpGet.port);
    expect(port.containerPort).toBe(health.port);
    expect(c.livenessProbe.httpGet).toMatchObject({ path: '/livez', port: 'healthz' });
    expect(c.readinessProbe.httpGet).toMatchObject({ path: '/healthz', port: 'healthz' });
    // The kubelet probes the pod IP (= the node IP) unless the server only listens on loopback.
    const loopback = health.host === '::1' || health.host.startsWith('127.');
    expect(c.livenessProbe.httpGet.host).toBe(loopback ? health.host : undefined);
    expect(c.readinessProbe.httpGet.host).toBe(loopback ? health.host : undefined);
    expect(c.ports.find((p: Obj) => p.name === 'metrics').containerPort).toBe(config.metricsBindAddress!.port);
  });

  it('renders a KubeProxyConfiguration that the daemon parser accepts with no warning, and container args parseArgs accepts', () => {
    const cm = one(set, 'ConfigMap');
    const text = cm.data['config.conf'];
    expect(parseYaml(text)).toMatchObject({ apiVersion: 'kubeproxy.config.k8s.io/v1alpha1', kind: 'KubeProxyConfiguration' });
    expect(parseKubeProxyConfiguration(text, 'configmap').warnings).toEqual([]);
    // Block YAML throughout: the daemon reads it without loading js-yaml (yaml.ts).
    expect(readBlockYaml(text, new Map()), text).not.toBe(UNSUPPORTED);
    const { config, warnings } = daemonConfig(set);
    expect(warnings).toEqual([]);
    expect(config.configFile).toBe('/var/lib/kube-ipvs-proxy/config.conf');
    expect(config.hostnameOverride).toBe(NODE);
    // The pod template carries the config's hash, so that a new config rolls the pods.
    const ann = one(set, 'DaemonSet').spec.template.metadata.annotations['checksum/config'];
    expect(ann).toMatch(/^[0-9a-f]{64}$/);
  });

  it('binds a service account to a ClusterRole with exactly the verbs the proxy needs', () => {
    const ds = one(set, 'DaemonSet');
    const sa = ds.spec.template.spec.serviceAccountName;
    const rbac = (VALUE_SETS[set] as Obj).rbac?.create !== false;
    const kinds = objects(set).map((o) => o.kind);
    expect(kinds.includes('ClusterRole')).toBe(rbac);
    expect(kinds.includes('ClusterRoleBinding')).toBe(rbac);
    const createSa = (VALUE_SETS[set] as Obj).serviceAccount?.create !== false;
    if (createSa) expect(one(set, 'ServiceAccount').metadata).toMatchObject({ name: sa, namespace: 'kube-system' });
    else expect(kinds).not.toContain('ServiceAccount');
    if (!rbac) return;
    const role = one(set, 'ClusterRole');
    const events = (VALUE_SETS[set] as Obj).events?.enabled !== false;
    expect(rbacTriples(role.rules)).toEqual([
      'core/nodes:list', 'core/nodes:watch',
      'core/services:list', 'core/services:watch',
      'discovery.k8s.io/endpointslices:list', 'discovery.k8s.io/endpointslices:watch',
      ...(events ? ['events.k8s.io/events:create', 'events.k8s.io/events:patch'] : []),
    ]);
    expect(daemonConfig(set).config.events).toBe(events);
    for (const r of role.rules) {
      expect(r.resourceNames).toBeUndefined();
      expect(r.verbs).not.toContain('*');
    }
    const binding = one(set, 'ClusterRoleBinding');
    expect(binding.roleRef).toEqual({ apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: role.metadata.name });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: sa, namespace: 'kube-system' }]);
  });

  it('puts namespaced objects in the release namespace and labels everything', () => {
    for (const o of objects(set)) {
      if (o.kind === 'ClusterRole' || o.kind === 'ClusterRoleBinding') expect(o.metadata.namespace).toBeUndefined();
      else if (o.kind === 'ServiceMonitor') expect(o.metadata.namespace).toBe((VALUE_SETS[set] as Obj).serviceMonitor.namespace || 'kube-system');
      else expect(o.metadata.namespace, o.kind).toBe('kube-system');
      expect(o.metadata.labels).toMatchObject({ 'app.kubernetes.io/managed-by': 'Helm', 'app.kubernetes.io/instance': 'kube-ipvs-proxy' });
    }
  });
});

describe('chart RBAC against the source', () => {
  it('grants list and watch on every API path the daemon\'s informers use', () => {
    const walk = (d: string): string[] => readdirSync(join(ROOT, d), { withFileTypes: true })
      .flatMap((e) => (e.isDirectory() ? walk(join(d, e.name)) : e.name.endsWith('.ts') ? [join(d, e.name)] : []));
    const used = new Set<string>();
    for (const f of walk('src')) {
      for (const m of readFileSync(join(ROOT, f), 'utf8').matchAll(/'\/(?:api\/v1|apis\/([a-z0-9.-]+)\/v1)\/([a-z]+)'/g)) used.add(`${m[1] ?? 'core'}/${m[2]}`);
    }
    expect([...used].sort()).toEqual(['core/nodes', 'core/services', 'discovery.k8s.io/endpointslices']);
    const granted = rbacTriples(one('default', 'ClusterRole').rules);
    for (const r of used) for (const v of ['list', 'watch']) expect(granted).toContain(`${r}:${v}`);
  });

  it('grants create and patch on events.k8s.io Events, the only API the Event recorder writes', () => {
    const recorder = readFileSync(join(ROOT, 'src/source/events.ts'), 'utf8');
    expect([...recorder.matchAll(/`\/apis\/([a-z0-9.-]+)\/v1\/namespaces\/\$\{[^}]+\}\/([a-z]+)`/g)].map((m) => `${m[1]}/${m[2]}`)).toEqual(['events.k8s.io/events']);
    expect([...recorder.matchAll(/request\('([A-Z]+)'/g)].map((m) => m[1]).sort()).toEqual(['PATCH', 'POST']);
    const granted = rbacTriples(one('default', 'ClusterRole').rules).filter((t) => t.includes('events'));
    expect(granted).toEqual(['events.k8s.io/events:create', 'events.k8s.io/events:patch']);
  });
});

describe('chart security context', () => {
  it('is privileged by default (the IPVS sysctls need a writable /proc/sys) with NET_ADMIN, NET_RAW and SYS_MODULE', () => {
    expect(container('default').securityContext).toEqual({ privileged: true, capabilities: { add: ['NET_ADMIN', 'NET_RAW', 'SYS_MODULE'] } });
  });

  it('privileged: false keeps the capabilities and drops privileged', () => {
    expect(container('unprivileged').securityContext).toEqual({ privileged: false, capabilities: { add: ['NET_ADMIN', 'NET_RAW', 'SYS_MODULE'] } });
  });

  it('loadKernelModules: false drops SYS_MODULE; extraCapabilities are added', () => {
    expect(container('unprivileged without module loading').securityContext.capabilities.add).toEqual(['NET_ADMIN', 'NET_RAW', 'SYS_RESOURCE']);
  });

  it('tolerates every taint by default, as kube-proxy', () => {
    expect(one('default', 'DaemonSet').spec.template.spec.tolerations).toEqual([{ operator: 'Exists' }]);
  });
});

describe('chart values reach the daemon', () => {
  it('defaults: ipvs, rr, 30s/1s, health on 0.0.0.0:10256, metrics on 127.0.0.1:10249, no ServiceMonitor', () => {
    const { config } = daemonConfig('default');
    expect(config).toMatchObject({
      mode: 'ipvs', syncPeriodMs: 30_000, minSyncPeriodMs: 1_000, masqueradeAll: false, masqueradeBit: 14,
      clusterCIDRs: [], nodePortAddresses: [],
      healthzBindAddress: { host: '0.0.0.0', port: 10256 }, metricsBindAddress: { host: '127.0.0.1', port: 10249 },
      ipvs: { scheduler: 'rr', strictARP: false, addressBinding: 'route', excludeCIDRs: [], tcpTimeoutMs: 0, tcpFinTimeoutMs: 0, udpTimeoutMs: 0 },
      log: { format: 'text', verbosity: 0 },
    });
    expect(config.kubeconfig).toBeUndefined();
    const kinds = objects('default').map((o) => o.kind);
    expect(kinds).toEqual(['ServiceAccount', 'ConfigMap', 'ClusterRole', 'ClusterRoleBinding', 'DaemonSet']); // Helm's install order
    expect(one('default', 'DaemonSet').spec.updateStrategy.rollingUpdate).toEqual({ maxUnavailable: 1 });
    expect(container('default').image).toBe(`ghcr.io/kube-ipvs-proxy/kube-ipvs-proxy:${JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version}`);
    expect(container('default').resources.requests).toBeDefined();
  });

  it('iptables mode: mode, sync periods, masquerading and a dual-stack cluster CIDR', () => {
    expect(daemonConfig('iptables mode').config).toMatchObject({
      mode: 'iptables', syncPeriodMs: 60_000, minSyncPeriodMs: 5_000, masqueradeAll: true, masqueradeBit: 12,
      clusterCIDRs: ['10.244.0.0/16', 'fd00:10:244::/56'],
    });
  });

  it('custom scheduler, strict ARP, address binding, exclude CIDRs, IPVS timeouts, NodePort addresses, logging', () => {
    expect(daemonConfig('custom scheduler').config).toMatchObject({
      ipvs: { scheduler: 'mh', strictARP: true, addressBinding: 'address', excludeCIDRs: ['10.0.0.0/8', 'fd00::/64'], tcpTimeoutMs: 900_000, tcpFinTimeoutMs: 120_000, udpTimeoutMs: 300_000 },
      nodePortAddresses: ['192.168.0.0/16'], log: { format: 'json', verbosity: 2 },
    });
  });

  it('ServiceMonitor on: metrics bind 0.0.0.0, a headless metrics Service, and a ServiceMonitor that selects it', () => {
    expect(daemonConfig('ServiceMonitor on').config.metricsBindAddress).toEqual({ host: '0.0.0.0', port: 10249 });
    const svc = one('ServiceMonitor on', 'Service');
    const sm = one('ServiceMonitor on', 'ServiceMonitor');
    const pod = one('ServiceMonitor on', 'DaemonSet').spec.template;
    expect(svc.spec.clusterIP).toBe('None');
    expect(svc.spec.ports).toEqual([{ name: 'metrics', port: 10249, targetPort: 'metrics', protocol: 'TCP' }]);
    expect(pod.metadata.labels).toMatchObject(svc.spec.selector);
    expect(svc.metadata.labels).toMatchObject(sm.spec.selector.matchLabels);
    expect(sm.metadata.labels).toMatchObject({ release: 'prometheus' });
    expect(sm.spec.namespaceSelector).toEqual({ matchNames: ['kube-system'] });
    expect(sm.spec.endpoints).toEqual([{
      port: 'metrics', path: '/metrics', scheme: 'http', interval: '30s', scrapeTimeout: '10s',
      relabelings: [{ sourceLabels: ['__meta_kubernetes_pod_node_name'], targetLabel: 'node' }],
      metricRelabelings: [{ action: 'drop', regex: 'go_.*', sourceLabels: ['__name__'] }],
    }]);
  });

  it('service stats: metrics.serviceStats becomes the daemon\'s opt-in per-Service traffic metrics', () => {
    expect(daemonConfig('service stats').config.serviceStats).toEqual({ enabled: true, maxServices: 200, periodMs: 30_000 });
    expect(daemonConfig('default').config.serviceStats.enabled).toBe(false);
  });

  it('everything: image, API server env, IPv6 loopback health server, extra args override the file, scheduling knobs', () => {
    const set = 'everything';
    const { config } = daemonConfig(set);
    expect(config.healthzBindAddress).toEqual({ host: '::1', port: 20256 });
    expect(config.metricsBindAddress).toEqual({ host: '::', port: 20249 });
    expect(config.gracefulTerminationTimeoutMs).toBe(300_000);
    expect(config.log.verbosity).toBe(3);
    const c = container(set);
    expect(c.image).toBe('registry.example/kip:1.2.3');
    expect(c.imagePullPolicy).toBe('Always');
    expect(c.env).toEqual(expect.arrayContaining([
      { name: 'KUBERNETES_SERVICE_HOST', value: '192.0.2.10' }, { name: 'KUBERNETES_SERVICE_PORT', value: '6443' },
      { name: 'UV_THREADPOOL_SIZE', value: '8' },
    ]));
    const ds = one(set, 'DaemonSet');
    const pod = ds.spec.template.spec;
    expect(ds.metadata.name).toBe('kip');
    expect(ds.spec.updateStrategy.rollingUpdate).toEqual({ maxUnavailable: '10%' });
    expect(pod.serviceAccountName).toBe('existing-sa');
    expect(pod.imagePullSecrets).toEqual([{ name: 'regcred' }]);
    // Helm merges maps: the user's nodeSelector adds to the default one (null would remove it).
    expect(pod.nodeSelector).toEqual({ 'kubernetes.io/os': 'linux', 'node-role.kubernetes.io/worker': '' });
    expect(pod.tolerations).toEqual([{ key: 'dedicated', operator: 'Equal', value: 'edge', effect: 'NoSchedule' }]);
    expect(pod.affinity.nodeAffinity).toBeDefined();
    expect(ds.spec.template.metadata.annotations).toMatchObject({ 'example.com/team': 'net' });
    expect(ds.spec.template.metadata.labels).toMatchObject({ tier: 'node' });
    expect(c.resources).toEqual({ requests: { cpu: '50m', memory: '128Mi' }, limits: { cpu: 1, memory: '1Gi' } });
    expect(c.livenessProbe).toMatchObject({ initialDelaySeconds: 30, periodSeconds: 20, timeoutSeconds: 2, failureThreshold: 3 });
    const sm = one(set, 'ServiceMonitor');
    expect(sm.metadata.namespace).toBe('monitoring');
    expect(sm.spec.namespaceSelector).toEqual({ matchNames: ['kube-system'] });
    expect(sm.spec.endpoints[0].scrapeTimeout).toBeUndefined();
  });

  it('a changed config changes the pod template (checksum), an unrelated value does not', () => {
    const sum = (set: string) => one(set, 'DaemonSet').spec.template.metadata.annotations['checksum/config'];
    expect(sum('custom scheduler')).not.toBe(sum('default'));
    expect(sum('unprivileged')).toBe(sum('default'));
  });
});

describe('chart failures at install time', () => {
  it('ServiceMonitor with metrics bound to loopback fails with a clear message', () => {
    const r = render(renderer, [{ serviceMonitor: { enabled: true }, metrics: { bindAddress: '127.0.0.1' } }]);
    expect(r.ok).toBe(false);
    expect(r.stderr).toMatch(/^Error: execution error at \(kube-ipvs-proxy\/templates\/\S+:\d+:\d+\): serviceMonitor\.enabled: Prometheus cannot scrape metrics bound to 127\.0\.0\.1/m);
  });

  it('refuses Kubernetes older than 1.21 (EndpointSlice discovery.k8s.io/v1)', () => {
    const r = render(renderer, [], { kubeVersion: 'v1.20.15' });
    expect(r.ok).toBe(false);
    expect(r.stderr).toContain('chart requires kubeVersion: >=1.21.0-0 which is incompatible with Kubernetes v1.20.15');
  });

  it('minSyncPeriod above syncPeriod passes the schema but the daemon refuses it at start, naming the field', () => {
    const r = render(renderer, [{ syncPeriod: '10s', minSyncPeriod: '1m' }]);
    expect(r.ok).toBe(true);
    const cm = parseManifests(r.stdout).find((m) => m.obj.kind === 'ConfigMap')!.obj;
    expect(() => parseArgs(['--config=/c'], { readFile: () => cm.data['config.conf'] })).toThrow(/minSyncPeriod: 1m must not exceed the sync period \(10s\)/);
  });
});

describe('helm lint', () => {
  it('passes for every value set the tests use', () => {
    for (const [name, values] of Object.entries(VALUE_SETS)) {
      const r = lint(renderer, [values]);
      expect(r.ok, `${name}: ${r.stdout}${r.stderr}`).toBe(true);
    }
  });
});

describe('chart metadata', () => {
  it('Chart.yaml: apiVersion v2, appVersion = package.json version', () => {
    const chart = parseYaml(readFileSync(join(CHART_DIR, 'Chart.yaml'), 'utf8'));
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    expect(chart).toMatchObject({ apiVersion: 'v2', name: 'kube-ipvs-proxy', type: 'application', appVersion: pkg.version });
    expect(chart.version).toMatch(/^\d+\.\d+\.\d+$/);
  });

  it('the chart README documents every value of values.yaml', () => {
    const readme = readFileSync(join(CHART_DIR, 'README.md'), 'utf8');
    const leaves: string[] = [];
    const walk = (v: unknown, path: string): void => {
      if (v !== null && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length > 0 && !['resources', 'nodeSelector', 'livenessProbe', 'readinessProbe'].includes(path)) {
        for (const [k, x] of Object.entries(v)) walk(x, path === '' ? k : `${path}.${k}`);
      } else {
        leaves.push(path);
      }
    };
    walk(parseYaml(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')), '');
    const missing = leaves.filter((p) => !readme.includes(`| \`${p}\` |`));
    expect(missing).toEqual([]);
  });
});
