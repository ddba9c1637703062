// Test helpers for the Helm chart: build test/chart/render.go (a `helm template` stand-in on
// Go's text/template + sprig, from Debian's golang-* packages, offline), render the chart
// with value overrides, parse the output, and check objects against the Kubernetes schemas.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';

/** The repository root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
/** The chart's directory. */
export const CHART_DIR = join(ROOT, 'charts/kube-ipvs-proxy');
const RENDER_GO = join(ROOT, 'test/chart/render.go');

/** Where Debian's golang-*-dev packages put their sources (GOPATH layout). */
const DEBIAN_GOPATH = '/usr/share/gocode';

const GO_PACKAGES = 'golang-go golang-github-masterminds-sprig-dev golang-github-ghodss-yaml-dev golang-github-xeipuuv-gojsonschema-dev';

/** The environment for an offline GOPATH-mode build against Debian's Go sources. */
function goEnv(cacheDir: string): NodeJS.ProcessEnv {
  return {
    ...process.env,
    GO111MODULE: 'off',
    GOPATH: DEBIAN_GOPATH,
    GOCACHE: cacheDir,
    GOFLAGS: '',
    GOPROXY: 'off',
    GOTOOLCHAIN: 'local',
    CGO_ENABLED: '0',
  };
}

/**
 * Builds the renderer once per source hash (and Go version) into a cache under the system
 * temp directory; returns the binary's path. Throws naming the Debian packages when Go or a
 * library is missing.
 */
export function buildRenderer(): string {
  const version = spawnSync('go', ['version'], { encoding: 'utf8' });
  if (version.error || version.status !== 0) {
    throw new Error(`go not found: the chart tests need the Debian packages ${GO_PACKAGES}`);
  }
  const hash = createHash('sha256').update(readFileSync(RENDER_GO)).update(version.stdout).digest('hex').slice(0, 16);
  const base = join(tmpdir(), 'kip-chart-render');
  const bin = join(base, hash, 'render');
  if (existsSync(bin)) return bin;
  mkdirSync(join(base, hash), { recursive: true });
  // Test files run in parallel workers: one builds, the others wait for its binary.
  // A lock older than a build can take was left by a killed run.
  const lock = `${bin}.lock`;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (existsSync(bin)) return bin;
      const age = Date.now() - (statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now());
      if (age > 180_000) rmSync(lock, { recursive: true, force: true });
      else Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 200);
    }
  }
  try {
    if (existsSync(bin)) return bin;
    return goBuild(bin, join(base, 'gocache'));
  } finally {
    rmSync(lock, { recursive: true, force: true });
  }
}

function goBuild(bin: string, cacheDir: string): string {
  const tmp = `${bin}.${process.pid}.tmp`;
  const r = spawnSync('go', ['build', '-o', tmp, RENDER_GO], {
    cwd: dirname(RENDER_GO), env: goEnv(cacheDir), encoding: 'utf8', timeout: 300_000,
  });
  if (r.status !== 0) {
    rmSync(tmp, { force: true });
    throw new Error(`go build test/chart/render.go failed (needs ${GO_PACKAGES}):\n${r.stderr}${r.error?.message ?? ''}`);
  }
  renameSync(tmp, bin); // atomic: a reader never sees a partial binary
  return bin;
}

/** Options of {@link render}. */
export interface RenderOptions {
  name?: string;
  namespace?: string;
  /** Render NOTES.txt instead of the manifests. */
  notes?: boolean;
  apiVersions?: string[];
  kubeVersion?: string;
}

/** What the renderer said: exit code and output. */
export interface RenderResult {
  ok: boolean;
  stdout: string;
  stderr: string;
}

/** Renders a chart (default: ours) with value overrides (each object is one -f file, later wins). */
export function render(renderer: string, values: object[] = [], opts: RenderOptions = {}, chartDir = CHART_DIR): RenderResult {
  const dir = mkdtempSync(join(tmpdir(), 'kip-values-'));
  try {
    const args = [chartDir, '--name', opts.name ?? 'kube-ipvs-proxy', '--namespace', opts.namespace ?? 'kube-system'];
    values.forEach((v, i) => {
      const file = join(dir, `values-${i}.yaml`);
      writeFileSync(file, JSON.stringify(v)); // JSON is YAML
      args.push('-f', file);
    });
    if (opts.notes) args.push('--notes');
    if (opts.kubeVersion) args.push('--kube-version', opts.kubeVersion);
    for (const a of opts.apiVersions ?? []) args.push('--api-versions', a);
    const r = spawnSync(renderer, args, { encoding: 'utf8', timeout: 30_000 });
    return { ok: r.status === 0, stdout: r.stdout ?? '', stderr: (r.stderr ?? '') + (r.error?.message ?? '') };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
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
