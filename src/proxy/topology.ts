// Which endpoints a service port may use from this node: kube-proxy's CategorizeEndpoints
// (pkg/proxy/topology.go). Topology hints are not modelled (EndpointSlice hints are not in our
// schema), so cluster traffic always uses every usable endpoint, as with hints absent.
import type { EndpointInfo, ServicePortInfo } from '../model/service.js';

/** The endpoints of one service port, split by traffic policy. */
export interface CategorizedEndpoints {
  /** Usable endpoints for Cluster-policy traffic; empty when the port never uses Cluster policy. */
  clusterEndpoints: EndpointInfo[];
  /** Usable local endpoints for Local-policy traffic; empty when the port never uses Local policy. */
  localEndpoints: EndpointInfo[];
  /** Union of the two lists: everything reachable from this node. */
  allReachable: EndpointInfo[];
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

/**
 * Splits `endpoints` as kube-proxy does: ready endpoints, or (separately for cluster and local)
 * the serving-terminating ones when none is ready. An endpoint is local when its `isLocal` is set
 * or its nodeName is `nodeName`.
 */
export function categorizeEndpoints(endpoints: readonly EndpointInfo[], svc: ServicePortInfo, nodeName: string): CategorizedEndpoints {
  const isLocal = (ep: EndpointInfo): boolean => ep.isLocal || (nodeName !== '' && ep.nodeName === nodeName);
  let clusterEndpoints: EndpointInfo[] = [];
  let hasAnyEndpoints = false;
  const usesCluster = usesClusterEndpoints(svc);
  if (usesCluster) {
    clusterEndpoints = endpoints.filter((ep) => ep.ready);
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
  let localEndpoints: EndpointInfo[] = [];
  if (hasLocalReady) localEndpoints = endpoints.filter((ep) => isLocal(ep) && ep.ready);
  else if (hasLocalServing) localEndpoints = endpoints.filter((ep) => isLocal(ep) && servingTerminating(ep));
  const hasLocalServingTerminating = !hasLocalReady && hasLocalServing;
  const flags = { hasAnyEndpoints, hasLocalReady, hasLocalServingTerminating };

  if (!usesCluster) return { clusterEndpoints, localEndpoints, allReachable: localEndpoints, ...flags };
  // Without the serving-terminating fallback, local ⊆ cluster (both are "ready").
  if (!hasLocalServingTerminating) return { clusterEndpoints, localEndpoints, allReachable: clusterEndpoints, ...flags };
  const seen = new Set(clusterEndpoints);
  const allReachable = [...clusterEndpoints, ...localEndpoints.filter((ep) => !seen.has(ep))];
  return { clusterEndpoints, localEndpoints, allReachable, ...flags };
}
