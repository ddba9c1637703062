// Contracts between the IPVS proxier's stages:
//   desired.ts  ServicePortInfo + endpoints -> ServiceContribution          (pure, per service)
//   desired-index.ts  contributions -> aggregate desired state + per-change delta (pure data structure)
//   plan.ts     desired + observed (+ graceful state) -> ordered kernel ops  (pure)
//   apply.ts    ops -> batched kernel calls; observed state updated from acknowledged ops
import type { Config } from '../../config.js';
import type { Destination, VirtualService } from '../../kernel/ipvs/types.js';
import type { DestinationMap } from './destination-table.js';
import type { IpsetSetSpec } from '../../kernel/ipset/types.js';
import type { TableSpec } from '../../kernel/iptables.js';
import type { Family } from '../../model/ip.js';
import type { L4Protocol, ObjectError } from '../../model/service.js';

/** What desired-state functions know besides the service itself. */
export interface DesiredContext {
  config: Config;
  nodeName: string;
  /** This node's topology.kubernetes.io/zone label ('' or absent: none), for topology hints. */
  zone?: string;
  /** Local addresses NodePort virtual servers listen on (after --nodeport-addresses filtering). */
  nodePortAddresses: string[];
  /** Every address of the node but the dummy link's, whatever --nodeport-addresses says (absent: the NodePort ones). */
  nodeAddresses?: string[];
}

/** One virtual server with the real servers it should have. */
export interface DesiredVirtualServer {
  service: VirtualService;
  destinations: readonly Destination[];
}

/** Everything one service port asks of the kernel. Computed by desiredForService (pure). */
export interface ServiceContribution {
  /** portNameKey of the service port. */
  key: string;
  virtualServers: DesiredVirtualServer[];
  /** Entries of the kube-proxy ipsets (KUBE-CLUSTER-IP, KUBE-NODE-PORT-TCP, …), as ipset text. */
  ipsetEntries: Array<{ set: string; entry: string }>;
  /** Addresses to bind on the dummy interface (cluster, external, load-balancer IPs). */
  addresses: string[];
  /** externalTrafficPolicy: Local with a healthCheckNodePort: the port and local endpoint count. */
  healthCheck: { port: number; service: string; localEndpoints: number } | null;
  /** Why (part of) this service could not be programmed, e.g. an unknown scheduler annotation. */
  errors: ObjectError[];
  /** Internal traffic to its externalTrafficPolicy: Local external and load-balancer IPs (absent: none). */
  redirects?: InternalRedirect[];
}

/**
 * An externalTrafficPolicy: Local external or load-balancer IP port whose internal clients (the
 * cluster CIDR, the node) are DNATed to the cluster IP, so they reach every endpoint the cluster IP
 * has, as kube-proxy's iptables mode short-circuits them; external clients keep the local endpoints.
 */
export interface InternalRedirect {
  family: Family;
  protocol: L4Protocol;
  address: string;
  port: number;
  clusterIP: string;
  /** A load-balancer IP with source ranges: Pods are redirected only from inside them. */
  sourceRanges: boolean;
  /** `ns/name:port` for the rule comment. */
  service: string;
}

/** A set the proxy owns, with its spec (created when missing). */
export interface OwnedSet {
  spec: IpsetSetSpec;
  /** kube-proxy's comment for the set, kept for documentation and inspect. */
  comment: string;
}

/** `tcp/10.96.0.10:80` — the key of a virtual server (serviceId of the kernel client). */
export type VirtualServerId = string;
/** `10.244.1.2:8080` — the key of a real server within its virtual server (destinationId). */
export type DestinationId = string;

/** Kernel state as last read or acknowledged. */
export interface ObservedState {
  virtualServers: Map<VirtualServerId, { service: VirtualService; destinations: DestinationMap<Destination & { activeConns?: number; inactiveConns?: number }> }>;
  ipsets: Map<string, Set<string>>;
  /** What each set can hold (maxelem; a bitmap's range size) as created or listed; absent: not known yet. */
  ipsetCapacity: Map<string, number>;
  addresses: Set<string>;
  /** The last iptables restore input per table, to skip identical restores. */
  iptables: Map<string, string>;
}

/** Rules the IPVS proxier keeps in iptables (kube-proxy's IPVS-mode chains), per table. */
export type IptablesSpec = TableSpec[];
