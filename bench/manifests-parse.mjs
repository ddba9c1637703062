// `node --expose-gc bench/manifests-parse.mjs [N]` (after `npm run build`; PARSER=<path to another
// build's manifest-parse.js> measures that one instead, e.g. the previous release's): the --manifests parser on
// N Services + N EndpointSlices x 10 endpoints with realistic metadata (uid, labels, last-applied
// annotation, managedFields, ownerReferences, targetRefs, zones), one multi-document YAML file.
// Prints parse+validate time (best of 3) and the heap held by the result, against js-yaml's
// bare loadAll (no validation) of the same text, and the same objects as one JSON List.
import { createRequire } from 'node:module';

const { parseManifest } = await import(process.env.PARSER ?? '../dist/src/source/manifest-parse.js');

const require = createRequire(import.meta.url);
const yaml = require('yaml');
const jsyaml = require('js-yaml');

const N = Number(process.argv[2] ?? 3000);
const uid = (i, k) => `${(i * 7919 + k).toString(16).padStart(8, '0')}-1c2d-4e5f-8a9b-${(i * 31 + k).toString(16).padStart(12, '0')}`;
const ts = '2026-11-20T10:00:00Z';

function service(i) {
  const name = `svc-${i}`;
  const spec = {
    clusterIP: `10.96.${(i >> 8) & 255}.${i & 255}`,
    clusterIPs: [`10.96.${(i >> 8) & 255}.${i & 255}`],
    internalTrafficPolicy: 'Cluster',
    ipFamilies: ['IPv4'],
    ipFamilyPolicy: 'SingleStack',
    ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }, { name: 'metrics', port: 9090, protocol: 'TCP', targetPort: 9090 }],
    selector: { app: name },
    sessionAffinity: 'None',
    type: 'ClusterIP',
  };
  const lastApplied = JSON.stringify({ apiVersion: 'v1', kind: 'Service', metadata: { name, namespace: 'bench', labels: { app: name } }, spec });
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name, namespace: 'bench', uid: uid(i, 1), resourceVersion: String(100000 + i), creationTimestamp: ts,
      labels: { app: name, 'app.kubernetes.io/part-of': 'bench', team: `team-${i % 17}` },
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': lastApplied },
      managedFields: [{
        apiVersion: 'v1', fieldsType: 'FieldsV1', manager: 'kubectl-client-side-apply', operation: 'Update', time: ts,
        fieldsV1: { 'f:metadata': { 'f:annotations': { '.': {}, 'f:kubectl.kubernetes.io/last-applied-configuration': {} }, 'f:labels': { '.': {}, 'f:app': {} } },
          'f:spec': { 'f:internalTrafficPolicy': {}, 'f:ports': { '.': {}, 'k:{"port":80,"protocol":"TCP"}': { '.': {}, 'f:name': {}, 'f:port': {}, 'f:protocol': {}, 'f:targetPort': {} } }, 'f:selector': {}, 'f:sessionAffinity': {}, 'f:type': {} } },
      }],
    },
    spec,
    status: { loadBalancer: {} },
  };
}

function slice(i) {
  const name = `svc-${i}`;
  return {
    apiVersion: 'discovery.k8s.io/v1',
    kind: 'EndpointSlice',
    metadata: {
      name: `${name}-abcde`, namespace: 'bench', uid: uid(i, 2), resourceVersion: String(200000 + i), creationTimestamp: ts, generation: 3,
      generateName: `${name}-`,
      labels: { 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io', 'kubernetes.io/service-name': name, app: name },
      annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': ts },
      ownerReferences: [{ apiVersion: 'v1', blockOwnerDeletion: true, controller: true, kind: 'Service', name, uid: uid(i, 1) }],
      managedFields: [{ apiVersion: 'discovery.k8s.io/v1', fieldsType: 'FieldsV1', manager: 'kube-controller-manager', operation: 'Update', time: ts,
        fieldsV1: { 'f:addressType': {}, 'f:endpoints': {}, 'f:metadata': { 'f:annotations': { '.': {}, 'f:endpoints.kubernetes.io/last-change-trigger-time': {} }, 'f:generateName': {}, 'f:labels': { '.': {}, 'f:app': {} }, 'f:ownerReferences': { '.': {} } }, 'f:ports': {} } }],
    },
    addressType: 'IPv4',
    endpoints: Array.from({ length: 10 }, (_, e) => ({
      addresses: [`10.${64 + (e % 8)}.${(i >> 8) & 255}.${i & 255}`],
      conditions: { ready: true, serving: true, terminating: false },
      nodeName: `node-${(i + e) % 50}`,
      zone: `zone-${e % 3}`,
      targetRef: { kind: 'Pod', name: `${name}-7d9f8b6c5d-${e}x${i}`, namespace: 'bench', uid: uid(i, 10 + e) },
    })),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }, { name: 'metrics', port: 9090, protocol: 'TCP' }],
  };
}

const objects = [];
for (let i = 0; i < N; i++) objects.push(service(i), slice(i));
const text = objects.map((o) => yaml.stringify(o)).join('---\n');
const json = JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects });
objects.length = 0;
const mib = (b) => (b / 1048576).toFixed(1);
console.log(`${N} Services + ${N} EndpointSlices x 10: ${mib(Buffer.byteLength(text))} MiB of YAML, ${2 * N} documents`);

function time(f) {
  let best = Infinity;
  let out;
  for (let r = 0; r < 3; r++) {
    out = undefined;
    globalThis.gc?.();
    const t = process.hrtime.bigint();
    out = f();
    best = Math.min(best, Number(process.hrtime.bigint() - t) / 1e6);
  }
  return { best, out };
}

function heldBy(f) {
  globalThis.gc?.();
  const before = process.memoryUsage().heapUsed;
  const held = f();
  globalThis.gc?.();
  const after = process.memoryUsage().heapUsed;
  return { held, bytes: after - before };
}

// The file's bytes, as the daemon passes them; a build from before bytes were accepted gets the text.
const bytes = Buffer.from(text);
const input = parseManifest('probe.yaml', bytes.subarray(0, bytes.indexOf('\n---\n'))).objects.length === 1 ? bytes : text;
const ref = time(() => jsyaml.loadAll(text, null, { schema: jsyaml.CORE_SCHEMA }));
const asJson = time(() => parseManifest('bench.json', json));
const ours = time(() => parseManifest('bench.yaml', input));
if (ours.out.errors.length) console.log('errors:', ours.out.errors.slice(0, 3));
const h = heldBy(() => parseManifest('bench.yaml', input));
console.log(`reference js-yaml loadAll (no validation): ${ref.best.toFixed(0)} ms`);
console.log(`the same objects as one JSON List (JSON.parse + validation, as the API path decodes): ${asJson.best.toFixed(0)} ms`);
console.log(`parseManifest (${input === bytes ? 'bytes' : 'text'}): ${ours.best.toFixed(0)} ms (${(ours.best / ref.best).toFixed(2)}x the reference), ${h.held.objects.length} objects`);
console.log(`heap held by the parsed objects: ${mib(h.bytes)} MiB (${(h.bytes / h.held.objects.length / 1024).toFixed(2)} KiB per object)`);
if (!globalThis.gc) console.log('(run with node --expose-gc for the heap figure)');
