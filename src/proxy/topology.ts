// Which endpoints a service port may use from this node: kube-proxy's CategorizeEndpoints
// (pkg/proxy/topology.go), with topology-aware routing: cluster traffic follows the EndpointSlice
// hints (forNodes, then forZones) when the Service asks for it and the hints cover every ready
// endpoint and name this node or its zone; otherwise it uses every usable endpoint.
import { ZONE_LABEL } from '../model/k8s.js';
import type { EndpointInfo, NodeInfo, ServicePortInfo } from '../model/service.js';

/** The endpoints of one service port, split by traffic policy. */
export interface CategorizedEndpoints {
  /** Usable endpoints for Cluster-policy traffic; empty when the port never uses Cluster policy. */
  clusterEndpoints: readonly EndpointInfo[];
  /** Usable local endpoints for Local-policy traffic; empty when the port never uses Local policy. */
  localEndpoints: readonly EndpointInfo[];
  /** Union of the two lists: everything reachable from this node. */
  allReachable: readonly EndpointInfo[];
  /** The service has a usable endpoint somewhere in the cluster (even if none is reachable from here). */
  hasAnyEndpoints: boolean;
  /** Some local endpoint is ready. */
  hasLocalReady: boolean;
  /** No local endpoint is ready but some local one is serving and terminating (the fallback in use). */
  hasLocalServingTerminating: boolean;
}

/** Reachable via something other than its cluster IP (NodePort, external IP, load-balancer IP). */
export function externallyAccessible(svc: ServicePortInfo): boolean {
  return svc.nodePort !== null || svc.loadBalancerIPs.length > 0 || svc.externalIPs.length > 0;
}

/** Sends some traffic with Cluster policy (internal Cluster, or any external access: short-circuit). */
export function usesClusterEndpoints(svc: ServicePortInfo): boolean {
  return !svc.internalPolicyLocal || externallyAccessible(svc);
}

/** Sends some traffic with Local policy. */
export function usesLocalEndpoints(svc: ServicePortInfo): boolean {
  return svc.internalPolicyLocal || (svc.externalPolicyLocal && externallyAccessible(svc));
}

const servingTerminating = (ep: EndpointInfo): boolean => ep.serving && ep.terminating;

/** The hints cluster traffic follows: none (''), the node's own (forNodes) or its zone's (forZones). */
export type TopologyMode = '' | 'PreferSameNode' | 'PreferSameZone';

/** This node's `topology.kubernetes.io/zone` label; '' without a Node or the label. */
export function nodeZone(node: NodeInfo | null): string {
  return node?.labels[ZONE_LABEL] ?? '';
}

/**
 * The Service asks for topology-aware routing: spec.trafficDistribution is set, or the
 * topology-aware-hints / topology-mode annotation is neither empty nor `disabled`/`Disabled`
 * (kube-proxy accepts any other value, `Auto` included).
 */
export function topologyRequested(svc: ServicePortInfo): boolean {
  if (svc.trafficDistribution) return true;
  const a = svc.hintsAnnotation ?? '';
  return a !== '' && a !== 'disabled' && a !== 'Disabled';
}

/**
 * kube-proxy's topologyModeFromHints: PreferSameNode when every ready endpoint has node hints and
 * one names `nodeName`; else PreferSameZone when every ready endpoint has zone hints and one names
 * `zone`; else '' (no ready endpoint, a hint missing, no endpoint for this node or zone, or the
 * Service did not ask for topology).
 */
export function topologyMode(svc: ServicePortInfo, endpoints: readonly EndpointInfo[], nodeName: string, zone: string): TopologyMode {
  if (!topologyRequested(svc)) return '';
  let anyReady = false;
  let allNodeHints = true;
  let forNode = false;
  let allZoneHints = true;
  let forZone = false;
  for (const ep of endpoints) {
    if (!ep.ready) continue;
    anyReady = true;
    const nodes = ep.nodeHints ?? [];
    if (nodes.length === 0) allNodeHints = false;
    else if (nodeName !== '' && nodes.includes(nodeName)) forNode = true;
    const zones = ep.zoneHints ?? [];
    if (zones.length === 0) allZoneHints = false;
    else if (zone !== '' && zones.includes(zone)) forZone = true;
  }
  if (!anyReady) return '';
  if (allNodeHints && forNode) return 'PreferSameNode';
  if (allZoneHints && forZone) return 'PreferSameZone';
  return '';
}

/** The endpoint may take this node's cluster traffic under `mode` (no fall-back here). */
function availableForTopology(ep: EndpointInfo, mode: TopologyMode, nodeName: string, zone: string): boolean {
  if (mode === 'PreferSameNode') return (ep.nodeHints ?? []).includes(nodeName);
  if (mode === 'PreferSameZone') return (ep.zoneHints ?? []).includes(zone);
  return true;
}

/**
 * `list` filtered by `keep`: `list` itself when it keeps every one (mostly all are ready, and the
 * desired state then holds the tracker's own list, not a copy per Service port).
 */
export function kept<T>(list: readonly T[], keep: (t: T) => boolean): readonly T[] {
  return list.every(keep) ? list : list.filter(keep);
}

/**
 * Splits `endpoints` as kube-proxy does: ready endpoints, or (separately for cluster and local)
 * the serving-terminating ones when none is ready. Cluster endpoints are narrowed by topology
 * hints for this node (`nodeName`) and its `zone` (see topologyMode); Local-policy endpoints never
 * are. An endpoint is local when its `isLocal` is set or its nodeName is `nodeName`.
 */
export function categorizeEndpoints(endpoints: readonly EndpointInfo[], svc: ServicePortInfo, nodeName: string, zone = ''): CategorizedEndpoints {
  const isLocal = (ep: EndpointInfo): boolean => ep.isLocal || (nodeName !== '' && ep.nodeName === nodeName);
  let clusterEndpoints: readonly EndpointInfo[] = [];
  let hasAnyEndpoints = false;
  let mode: TopologyMode = '';
  const usesCluster = usesClusterEndpoints(svc);
  if (usesCluster) {
    mode = topologyMode(svc, endpoints, nodeName, zone);
    clusterEndpoints = kept(endpoints, (ep) => ep.ready && availableForTopology(ep, mode, nodeName, zone));
    // Topology already fell back when no ready endpoint matched: none is ready anywhere.
    if (clusterEndpoints.length === 0) clusterEndpoints = endpoints.filter(servingTerminating);
    hasAnyEndpoints = clusterEndpoints.length > 0;
  }
  const none = { localEndpoints: [], hasLocalReady: false, hasLocalServingTerminating: false };
  if (!usesLocalEndpoints(svc)) return { clusterEndpoints, allReachable: clusterEndpoints, hasAnyEndpoints, ...none };

  let hasLocalReady = false;
  let hasLocalServing = false;
  for (const ep of endpoints) {
    if (ep.ready) {
      hasAnyEndpoints = true;
      if (isLocal(ep)) hasLocalReady = true;
    } else if (servingTerminating(ep)) {
      hasAnyEndpoints = true;
      if (isLocal(ep)) hasLocalServing = true;
    }
  }
  let localEndpoints: readonly EndpointInfo[] = [];
  if (hasLocalReady) localEndpoints = endpoints.filter((ep) => isLocal(ep) && ep.ready);
  else if (hasLocalServing) localEndpoints = endpoints.filter((ep) => isLocal(ep) && servingTerminating(ep));
  const hasLocalServingTerminating = !hasLocalReady && hasLocalServing;
  const flags = { hasAnyEndpoints, hasLocalReady, hasLocalServingTerminating };

  if (!usesCluster) return { clusterEndpoints, localEndpoints, allReachable: localEndpoints, ...flags };
  // Without topology or the serving-terminating fallback, local ⊆ cluster (both are "ready").
  if (mode === '' && !hasLocalServingTerminating) return { clusterEndpoints, localEndpoints, allReachable: clusterEndpoints, ...flags };
  const seen = new Set(clusterEndpoints);
  const allReachable = [...clusterEndpoints, ...localEndpoints.filter((ep) => !seen.has(ep))];
  return { clusterEndpoints, localEndpoints, allReachable, ...flags };
}
