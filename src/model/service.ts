// The proxy's internal model: one ServicePortInfo per (Service, port), the endpoints behind it,
// and this node. The change tracker builds it from Services / EndpointSlices / the Node; the
// desired-state functions read only this.
import type { Family } from './ip.js';

/** IPVS service flags, named as ipvsadm prints them; flag-N are scheduler flags of other schedulers. */
export const SERVICE_FLAGS = [
  'persistent',
  'ops',
  'sh-fallback',
  'sh-port',
  'mh-fallback',
  'mh-port',
  'flag-1',
  'flag-2',
  'flag-3',
] as const;
/** A service flag. */
export type ServiceFlag = (typeof SERVICE_FLAGS)[number];

/** One frozen empty flag list for the virtual servers without flags (most; one array fewer per virtual server held). */
export const NO_FLAGS = Object.freeze([]) as unknown as ServiceFlag[];

/** A transport protocol as IPVS names it. */
export type L4Protocol = 'tcp' | 'udp' | 'sctp';

/** Identifies one port of one Service. */
export interface ServicePortName {
  namespace: string;
  name: string;
  /** The port's name ('' for a single unnamed port). */
  port: string;
  protocol: L4Protocol;
}

/** `namespace/name:port/protocol`, the key of everything per service port. */
export function portNameKey(p: ServicePortName): string {
  return [p.namespace, '/', p.name, ':', p.port, '/', p.protocol].join(''); // one flat string: a template literal is a tree of parts, held per key
}

/** Everything the proxy needs to know about one Service port. */
export interface ServicePortInfo {
  name: ServicePortName;
  type: 'ClusterIP' | 'NodePort' | 'LoadBalancer';
  /** Valid cluster IPs (both families for dual-stack); empty for headless Services (not proxied). */
  clusterIPs: string[];
  port: number;
  protocol: L4Protocol;
  nodePort: number | null;
  externalIPs: string[];
  loadBalancerIPs: string[];
  loadBalancerSourceRanges: string[];
  /** externalTrafficPolicy: Local — external VIPs only to local endpoints, no SNAT. */
  externalPolicyLocal: boolean;
  /** internalTrafficPolicy: Local — cluster IP only to local endpoints. */
  internalPolicyLocal: boolean;
  healthCheckNodePort: number | null;
  /** sessionAffinity ClientIP timeout in seconds; null without affinity. */
  sessionAffinitySeconds: number | null;
  /** Per-service scheduler from the annotation; null means the configured default. */
  scheduler: string | null;
  schedulerFlags: ServiceFlag[];
  /** spec.trafficDistribution (PreferClose, PreferSameZone, PreferSameNode); absent when unset. */
  trafficDistribution?: string | null;
  /** The topology-aware-hints / topology-mode annotation ('' or absent when unset). */
  hintsAnnotation?: string;
}

/** One endpoint address+port behind a Service port. */
export interface EndpointInfo {
  address: string;
  port: number;
  family: Family;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
  nodeName: string | null;
  zone: string | null;
  /** nodeName is this node. */
  isLocal: boolean;
  /** hints.forZones names, sorted; absent or empty when the slice gives none. */
  zoneHints?: string[];
  /** hints.forNodes names, sorted; absent or empty when the slice gives none. */
  nodeHints?: string[];
}

/** This node, as far as the proxy cares. */
export interface NodeInfo {
  name: string;
  /** Node addresses from the Node object (InternalIP, ExternalIP). */
  addresses: string[];
  labels: Record<string, string>;
}

/** A problem with one object: reported (log, event), the object skipped, the rest served. */
export interface ObjectError {
  /** `Service ns/name`, `EndpointSlice ns/name`, `manifests/app.yaml#2`. */
  object: string;
  reason: string;
  /** The Event reason when it is recorded on its Service (default InvalidService). */
  event?: string;
}

/** Everything desired state is computed from. */
export interface ProxyState {
  services: ReadonlyMap<string, ServicePortInfo>;
  /** By portNameKey. */
  endpoints: ReadonlyMap<string, readonly EndpointInfo[]>;
  node: NodeInfo | null;
}
