// zod schemas of the Kubernetes objects the proxy reads (types and constants in k8s.ts). Both
// sources (the API server and --manifests) validate through these (or k8s-fast.ts, the same
// result for plain objects), so a malformed object is rejected the same way, with the field named.
// Built, with zod, on first use (zod.ts): plain objects never need them.
import type { z } from 'zod';

import { lazy, lazySchema, zod, type Zod } from '../zod.js';
import { familyOf } from './ip.js';
import { ADDRESS_TYPES, IP_FAMILIES, K8S_PROTOCOLS, SERVICE_TYPES, SESSION_AFFINITIES, TRAFFIC_POLICIES } from './k8s.js';

/** The schemas, made with `z`. */
function build(z: Zod) {
  const ipString = z.string().refine((s) => familyOf(s) !== null, { error: (i) => `invalid IP address ${JSON.stringify(i.input)}` });
  const protocol = z.enum(K8S_PROTOCOLS).default('TCP');
  const portNumber = z.number().int().min(1).max(65535);
  /** A list that may be absent or null (a Go nil slice), read as []. */
  const nullableList = <T extends z.ZodType>(item: T) => z.array(item).nullish().transform((v) => v ?? []);

  /** metadata: name, namespace (default "default"), labels, annotations. */
  const metadata = z.object({
    name: z.string().min(1),
    namespace: z.string().min(1).default('default'),
    uid: z.string().optional(),
    resourceVersion: z.string().optional(),
    labels: z.record(z.string(), z.string()).default({}),
    annotations: z.record(z.string(), z.string()).default({}),
  });

  /** A Service port. `name` may be empty only when the Service has a single port. */
  const servicePort = z.object({
    name: z.string().default(''),
    protocol,
    port: portNumber,
    targetPort: z.union([z.number().int(), z.string()]).optional(),
    nodePort: z.number().int().min(1).max(65535).optional(),
  });

  /** Service (v1): the fields a service proxy uses. */
  const service = z.object({
    apiVersion: z.literal('v1').default('v1'),
    kind: z.literal('Service').default('Service'),
    metadata,
    spec: z.object({
      type: z.enum(SERVICE_TYPES).default('ClusterIP'),
      clusterIP: z.string().optional(),
      clusterIPs: z.array(z.string()).optional(),
      ipFamilies: z.array(z.enum(IP_FAMILIES)).optional(),
      ports: z.array(servicePort).default([]),
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
        loadBalancer: z.object({ ingress: z.array(z.object({ ip: ipString.optional(), hostname: z.string().optional(), ipMode: z.string().optional() })).default([]) }).default({ ingress: [] }),
      })
      .default({ loadBalancer: { ingress: [] } }),
  });

  /** EndpointSlice (discovery.k8s.io/v1). */
  const endpointSlice = z.object({
    apiVersion: z.literal('discovery.k8s.io/v1').default('discovery.k8s.io/v1'),
    kind: z.literal('EndpointSlice').default('EndpointSlice'),
    metadata,
    addressType: z.enum(ADDRESS_TYPES),
    // NOTE: the EndpointSlice controller (a Go client) writes a slice with no endpoints as
    // `endpoints: null, ports: null` (nil slices, no omitempty in discovery/v1 types.go).
    endpoints: nullableList(
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
    ),
    ports: nullableList(z.object({ name: z.string().default(''), protocol, port: z.number().int().min(1).max(65535).optional() })),
  });

  /** Node (v1): name, labels, addresses, and what decides its eligibility (deletion, taints). */
  const node = z.object({
    apiVersion: z.literal('v1').default('v1'),
    kind: z.literal('Node').default('Node'),
    metadata: metadata.extend({ namespace: z.string().default(''), deletionTimestamp: z.string().optional() }),
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
  return { metadata, servicePort, service, endpointSlice, node };
}

const schemas = lazy(() => build(zod()));
type Schemas = ReturnType<typeof build>;

/** metadata: name, namespace (default "default"), labels, annotations. */
export const metadataSchema = lazySchema(() => schemas().metadata);
/** A Service port. */
export const servicePortSchema = lazySchema(() => schemas().servicePort);
/** Service (v1). */
export const serviceSchema = lazySchema(() => schemas().service);
/** EndpointSlice (discovery.k8s.io/v1). */
export const endpointSliceSchema = lazySchema(() => schemas().endpointSlice);
/** Node (v1). */
export const nodeSchema = lazySchema(() => schemas().node);

/** A validated Service. */
export type Service = z.infer<Schemas['service']>;
/** A validated EndpointSlice. */
export type EndpointSlice = z.infer<Schemas['endpointSlice']>;
/** A validated Node. */
export type Node = z.infer<Schemas['node']>;
