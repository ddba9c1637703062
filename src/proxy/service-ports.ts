// One Service → one ServicePortInfo per port (the proxy's model of it), or the reasons it is refused.
import { canonicalIp, familyOf, type Family } from '../model/ip.js';
import { objectKey, TOPOLOGY_ANNOTATIONS, type Service } from '../model/k8s.js';
import type { L4Protocol, ObjectError, ServicePortInfo } from '../model/service.js';
import { formatCidr, parseCidr } from './ipvs/desired-net.js';
import { schedulerFromAnnotations } from './ipvs/desired-scheduler.js';

/** Session affinity timeout when the Service gives none (kube-proxy's DefaultClientIPServiceAffinitySeconds). */
export const DEFAULT_AFFINITY_SECONDS = 10800;

const PROTOCOLS: Record<'TCP' | 'UDP' | 'SCTP', L4Protocol> = { TCP: 'tcp', UDP: 'udp', SCTP: 'sctp' };

/** A Kubernetes protocol name as the model's (one string each, not a lower-cased copy per port). */
export const lower = (p: 'TCP' | 'UDP' | 'SCTP'): L4Protocol => PROTOCOLS[p];

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

/**
 * One frozen empty list for every empty address, range and flag list of a ServicePortInfo: most
 * Services have no external IPs, load-balancer IPs, source ranges or flags, and an empty array is
 * 32 bytes each (the tracker holds one ServicePortInfo per port of every Service).
 */
const NONE = Object.freeze([]) as unknown as never[];

/** `list`, or the shared empty one; an exact-size copy (a list grown by push() keeps room for 17). */
const held = <T>(list: T[]): T[] => (list.length === 0 ? NONE : list.slice());

/** A ServicePortInfo read back from a snapshot (resume.ts) with its empty lists shared, as servicePortsOf makes them. */
export function heldPort(p: ServicePortInfo): ServicePortInfo {
  return {
    ...p,
    clusterIPs: held(p.clusterIPs),
    externalIPs: held(p.externalIPs),
    loadBalancerIPs: held(p.loadBalancerIPs),
    loadBalancerSourceRanges: held(p.loadBalancerSourceRanges),
    schedulerFlags: held(p.schedulerFlags),
  };
}

/** Canonical unique addresses, in first-seen order. */
function uniqueIPs(ips: Iterable<string>): string[] {
  return held([...new Set(Array.from(ips, canonicalIp))]);
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
  const clusterIPs = held(clusterIPsOf(svc, reasons));
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
    type === 'LoadBalancer' ? uniqueIPs(svc.status.loadBalancer.ingress.flatMap((i) => (i.ip === undefined || i.ipMode === 'Proxy' ? [] : [i.ip]))) : NONE;
  // apiservice.ExternalPolicyLocal: eTP only matters for externally reachable Services.
  const externalPolicyLocal = spec.externalTrafficPolicy === 'Local' && (external || externalIPs.length > 0);
  const affinity =
    spec.sessionAffinity === 'ClientIP' ? spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? DEFAULT_AFFINITY_SECONDS : null;
  const healthCheckNodePort = type === 'LoadBalancer' && externalPolicyLocal ? spec.healthCheckNodePort ?? null : null;
  // kube-proxy: the deprecated topology-aware-hints annotation, when present, wins over topology-mode.
  const hintsKey = TOPOLOGY_ANNOTATIONS.find((a) => Object.hasOwn(metadata.annotations, a));
  const trafficDistribution = spec.trafficDistribution ?? null;
  const hintsAnnotation = hintsKey ? metadata.annotations[hintsKey]! : '';
  const ranged = held(ranges);
  const schedulerFlags = held(sched.flags);

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
      loadBalancerSourceRanges: ranged,
      externalPolicyLocal,
      internalPolicyLocal: spec.internalTrafficPolicy === 'Local',
      healthCheckNodePort,
      sessionAffinitySeconds: affinity,
      scheduler: sched.scheduler,
      schedulerFlags,
      trafficDistribution,
      hintsAnnotation,
    }),
  );
  return { ports, errors: [] };
}
