// The build's last step (`npm run bundle`, after tsc): dist/src's ES modules → dist/bin, what ships.
// esbuild bundles the CLI into an entry point and a few chunks (code splitting, which esbuild does
// for ES modules only), then each file is rewritten as CommonJS (dist/bin/package.json says so):
// node then starts the daemon without its ES module loader, which in UML put 0.1 s on every
// spawn → first list request (1.60 → 1.47 s, same boot, 15 rounds each; 5,140 → 5,006 page faults).
// - import() of a chunk or a built-in becomes require() after one turn of the event loop: an ES
//   import() lets I/O run while the module loads, and the start-up relies on it (the first list
//   requests go out while the addon and the daemon's own modules load: src/source/start.ts). Left
//   an import(), a built-in (node:https, for an https API server) would load the ES module loader
//   on the way to the first request. import() of a package (an ES one) is import.js's: the code
//   cache's loader leaves a file with an import() to node (see src/code-cache.ts).
// - import.meta.url: the chunk's file URL. Every file is strict, as an ES module is.
// Then the V8 code cache (src/code-cache.ts): dist/bin/cli.js is the entry point that installs its
// loader before it requires the CLI (main.js) and its chunks, and two training runs of it write a
// `.cache` beside each file they load (train() below).
import { spawn } from 'node:child_process';
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { build, transform } from 'esbuild';

const OUT = 'dist/bin';
const TRAIN_ENV = 'KUBE_IPVS_PROXY_CODE_CACHE_TRAIN';
const LOCAL_IMPORT = /\bimport\((["'])(\.\/chunk-[A-Z0-9]+\.js|node:[a-z_/]+)\1\)/g;
const PACKAGE_IMPORT = /\bimport\((["'])([^"'.][^"']*)\1\)/g;
const IMPORTER = 'import.js';
const PRELUDE = {
  require: 'var __importRequire = (p) => new Promise((r) => setImmediate(r)).then(() => require(p));',
  metaUrl: 'var __importMetaUrl = require("node:url").pathToFileURL(__filename).href;',
};

rmSync(OUT, { recursive: true, force: true });
await build({
  entryPoints: { main: 'dist/src/cli.js', 'code-cache': 'dist/src/code-cache.js' },
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outdir: OUT,
  chunkNames: 'chunk-[hash]',
  external: ['@kubernetes/client-node', 'pino'],
  sourcemap: 'inline',
  logLevel: 'warning',
});

let entryShebang = '';
for (const file of readdirSync(OUT).filter((f) => f.endsWith('.js'))) {
  const path = join(OUT, file);
  let code = readFileSync(path, 'utf8');
  const shebang = code.startsWith('#!') ? code.slice(0, code.indexOf('\n') + 1) : '';
  code = code
    .slice(shebang.length)
    .replace(LOCAL_IMPORT, (_, q, spec) => `__importRequire(${q}${spec}${q})`)
    .replace(PACKAGE_IMPORT, (_, q, spec) => `require("./${IMPORTER}")(${q}${spec}${q})`);
  const prelude = ['"use strict";'];
  if (code.includes('__importRequire(')) prelude.push(PRELUDE.require);
  if (code.includes('import.meta')) prelude.push(PRELUDE.metaUrl);
  const out = await transform(code, {
    format: 'cjs',
    platform: 'node',
    target: 'node20',
    sourcefile: file,
    sourcemap: 'external',
    define: { 'import.meta.url': '__importMetaUrl' },
    banner: prelude.join('\n'),
    logLevel: 'warning',
  });
  if (/\bimport\.meta\b/.test(out.code)) throw new Error(`${path}: import.meta left after the CommonJS rewrite`);
  if (shebang) entryShebang = shebang;
  writeFileSync(path, `${out.code}//# sourceMappingURL=${file}.map\n`);
  writeFileSync(`${path}.map`, out.map);
}
writeFileSync(join(OUT, 'package.json'), '{ "type": "commonjs" }\n');
writeFileSync(join(OUT, IMPORTER), '"use strict";\n// import() of a package, for the other files (src/bundle.mjs): node compiles this one itself.\nmodule.exports = (specifier) => import(specifier);\n');

const ENTRY = 'cli.js';
const LOADER = 'code-cache.js';
writeFileSync(
  join(OUT, ENTRY),
  `${entryShebang}"use strict";\n// src/bundle.mjs writes this: the code cache's loader (src/code-cache.ts), then the CLI (src/cli.ts).\nrequire("./${LOADER}").useCodeCache(__dirname, process.env.${TRAIN_ENV} === "1");\nrequire("./main.js").runAsEntryPoint();\n`,
);
chmodSync(join(OUT, ENTRY), 0o755);

/** What the training runs program (--dry-run: nothing is written): one Service with two endpoints on this node. */
const TRAINING_OBJECTS = {
  Service: { apiVersion: 'v1', kind: 'Service', metadata: { name: 'web', namespace: 'train', uid: 'u1', resourceVersion: '1' }, spec: { type: 'NodePort', clusterIP: '10.96.0.10', clusterIPs: ['10.96.0.10'], ports: [{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080, nodePort: 30080 }] } },
  EndpointSlice: {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: { name: 'web-1', namespace: 'train', uid: 'u2', resourceVersion: '1', labels: { 'kubernetes.io/service-name': 'web' } },
    addressType: 'IPv4',
    ports: [{ name: 'http', protocol: 'TCP', port: 8080 }],
    endpoints: ['10.244.1.2', '10.244.2.2'].map((ip) => ({ addresses: [ip], conditions: { ready: true, serving: true, terminating: false }, nodeName: 'train' })),
  },
  Node: { apiVersion: 'v1', kind: 'Node', metadata: { name: 'train', uid: 'u3', resourceVersion: '1' }, spec: { podCIDRs: ['10.244.0.0/16'] }, status: { addresses: [{ type: 'InternalIP', address: '10.250.0.1' }] } },
};

/**
 * The code cache's training: the CLI runs its start-up paths once each (--dry-run --once, which
 * writes nothing), and the loader writes each file's cache when the process exits; the second run
 * starts from the first one's caches and adds what it compiled. 1: against an API server (here)
 * that lists TRAINING_OBJECTS; 2: the same objects as manifests. A file no run loads has no cache.
 */
async function train() {
  const server = createServer((req, res) => {
    const kind = /\/endpointslices/.test(req.url) ? 'EndpointSlice' : /\/nodes/.test(req.url) ? 'Node' : 'Service';
    if (/[?&]watch=(1|true)/.test(req.url)) return void res.writeHead(200, { 'content-type': 'application/json' }).flushHeaders();
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: `${kind}List`, apiVersion: 'v1', metadata: { resourceVersion: '1' }, items: [TRAINING_OBJECTS[kind]] }));
  });
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  const dir = mkdtempSync(join(tmpdir(), 'kip-train-'));
  const kubeconfig = join(dir, 'kubeconfig');
  const cluster = { server: `http://127.0.0.1:${server.address().port}` };
  writeFileSync(kubeconfig, JSON.stringify({ apiVersion: 'v1', kind: 'Config', 'current-context': 't', contexts: [{ name: 't', context: { cluster: 't', user: 't' } }], clusters: [{ name: 't', cluster }], users: [{ name: 't', user: { token: 't' } }] }));
  const manifests = join(dir, 'manifests');
  mkdirSync(manifests);
  writeFileSync(join(manifests, 'objects.yaml'), Object.values(TRAINING_OBJECTS).map((o) => JSON.stringify(o)).join('\n---\n'));
  const common = ['--dry-run', '--once', '--hostname-override', 'train', '--healthz-bind-address', '', '--metrics-bind-address', ''];
  for (const source of [['--kubeconfig', kubeconfig], ['--manifests', manifests]]) {
    const child = spawn(process.execPath, [join(OUT, ENTRY), ...common, ...source], { stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, [TRAIN_ENV]: '1' } });
    let err = '';
    child.stderr.on('data', (d) => (err += d));
    const stuck = setTimeout(() => child.kill('SIGKILL'), 60_000); // killed, it writes no cache
    const code = await new Promise((resolve) => child.once('exit', (c, signal) => resolve(c ?? signal)));
    clearTimeout(stuck);
    if (code !== 0) process.stderr.write(`bundle: the code cache's training run (${source[0]}) ended with ${code}; the caches it wrote are kept\n${err}`);
  }
  server.closeAllConnections();
  server.close();
  rmSync(dir, { recursive: true, force: true });
}

await train();
