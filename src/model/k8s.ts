// The subset of Kubernetes objects the proxy reads (Service, EndpointSlice discovery.k8s.io/v1,
// Node), validated by zod. Both sources (the API server and --manifests) parse through these
// schemas, so a malformed object is rejected the same way, with the field named.
import { z } from 'zod';

import { familyOf } from './ip.js';

// The enums' values (k8s-fast.ts checks the same lists).
export const K8S_PROTOCOLS = ['TCP', 'UDP', 'SCTP'] as const;
export const SERVICE_TYPES = ['ClusterIP', 'NodePort', 'LoadBalancer', 'ExternalName'] as const;
export const TRAFFIC_POLICIES = ['Cluster', 'Local'] as const;
export const SESSION_AFFINITIES = ['None', 'ClientIP'] as const;
export const IP_FAMILIES = ['IPv4', 'IPv6'] as const;
export const ADDRESS_TYPES = ['IPv4', 'IPv6', 'FQDN'] as const;

const ipString = z.string().refine((s) => familyOf(s) !== null, { error: (i) => `invalid IP address ${JSON.stringify(i.input)}` });
const protocol = z.enum(K8S_PROTOCOLS).default('TCP');
const portNumber = z.number().int().min(1).max(65535);

/** metadata: name, namespace (default "default"), labels, annotations. */
export const metadataSchema = z.object({
  name: z.string().min(1),
  namespace: z.string().min(1).default('default'),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
  labels: z.record(z.string(), z.string()).default({}),
  annotations: z.record(z.string(), z.string()).default({}),
});

/** A Service port. `name` may be empty only when the Service has a single port. */
export const servicePortSchema = z.object({
  name: z.string().default(''),
  protocol,
  port: portNumber,
  targetPort: z.union([z.number().int(), z.string()]).optional(),
  nodePort: z.number().int().min(1).max(65535).optional(),
});

/** Service (v1): the fields a service proxy uses. */
export const serviceSchema = z.object({
  apiVersion: z.literal('v1').default('v1'),
  kind: z.literal('Service').default('Service'),
  metadata: metadataSchema,
  spec: z.object({
    type: z.enum(SERVICE_TYPES).default('ClusterIP'),
    clusterIP: z.string().optional(),
    clusterIPs: z.array(z.string()).optional(),
    ipFamilies: z.array(z.enum(IP_FAMILIES)).optional(),
    ports: z.array(servicePortSchema).default([]),
    externalIPs: z.array(ipString).default([]),
    loadBalancerSourceRanges: z.array(z.string()).default([]),
    externalTrafficPolicy: z.enum(TRAFFIC_POLICIES).default('Cluster'),
    internalTrafficPolicy: z.enum(TRAFFIC_POLICIES).default('Cluster'),
    healthCheckNodePort: z.number().int().min(1).max(65535).optional(),
    sessionAffinity: z.enum(SESSION_AFFINITIES).default('None'),
    sessionAffinityConfig: z
      .object({ clientIP: z.object({ timeoutSeconds: z.number().int().min(1).max(86400).optional() }).optional() })
      .optional(),
    externalName: z.string().optional(),
    trafficDistribution: z.string().optional(),
  }),
  status: z
    .object({
      loadBalancer: z.object({ ingress: z.array(z.object({ ip: ipString.optional(), hostname: z.string().optional() })).default([]) }).default({ ingress: [] }),
    })
    .default({ loadBalancer: { ingress: [] } }),
});
/** A validated Service. */
export type Service = z.infer<typeof serviceSchema>;

/** EndpointSlice (discovery.k8s.io/v1). */
export const endpointSliceSchema = z.object({
  apiVersion: z.literal('discovery.k8s.io/v1').default('discovery.k8s.io/v1'),
  kind: z.literal('EndpointSlice').default('EndpointSlice'),
  metadata: metadataSchema,
  addressType: z.enum(ADDRESS_TYPES),
  endpoints: z
    .array(
      z.object({
        addresses: z.array(z.string()).min(1),
        conditions: z
          .object({ ready: z.boolean().optional(), serving: z.boolean().optional(), terminating: z.boolean().optional() })
          .default({}),
        nodeName: z.string().optional(),
        zone: z.string().optional(),
        hostname: z.string().optional(),
        hints: z
          .object({
            forZones: z.array(z.object({ name: z.string() })).optional(),
            forNodes: z.array(z.object({ name: z.string() })).optional(),
          })
          .optional(),
      }),
    )
    .default([]),
  ports: z
    .array(z.object({ name: z.string().default(''), protocol, port: z.number().int().min(1).max(65535).optional() }))
    .default([]),
});
/** A validated EndpointSlice. */
export type EndpointSlice = z.infer<typeof endpointSliceSchema>;

/** Node (v1): name, labels, addresses, and what decides its eligibility (deletion, taints). */
export const nodeSchema = z.object({
  apiVersion: z.literal('v1').default('v1'),
  kind: z.literal('Node').default('Node'),
  metadata: metadataSchema.extend({ namespace: z.string().default(''), deletionTimestamp: z.string().optional() }),
  spec: z
    .object({
      podCIDRs: z.array(z.string()).default([]),
      taints: z.array(z.object({ key: z.string(), value: z.string().optional(), effect: z.string().optional() })).default([]),
    })
    .default({ podCIDRs: [], taints: [] }),
  status: z
    .object({ addresses: z.array(z.object({ type: z.string(), address: z.string() })).default([]) })
    .default({ addresses: [] }),
});
/** A validated Node. */
export type Node = z.infer<typeof nodeSchema>;

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
  return o.metadata.namespace ? `${o.metadata.namespace}/${o.metadata.name}` : o.metadata.name;
}
