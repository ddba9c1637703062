// One Service → one ServicePortInfo per port (the proxy's model of it), or the reasons it is refused.
import { canonicalIp, familyOf, type Family } from '../model/ip.js';
import { objectKey, TOPOLOGY_ANNOTATIONS, type Service } from '../model/k8s.js';
import type { L4Protocol, ObjectError, ServicePortInfo } from '../model/service.js';
import { formatCidr, parseCidr } from './ipvs/desired-net.js';
import { schedulerFromAnnotations } from './ipvs/desired-scheduler.js';

/** Session affinity timeout when the Service gives none (kube-proxy's DefaultClientIPServiceAffinitySeconds). */
export const DEFAULT_AFFINITY_SECONDS = 10800;

/** A Kubernetes protocol name as the model's. */
export const lower = (p: 'TCP' | 'UDP' | 'SCTP'): L4Protocol => p.toLowerCase() as L4Protocol;

/** Canonical, family-checked cluster IPs (at most one per family), or the reasons they are not. */
function clusterIPsOf(svc: Service, errors: string[]): string[] {
  const { clusterIP, clusterIPs } = svc.spec;
  const raw = clusterIPs !== undefined && clusterIPs.length > 0 ? clusterIPs : clusterIP !== undefined ? [clusterIP] : [];
  const out: string[] = [];
  const families = new Set<Family>();
  for (const ip of raw) {
    const f = familyOf(ip);
    if (f === null) errors.push(`invalid cluster IP ${JSON.stringify(ip)}`);
    else if (families.has(f)) errors.push(`more than one ${f} cluster IP`);
    else {
      families.add(f);
      out.push(canonicalIp(ip));
    }
  }
  return out;
}

/** Canonical unique addresses, in first-seen order. */
function uniqueIPs(ips: Iterable<string>): string[] {
  return [...new Set(Array.from(ips, canonicalIp))];
}

/**
 * One ServicePortInfo per `spec.ports` entry. Headless (clusterIP None or unset) and ExternalName
 * Services give nothing, as kube-proxy skips them. Any problem (invalid cluster IP or source range,
 * unknown scheduler or flags) is reported and the whole Service gives no ports.
 */
export function servicePortsOf(svc: Service): { ports: ServicePortInfo[]; errors: ObjectError[] } {
  const { spec, metadata } = svc;
  const primary = spec.clusterIP ?? spec.clusterIPs?.[0];
  if (spec.type === 'ExternalName' || primary === undefined || primary === '' || primary === 'None') {
    return { ports: [], errors: [] };
  }
  const reasons: string[] = [];
  const clusterIPs = clusterIPsOf(svc, reasons);
  const ranges: string[] = [];
  for (const r of spec.loadBalancerSourceRanges) {
    const c = parseCidr(r);
    if (c === null) reasons.push(`invalid loadBalancerSourceRanges entry ${JSON.stringify(r)}`);
    else ranges.push(formatCidr(c));
  }
  const sched = schedulerFromAnnotations(metadata.annotations);
  reasons.push(...sched.errors);
  if (reasons.length > 0) {
    const object = `Service ${objectKey(svc)}`;
    return { ports: [], errors: reasons.map((reason) => ({ object, reason })) };
  }

  const type = spec.type;
  const external = type !== 'ClusterIP';
  const externalIPs = uniqueIPs(spec.externalIPs);
  // kube-proxy skips an ingress with ipMode Proxy: the load balancer rewrites the destination to a node.
  const loadBalancerIPs =
    type === 'LoadBalancer' ? uniqueIPs(svc.status.loadBalancer.ingress.flatMap((i) => (i.ip === undefined || i.ipMode === 'Proxy' ? [] : [i.ip]))) : [];
  // apiservice.ExternalPolicyLocal: eTP only matters for externally reachable Services.
  const externalPolicyLocal = spec.externalTrafficPolicy === 'Local' && (external || externalIPs.length > 0);
  const affinity =
    spec.sessionAffinity === 'ClientIP' ? spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_SECONDS : null;
  const healthCheckNodePort = type === 'LoadBalancer' && externalPolicyLocal ? spec.healthCheckNodePort ?? null : null;
  // kube-proxy: the deprecated topology-aware-hints annotation, when present, wins over topology-mode.
  const hintsKey = TOPOLOGY_ANNOTATIONS.find((a) => Object.hasOwn(metadata.annotations, a));
  const topology = { trafficDistribution: spec.trafficDistribution ?? null, hintsAnnotation: hintsKey ? metadata.annotations[hintsKey]! : '' };

  const ports = spec.ports.map(
    (p): ServicePortInfo => ({
      name: { namespace: metadata.namespace, name: metadata.name, port: p.name, protocol: lower(p.protocol) },
      type,
      clusterIPs,
      port: p.port,
      protocol: lower(p.protocol),
      nodePort: external ? p.nodePort ?? null : null,
      externalIPs,
      loadBalancerIPs,
      loadBalancerSourceRanges: ranges,
      externalPolicyLocal,
      internalPolicyLocal: spec.internalTrafficPolicy === 'Local',
      healthCheckNodePort,
      sessionAffinitySeconds: affinity,
      scheduler: sched.scheduler,
      schedulerFlags: sched.flags,
      ...topology,
    }),
  );
  return { ports, errors: [] };
}
