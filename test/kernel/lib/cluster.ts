// The real control plane (test/harness/control-plane.mjs) as kernel tests use it: the chart
// installed with real Helm, the daemon run with exactly its DaemonSet container's args, env and
// mounts under its ServiceAccount's token, and workloads (Services, Pods) written through the API.
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { ControlPlane, startControlPlane } from '../../harness/control-plane.mjs';
import { CLI, Daemon } from './daemon.js';

export { ControlPlane, startControlPlane };

const REPO = new URL('../../../', import.meta.url).pathname;
/** The chart's directory. */
export const CHART = join(REPO, 'charts/kube-ipvs-proxy');
/** Release name and namespace the tests install the chart as. */
export const RELEASE = { name: 'kip', namespace: 'kube-system' };
/** The chart's ServiceAccount as RBAC names it. */
export const SA_USER = `system:serviceaccount:${RELEASE.namespace}:kip-kube-ipvs-proxy`;

type Obj = Record<string, any>;

/** `helm install` (or upgrade --install) of the chart with `values`; returns the DaemonSet the server stored. */
export async function installChart(cp: ControlPlane, values: Obj, { upgrade = false } = {}): Promise<Obj> {
  const dir = mkdtempSync(join(tmpdir(), 'kip-values-'));
  try {
    writeFileSync(join(dir, 'values.json'), JSON.stringify(values));
    cp.helm([upgrade ? 'upgrade' : 'install', RELEASE.name, CHART, '--namespace', RELEASE.namespace, '-f', join(dir, 'values.json'), '--wait=false']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return cp.api.call('GET', `/apis/apps/v1/namespaces/${RELEASE.namespace}/daemonsets/${RELEASE.name}-kube-ipvs-proxy`);
}

/** Expands Kubernetes' `$(VAR)` references in a container arg. */
function expand(arg: string, env: Record<string, string>): string {
  return arg.replace(/\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name: string) => env[name] ?? m);
}

/**
 * The daemon as kubelet would run the DaemonSet's container on `node`: its args (with `$(VAR)`
 * expanded), its env (fieldRef spec.nodeName), its ConfigMap volumes at their mount paths and
 * the ServiceAccount token + CA at /var/run/secrets/kubernetes.io/serviceaccount, in a private
 * mount namespace (hostPath mounts are the node's own paths). writeToken() rewrites the
 * token file as kubelet does.
 */
export class ChartDaemon extends Daemon {
  readonly secrets = mkdtempSync(join(process.env.KIP_IN_UML === '1' ? '/run' : tmpdir(), 'kip-sa-'));
  private readonly configDirs: Array<{ src: string; mountPath: string }> = [];
  private readonly env: Record<string, string> = {};
  private readonly containerArgs: string[];

  constructor(cp: ControlPlane, ds: Obj, node: string, token: string) {
    super([]);
    const c = ds.spec.template.spec.containers[0];
    for (const e of c.env ?? []) {
      if (e.value !== undefined) this.env[e.name] = e.value;
      else if (e.valueFrom?.fieldRef?.fieldPath === 'spec.nodeName') this.env[e.name] = node;
      else throw new Error(`env ${e.name}: unsupported source ${JSON.stringify(e.valueFrom)}`);
    }
    this.containerArgs = (c.args ?? []).map((a: string) => expand(a, this.env));
    const volumes = new Map<string, Obj>((ds.spec.template.spec.volumes ?? []).map((v: Obj) => [v.name, v]));
    this.pending = (async () => {
      for (const m of c.volumeMounts ?? []) {
        const v = volumes.get(m.name)!;
        if (v.hostPath) continue; // the node's own path
        if (!v.configMap) throw new Error(`volume ${m.name}: unsupported`);
        const cm = await cp.api.call('GET', `/api/v1/namespaces/${ds.metadata.namespace}/configmaps/${v.configMap.name}`);
        const src = mkdtempSync(join(tmpdir(), 'kip-cm-'));
        for (const [k, text] of Object.entries(cm.data ?? {})) writeFileSync(join(src, k), String(text));
        this.configDirs.push({ src, mountPath: m.mountPath });
      }
    })();
    this.writeToken(token);
    writeFileSync(join(this.secrets, 'ca.crt'), cp.caPem());
    writeFileSync(join(this.secrets, 'namespace'), ds.metadata.namespace);
  }

  private readonly pending: Promise<void>;

  /** Rewrites the token file (kubelet's rotation: new contents, same path). */
  writeToken(token: string): void {
    writeFileSync(join(this.secrets, 'token.tmp'), token);
    // kubelet swaps a ..data symlink; a rename is the same atomic change for a reader.
    renameSync(join(this.secrets, 'token.tmp'), join(this.secrets, 'token'));
  }

  /** Starts the container's command once its ConfigMap volumes are read (await it). */
  override start(): Promise<void> {
    return this.pending.then(() => this.spawnContainer());
  }

  private spawnContainer(): void {
    const mounts = this.configDirs.map(({ src, mountPath }) => {
      const parent = mountPath.replace(/\/[^/]+\/?$/, '') || '/';
      if (parent === '/') throw new Error(`mount ${mountPath}: refusing a tmpfs over /`);
      return `mount -t tmpfs kip-cm ${parent} && mkdir -p ${mountPath} && cp -r ${src}/. ${mountPath}/`;
    });
    const script = [
      'set -e',
      ...mounts,
      'mkdir -p /run/secrets/kubernetes.io/serviceaccount',
      `mount --bind ${this.secrets} /run/secrets/kubernetes.io/serviceaccount`,
      'exec "$@"',
    ].join('; ');
    this.attach(spawn('unshare', ['--mount', '--propagation', 'private', '--', 'sh', '-c', script, 'sh', process.execPath, CLI, ...this.containerArgs], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env.PATH!, HOME: '/root', ...this.env },
    }));
  }

  remove(): void {
    for (const { src } of this.configDirs) rmSync(src, { recursive: true, force: true });
    rmSync(this.secrets, { recursive: true, force: true });
  }
}

/** The daemon's Prometheus metrics as name{labels} → value. */
export async function metrics(port = 10249): Promise<Map<string, number>> {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** The sum of every series of `name` whose labels contain each of `match` (`kind="x"`). */
export function sumMetric(m: Map<string, number>, name: string, ...match: string[]): number {
  let sum = 0;
  for (const [k, v] of m) if ((k === name || k.startsWith(`${name}{`)) && match.every((s) => k.includes(s))) sum += v;
  return sum;
}

/** A Service object. */
export function service(namespace: string, name: string, spec: Obj, metadata: Obj = {}): Obj {
  return { apiVersion: 'v1', kind: 'Service', metadata: { name, namespace, ...metadata }, spec: { selector: { app: name }, ports: [{ name: 'http', port: 80, targetPort: 8080 }], ...spec } };
}

/** Ensures a directory exists (for state written by tests). */
export function ensureDir(path: string): string {
  mkdirSync(path, { recursive: true });
  return path;
}
