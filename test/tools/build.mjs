#!/usr/bin/env node
// Builds the real Kubernetes, etcd and Helm binaries the tests run, from the Go modules pinned
// in test/tools/*/go.mod, into a cache outside the checkout keyed by name, version and go.sum.
// `node test/tools/build.mjs [name ...]` builds what is missing and prints each path.
import { createHash } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

/** Each tool: the module folder under test/tools, its main package and the version it pins. */
export const TOOLS = {
  etcd: { dir: 'etcd', pkg: 'go.etcd.io/etcd/server/v3', module: 'go.etcd.io/etcd/server/v3' },
  'kube-apiserver': { dir: 'k8s', pkg: 'k8s.io/kubernetes/cmd/kube-apiserver', module: 'k8s.io/kubernetes' },
  'kube-controller-manager': { dir: 'k8s', pkg: 'k8s.io/kubernetes/cmd/kube-controller-manager', module: 'k8s.io/kubernetes' },
  'kube-proxy': { dir: 'k8s', pkg: 'k8s.io/kubernetes/cmd/kube-proxy', module: 'k8s.io/kubernetes' },
  kubectl: { dir: 'k8s', pkg: 'k8s.io/kubernetes/cmd/kubectl', module: 'k8s.io/kubernetes' },
  helm: { dir: 'helm', pkg: 'helm.sh/helm/v3/cmd/helm', module: 'helm.sh/helm/v3' },
};

/** The cache root: $KIP_TOOLS_CACHE, else ~/.cache/kube-ipvs-proxy/tools. */
export const cacheRoot = () => process.env.KIP_TOOLS_CACHE ?? join(homedir(), '.cache', 'kube-ipvs-proxy', 'tools');

/** The version a tool's go.mod pins for its module. */
export function toolVersion(name) {
  const t = TOOLS[name];
  if (!t) throw new Error(`unknown tool ${name}`);
  const mod = readFileSync(join(here, t.dir, 'go.mod'), 'utf8');
  const m = mod.match(new RegExp(`^\\s*(?:require\\s+)?${t.module.replace(/[./]/g, '\\$&')}\\s+(v\\S+)`, 'm'));
  if (!m) throw new Error(`${t.dir}/go.mod pins no version of ${t.module}`);
  return m[1];
}

/** Where a tool's binary lives in the cache (whether or not it is built yet). */
export function toolPath(name) {
  const t = TOOLS[name];
  const sum = createHash('sha256').update(readFileSync(join(here, t.dir, 'go.sum'))).digest('hex').slice(0, 10);
  return join(cacheRoot(), `${name}-${toolVersion(name)}-${sum}`, name);
}

function ldflags(name) {
  const v = toolVersion(name);
  if (TOOLS[name].module === 'k8s.io/kubernetes') {
    const [maj, min] = v.slice(1).split('.');
    return `-s -w -X k8s.io/component-base/version.gitVersion=${v} -X k8s.io/component-base/version.gitMajor=${maj} -X k8s.io/component-base/version.gitMinor=${min} -X k8s.io/component-base/version.gitTreeState=clean`;
  }
  if (name === 'helm') return `-s -w -X helm.sh/helm/v3/internal/version.version=${v}`;
  return '-s -w';
}

/** The go command: /usr/local/go's if there is one (Debian's golang-go may be older), else PATH's. */
function goCommand() {
  const go = existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : 'go';
  let version = '';
  try {
    version = execFileSync(go, ['env', 'GOVERSION'], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error('go not found: building the test tools needs Go >= 1.26 (https://go.dev/dl is not reachable here: use the machine\'s Go)');
  }
  const [major, minor] = version.replace(/^go/, '').split('.').map(Number);
  if (major < 1 || (major === 1 && minor < 26)) throw new Error(`${go} is ${version}: building the test tools needs Go >= 1.26`);
  return go;
}

/** Builds each named tool that is not in the cache yet; returns name → path. */
export function ensureTools(names = Object.keys(TOOLS), log = (s) => process.stderr.write(`${s}\n`)) {
  const out = {};
  for (const name of names) {
    const path = toolPath(name);
    if (!existsSync(path)) {
      const t0 = Date.now();
      log(`building ${name} ${toolVersion(name)} (first time only) ...`);
      mkdirSync(dirname(path), { recursive: true });
      const tmp = `${path}.tmp${process.pid}`;
      execFileSync(goCommand(), ['build', '-trimpath', `-ldflags=${ldflags(name)}`, '-o', tmp, TOOLS[name].pkg], {
        cwd: join(here, TOOLS[name].dir),
        stdio: ['ignore', 'inherit', 'inherit'],
        env: { ...process.env, CGO_ENABLED: '0', GOFLAGS: '-mod=mod' },
      });
      renameSync(tmp, path);
      log(`built ${name} in ${((Date.now() - t0) / 1000).toFixed(0)} s`);
    }
    out[name] = path;
  }
  return out;
}

/** Files the tests take from Go modules as they are published (no build): module → version. */
export const MODULE_FILES = {
  // The ServiceMonitor CRD the chart's serviceMonitor value set is installed against.
  serviceMonitorCrd: { module: 'github.com/prometheus-operator/prometheus-operator', version: 'v0.80.1', path: 'example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml' },
};

/** The path of one of MODULE_FILES, downloading its module into Go's module cache if needed. */
export function moduleFile(name) {
  const { module, version, path } = MODULE_FILES[name];
  let text;
  try {
    text = execFileSync(goCommand(), ['mod', 'download', '-json', `${module}@${version}`], { cwd: here, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, GOFLAGS: '-mod=mod' } });
  } catch (e) {
    // -json reports the module's error in its output (and exits 1); go's own errors go to stderr.
    const reported = /"Error":\s*"([^"]*)"/.exec(String(e.stdout ?? ''))?.[1];
    throw new Error(`go mod download ${module}@${version}: ${reported ?? (String(e.stderr ?? '').trim() || e.message)}`);
  }
  const info = JSON.parse(text);
  if (info.Error) throw new Error(`${module}@${version}: ${info.Error}`);
  return join(info.Dir, path);
}

/** Downloads every module of MODULE_FILES now (before the tests that read them), once more after a failure. */
export function ensureModuleFiles(log = (s) => process.stderr.write(`${s}\n`)) {
  for (const name of Object.keys(MODULE_FILES)) {
    try {
      moduleFile(name);
    } catch (e) {
      log(`${e.message}; trying again`);
      moduleFile(name);
    }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const names = process.argv.slice(2);
  for (const [name, path] of Object.entries(ensureTools(names.length ? names : undefined))) console.log(`${name}\t${path}`);
}
