// Realistic Service + EndpointSlice objects for the cluster-scale benchmark, shaped like what a
// real API server returns for `kubectl apply`-ed Deployments: uid, labels, a last-applied
// annotation, managedFields, ownerReferences, targetRefs, zones (about 5.3 kB of JSON per pair).

/** Services per namespace. */
const PER_NAMESPACE = 100;
const ZONES = ['zone-a', 'zone-b', 'zone-c'];
const CREATED = '2026-11-01T08:00:00Z';

/** The i-th ClusterIP, in 10.96.0.0/12 (skips .0 addresses). */
export const vip = (i) => { const n = i + 10; return `10.${96 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}`; };
/** The n-th initial endpoint address, in 10.128.0.0/10. */
export const endpointIp = (n) => `10.${128 + (n >> 16)}.${(n >> 8) & 255}.${n & 255}`;
/** The n-th replacement endpoint address (churn), in 10.192.0.0/10. */
export const churnIp = (n) => `10.${192 + ((n >> 16) & 63)}.${(n >> 8) & 255}.${n & 255}`;
/** The Pod CIDR that covers every endpoint address above. */
export const CLUSTER_CIDR = '10.128.0.0/9';
/** The node the daemon runs as. */
export const NODE_NAME = 'bench-node';

/** A deterministic UUID from two numbers. */
function uid(kind, i) {
  const h = (x) => (x >>> 0).toString(16).padStart(8, '0');
  const a = h(Math.imul(i + 1, 2654435761) ^ kind);
  const b = h(Math.imul(i + 7, 40503) ^ (kind << 8));
  return `${a}-${b.slice(0, 4)}-4${b.slice(5, 8)}-a${a.slice(1, 4)}-${b}${a.slice(0, 4)}`;
}

/** Name and namespace of the i-th Service. */
export function serviceName(i) {
  return { name: `app-${String(i).padStart(5, '0')}`, namespace: `team-${String(Math.floor(i / PER_NAMESPACE)).padStart(3, '0')}` };
}

/** The i-th Service (ClusterIP, one TCP port 80 -> 8080), without resourceVersion. */
export function makeService(i) {
  const { name, namespace } = serviceName(i);
  const labels = { app: name, 'app.kubernetes.io/name': name };
  const applied = {
    apiVersion: 'v1', kind: 'Service',
    metadata: { annotations: {}, labels, name, namespace },
    spec: { ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }], selector: { app: name } },
  };
  return {
    kind: 'Service', apiVersion: 'v1',
    metadata: {
      name, namespace, uid: uid(1, i), creationTimestamp: CREATED, labels,
      annotations: { 'kubectl.kubernetes.io/last-applied-configuration': `${JSON.stringify(applied)}\n` },
      managedFields: [{
        manager: 'kubectl-client-side-apply', operation: 'Update', apiVersion: 'v1', time: CREATED, fieldsType: 'FieldsV1',
        fieldsV1: {
          'f:metadata': { 'f:annotations': { '.': {}, 'f:kubectl.kubernetes.io/last-applied-configuration': {} }, 'f:labels': Object.fromEntries([['.', {}], ...Object.keys(labels).map((k) => [`f:${k}`, {}])]) },
          'f:spec': { 'f:internalTrafficPolicy': {}, 'f:ports': { '.': {}, 'k:{"port":80,"protocol":"TCP"}': { '.': {}, 'f:name': {}, 'f:port': {}, 'f:protocol': {}, 'f:targetPort': {} } }, 'f:selector': {}, 'f:sessionAffinity': {}, 'f:type': {} },
        },
      }],
    },
    spec: {
      clusterIP: vip(i), clusterIPs: [vip(i)], internalTrafficPolicy: 'Cluster', ipFamilies: ['IPv4'], ipFamilyPolicy: 'SingleStack',
      ports: [{ name: 'http', port: 80, protocol: 'TCP', targetPort: 8080 }], selector: { app: name }, sessionAffinity: 'None', type: 'ClusterIP',
    },
    status: { loadBalancer: {} },
  };
}

/** One endpoint of the i-th Service's slice at address `ip` (the j-th pod). */
function endpoint(i, j, ip) {
  const { name, namespace } = serviceName(i);
  return {
    addresses: [ip], conditions: { ready: true, serving: true, terminating: false },
    nodeName: `node-${(i * 10 + j) % 500}`, zone: ZONES[(i + j) % 3],
    targetRef: { kind: 'Pod', name: `${name}-7d9f8c6b5-${(i * 31 + j).toString(36).padStart(5, 'x')}`, namespace, uid: uid(3, i * 16 + j) },
  };
}

/** The i-th Service's EndpointSlice with `endpoints` ready endpoints, without resourceVersion. */
export function makeSlice(i, endpoints) {
  const { name, namespace } = serviceName(i);
  return {
    kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1',
    metadata: {
      name: `${name}-${uid(2, i).slice(0, 5)}`, generateName: `${name}-`, namespace, uid: uid(2, i), creationTimestamp: CREATED, generation: 1,
      labels: { app: name, 'endpointslice.kubernetes.io/managed-by': 'endpointslice-controller.k8s.io', 'kubernetes.io/service-name': name },
      annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': CREATED },
      ownerReferences: [{ apiVersion: 'v1', kind: 'Service', name, uid: uid(1, i), controller: true, blockOwnerDeletion: true }],
      managedFields: [{
        manager: 'kube-controller-manager', operation: 'Update', apiVersion: 'discovery.k8s.io/v1', time: CREATED, fieldsType: 'FieldsV1',
        fieldsV1: {
          'f:addressType': {}, 'f:endpoints': {}, 'f:ports': {},
          'f:metadata': { 'f:annotations': { '.': {}, 'f:endpoints.kubernetes.io/last-change-trigger-time': {} }, 'f:generateName': {}, 'f:labels': { '.': {}, 'f:app': {}, 'f:endpointslice.kubernetes.io/managed-by': {}, 'f:kubernetes.io/service-name': {} }, 'f:ownerReferences': { '.': {}, [`k:{"uid":"${uid(1, i)}"}`]: {} } },
        },
      }],
    },
    addressType: 'IPv4',
    endpoints: Array.from({ length: endpoints }, (_, j) => endpoint(i, j, endpointIp(i * endpoints + j))),
    ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
  };
}

/** A copy of `slice` whose endpoint `j` now has address `ip` (a new pod), trigger time now. */
export function replaceEndpoint(slice, i, j, ip) {
  const endpoints = slice.endpoints.slice();
  endpoints[j] = endpoint(i, j + 1000, ip);
  return {
    ...slice,
    metadata: { ...slice.metadata, generation: slice.metadata.generation + 1, annotations: { 'endpoints.kubernetes.io/last-change-trigger-time': new Date().toISOString().replace(/\.\d+Z$/, 'Z') } },
    endpoints,
  };
}

/** This node's Node object. */
export function makeNode() {
  return {
    kind: 'Node', apiVersion: 'v1',
    metadata: { name: NODE_NAME, uid: uid(4, 0), creationTimestamp: CREATED, labels: { 'kubernetes.io/hostname': NODE_NAME, 'topology.kubernetes.io/zone': 'zone-a', 'kubernetes.io/os': 'linux' } },
    spec: { podCIDR: '10.128.0.0/24', podCIDRs: ['10.128.0.0/24'] },
    status: { addresses: [{ type: 'InternalIP', address: '10.255.255.1' }, { type: 'Hostname', address: NODE_NAME }] },
  };
}

/** The cluster's ServiceCIDR (what kube-apiserver creates for --service-cluster-ip-range), ready. */
export function makeServiceCidr() {
  return {
    kind: 'ServiceCIDR', apiVersion: 'networking.k8s.io/v1',
    metadata: { name: 'kubernetes', uid: uid(5, 0), creationTimestamp: CREATED, labels: { 'networking.k8s.io/service-cidr-from-flags': 'true' } },
    spec: { cidrs: ['10.96.0.0/12'] },
    status: { conditions: [{ type: 'Ready', status: 'True', lastTransitionTime: CREATED, reason: '', message: 'Kubernetes Service CIDR is ready' }] },
  };
}
