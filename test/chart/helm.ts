// Test helpers for the Helm chart: real Helm (built from its pinned Go module by
// test/tools/build.mjs) renders the chart with value overrides; parse the output, and check
// objects against the Kubernetes schemas.

import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

// @ts-expect-error: a plain ES module of the test harness, without types
import { ensureTools } from '../tools/build.mjs';

/** The repository root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The chart's directory. */
export const CHART_DIR = join(ROOT, 'charts/kube-ipvs-proxy');

/** The Kubernetes version the tests run against (test/tools/k8s/go.mod). */
export const TESTED_KUBE_VERSION = 'v1.34.4';

/** The helm binary (built on first use). */
export function buildRenderer(): string {
  return (ensureTools(['helm']) as Record<string, string>).helm!;
}

/** Options of {@link render}. */
export interface RenderOptions {
  name?: string;
  namespace?: string;
  apiVersions?: string[];
  kubeVersion?: string;
}

/** What the renderer said: exit code and output. */
export interface RenderResult {
  ok: boolean;
  stdout: string;
  stderr: string;
}

/**
 * Renders a chart (default: ours) with value overrides (each object is one -f file, later wins):
 * `helm template` for the tested Kubernetes version unless told another. NOTES.txt is rendered
 * only by an install (test/kernel/netns/chart-install.test.ts: Helm 3 contacts the cluster even
 * for `install --dry-run=client`).
 */
export function render(helm: string, values: object[] = [], opts: RenderOptions = {}, chartDir = CHART_DIR): RenderResult {
  // Helm's client-only default is Kubernetes 1.20, which the chart refuses: render for the tested one.
  const args = ['template', opts.name ?? 'kube-ipvs-proxy', chartDir, '--namespace', opts.namespace ?? 'kube-system', '--kube-version', opts.kubeVersion ?? TESTED_KUBE_VERSION];
  for (const a of opts.apiVersions ?? []) args.push('--api-versions', a);
  return helmWithValues(helm, args, values);
}

/** Runs helm with each value object as one -f file (JSON is YAML), in a scratch HELM_*_HOME. */
function helmWithValues(helm: string, args: string[], values: object[]): RenderResult {
  const dir = mkdtempSync(join(tmpdir(), 'kip-values-'));
  try {
    const all = [...args];
    values.forEach((v, i) => {
      const file = join(dir, `values-${i}.yaml`);
      writeFileSync(file, JSON.stringify(v));
      all.push('-f', file);
    });
    const env = { ...process.env, HELM_CACHE_HOME: join(dir, 'cache'), HELM_CONFIG_HOME: join(dir, 'config'), HELM_DATA_HOME: join(dir, 'data') };
    const r = spawnSync(helm, all, { encoding: 'utf8', timeout: 60_000, env });
    return { ok: r.status === 0, stdout: r.stdout ?? '', stderr: (r.stderr ?? '') + (r.error?.message ?? '') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** `helm lint --strict` of a chart (default: ours) with value overrides. */
export function lint(helm: string, values: object[] = [], chartDir = CHART_DIR): RenderResult {
  return helmWithValues(helm, ['lint', '--strict', chartDir, '--kube-version', TESTED_KUBE_VERSION], values);
}

/** One rendered Kubernetes object and the template it came from. */
export interface Manifest {
  source: string;
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  obj: any;
}

/** Parses `helm template` output: "---\n# Source: path\n<doc>" blocks; throws on invalid YAML. */
export function parseManifests(stream: string): Manifest[] {
  const out: Manifest[] = [];
  for (const block of stream.split(/^---$/m)) {
    if (block.trim() === '') continue;
    const source = /^# Source: (\S+)$/m.exec(block)?.[1] ?? '';
    for (const doc of parseAllDocuments(block)) {
      if (doc.errors.length > 0) throw new Error(`invalid YAML in ${source}: ${doc.errors[0]!.message}`);
      const obj = doc.toJS();
      if (obj !== null && obj !== undefined) out.push({ source, obj });
    }
  }
  return out;
}

/** A kubernetes-models class: its prototype's validate() runs the compiled OpenAPI validator on `this`. */
interface ModelClass {
  prototype: { validate(this: unknown): void };
}

/**
 * Validates obj with a kubernetes-models class, and also refuses unknown fields, as the
 * API server's strict field validation (and Helm's client-side validation) do: the compiled
 * validators read every property the schema knows, so the object is validated through
 * proxies that record which keys were read; a key never read of an object whose keys were
 * never enumerated (maps like labels are enumerated) is unknown. Returns the problems.
 */
export function validateStrict(model: ModelClass, obj: unknown): string[] {
  const tracked: Array<{ path: string; target: Record<string, unknown>; read: Set<string>; listed: { v: boolean } }> = [];
  const proxies = new WeakMap<object, unknown>(); // one proxy (and record) per object, however often it is read
  const wrap = (value: unknown, path: string): unknown => {
    if (value === null || typeof value !== 'object') return value;
    if (!proxies.has(value)) proxies.set(value, makeProxy(value, path));
    return proxies.get(value);
  };
  const makeProxy = (value: object, path: string): unknown => {
    if (Array.isArray(value)) {
      return new Proxy(value, {
        get: (t, k, r) => (typeof k === 'string' && /^\d+$/.test(k) ? wrap(t[Number(k)], `${path}[${k}]`) : Reflect.get(t, k, r)),
      });
    }
    const entry = { path, target: value as Record<string, unknown>, read: new Set<string>(), listed: { v: false } };
    tracked.push(entry);
    return new Proxy(value, {
      get: (t, k, r) => {
        if (typeof k !== 'string') return Reflect.get(t, k, r);
        entry.read.add(k);
        return wrap((t as Record<string, unknown>)[k], path === '' ? k : `${path}.${k}`);
      },
      ownKeys: (t) => {
        entry.listed.v = true;
        return Reflect.ownKeys(t);
      },
    });
  };
  const problems: string[] = [];
  try {
    model.prototype.validate.call(wrap(obj, ''));
  } catch (e) {
    problems.push((e as Error).message);
  }
  for (const { path, target, read, listed } of tracked) {
    if (listed.v) continue;
    for (const k of Object.keys(target)) {
      if (!read.has(k)) problems.push(`${path === '' ? '' : `${path}.`}${k}: unknown field`);
    }
  }
  return problems;
}
