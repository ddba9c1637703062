// The subset of Kubernetes objects the proxy reads (Service, EndpointSlice discovery.k8s.io/v1,
// Node): their types, the enums and well-known labels. The zod schemas that validate them are in
// k8s-schemas.ts, built (and zod loaded, zod.ts) only for an object that is not plain: plain
// objects never need them (k8s-fast.ts).

export type { EndpointSlice, Node, Service } from './k8s-schemas.js';

// The enums' values (k8s-fast.ts checks the same lists).
export const K8S_PROTOCOLS = ['TCP', 'UDP', 'SCTP'] as const;
export const SERVICE_TYPES = ['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'] as const;
export const TRAFFIC_POLICIES = ['Cluster', 'Local'] as const;
export const SESSION_AFFINITIES = ['None', 'ClientIP'] as const;
export const IP_FAMILIES = ['IPv4', 'IPv6'] as const;
export const ADDRESS_TYPES = ['IPv4', 'IPv6', 'FQDN'] as const;

/** The label that ties an EndpointSlice to its Service. */
export const SERVICE_NAME_LABEL = 'kubernetes.io/service-name';

/** Annotations that select a per-service IPVS scheduler (ours, and kube-router's alias). */
export const SCHEDULER_ANNOTATIONS = ['kube-ipvs-proxy.io/scheduler', 'kube-router.io/service.scheduler'] as const;
/** Annotation with comma-separated scheduler flags: sh-fallback, sh-port, mh-fallback, mh-port. */
export const SCHEDULER_FLAGS_ANNOTATION = 'kube-ipvs-proxy.io/scheduler-flags';

/** The Node label that names its zone (topology-aware routing). */
export const ZONE_LABEL = 'topology.kubernetes.io/zone';
/** Service annotations that ask for topology-aware hints; the deprecated one wins when both are set. */
export const TOPOLOGY_ANNOTATIONS = ['service.kubernetes.io/topology-aware-hints', 'service.kubernetes.io/topology-mode'] as const;

/** `namespace/name` of an object. */
export function objectKey(o: { metadata: { namespace: string; name: string } }): string {
  // join: one flat string, not a cons-string tree (see destinationId in kernel/ipvs/types.ts).
  return o.metadata.namespace ? [o.metadata.namespace, o.metadata.name].join('/') : o.metadata.name;
}
