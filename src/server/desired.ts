// The daemon's desired IPVS state with attribution, as served (read-only JSON) on the metrics
// address at /desired and joined with the kernel dump by `inspect`.
import type { Destination, VirtualService } from '../kernel/ipvs/types.js';
import { destinationId } from '../kernel/ipvs/types.js';
import { canonicalIp } from '../model/ip.js';
import type { EndpointInfo, ProxyState, ServicePortInfo } from '../model/service.js';

/** The path of the desired-state document on the metrics server. */
export const DESIRED_PATH = '/desired';

/** Version of the desired-state document; bumped on incompatible changes. */
export const DESIRED_VERSION = 1;

/** Which address of its Service a virtual server listens on. */
export type VipRole = 'clusterIP' | 'externalIP' | 'loadBalancerIP' | 'nodePort';

/** The Service port that owns a virtual server, as the operator knows it. */
export interface Attribution {
  /** `namespace/name:port` (the port's name, or its number when unnamed). */
  service: string;
  namespace: string;
  name: string;
  /** The Service port's name ('' when unnamed). */
  portName: string;
  protocol: string;
  type: ServicePortInfo['type'];
  vip: VipRole;
  externalTrafficPolicy: 'Cluster' | 'Local';
  internalTrafficPolicy: 'Cluster' | 'Local';
  scheduler: string;
  /** `annotation` when the Service's scheduler annotation chose it, else `flag` (--ipvs-scheduler). */
  schedulerSource: 'flag' | 'annotation';
  sessionAffinitySeconds: number | null;
}

/** The state of an endpoint behind a real server. */
export type EndpointState = 'ready' | 'serving-terminating' | 'not-ready' | 'draining';

/** A wanted real server with its endpoint's state. */
export interface DesiredDestination extends Destination {
  state: EndpointState;
  /** The endpoint's node (null when the slice does not say). */
  node: string | null;
  local: boolean;
}

/** One wanted virtual server. */
export interface DesiredVirtualServerDoc {
  /** serviceId of the virtual server, e.g. `tcp/10.96.0.10:80`. */
  id: string;
  service: VirtualService;
  owner: Attribution | null;
  destinations: DesiredDestination[];
  /** Real servers removed from the Service, kept at weight 0 until their connections drain. */
  draining: Array<{ address: string; port: number; since: number }>;
}

/** The document served at DESIRED_PATH. */
export interface DesiredStateDoc {
  kind: 'DesiredState';
  version: typeof DESIRED_VERSION;
  node: string;
  defaultScheduler: string;
  virtualServers: DesiredVirtualServerDoc[];
}

/** What the endpoint reads from the IPVS proxier (see IpvsProxier.desiredView); never mutated. */
export interface DesiredView {
  virtualServers: ReadonlyMap<string, { service: VirtualService; destinations: readonly Destination[]; owner: string }>;
  state: ProxyState;
  draining: ReadonlyMap<string, ReadonlyMap<string, { since: number }>>;
}

/** Splits a portNameKey `ns/name:port/protocol`. */
export function parsePortKey(key: string): { namespace: string; name: string; portName: string; protocol: string } {
  const slash = key.indexOf('/');
  const colon = key.indexOf(':', slash);
  const last = key.lastIndexOf('/');
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1, colon), portName: key.slice(colon + 1, last), protocol: key.slice(last + 1) };
}

function roleOf(svc: ServicePortInfo, vs: VirtualService): VipRole {
  const a = vs.address ?? '';
  const same = (ips: readonly string[]) => ips.some((ip) => ip === a || (ip.includes(':') && canonicalIp(ip) === a));
  if (same(svc.clusterIPs) && vs.port === svc.port) return 'clusterIP';
  if (same(svc.externalIPs) && vs.port === svc.port) return 'externalIP';
  if (same(svc.loadBalancerIPs) && vs.port === svc.port) return 'loadBalancerIP';
  return 'nodePort';
}

/** Attribution of a virtual server owned by `svc`. */
export function attribution(svc: ServicePortInfo, vs: VirtualService, defaultScheduler: string): Attribution {
  const n = svc.name;
  return {
    service: `${n.namespace}/${n.name}:${n.port === '' ? svc.port : n.port}`,
    namespace: n.namespace,
    name: n.name,
    portName: n.port,
    protocol: svc.protocol,
    type: svc.type,
    vip: roleOf(svc, vs),
    externalTrafficPolicy: svc.externalPolicyLocal ? 'Local' : 'Cluster',
    internalTrafficPolicy: svc.internalPolicyLocal ? 'Local' : 'Cluster',
    scheduler: svc.scheduler ?? defaultScheduler,
    schedulerSource: svc.scheduler === null ? 'flag' : 'annotation',
    sessionAffinitySeconds: svc.sessionAffinitySeconds,
  };
}

/** The state of one endpoint, as the Service's EndpointSlices report it. */
export function endpointState(ep: EndpointInfo | undefined): EndpointState {
  if (!ep) return 'not-ready';
  if (ep.ready) return 'ready';
  return ep.serving && ep.terminating ? 'serving-terminating' : 'not-ready';
}

/** Builds the desired-state document (cost: one pass over the desired virtual servers). */
export function desiredStateDoc(view: DesiredView, node: string, defaultScheduler: string): DesiredStateDoc {
  const virtualServers: DesiredVirtualServerDoc[] = [];
  for (const [id, vs] of view.virtualServers) {
    const svc = view.state.services.get(vs.owner);
    const eps = new Map((view.state.endpoints.get(vs.owner) ?? []).map((ep) => [destinationId(ep), ep]));
    virtualServers.push({
      id,
      service: vs.service,
      owner: svc ? attribution(svc, vs.service, defaultScheduler) : null,
      destinations: vs.destinations.map((d) => {
        const ep = eps.get(destinationId(d));
        const { address, port, forward, weight, upperThreshold, lowerThreshold } = d; // d may be a tracker Endpoint: its own fields are not these
        return { address, port, forward, weight, upperThreshold, lowerThreshold, state: endpointState(ep), node: ep?.nodeName ?? null, local: ep?.isLocal ?? false };
      }),
      draining: [...(view.draining.get(id) ?? new Map<string, { since: number }>())].map(([did, e]) => {
        const colon = did.lastIndexOf(':');
        return { address: did.slice(0, colon).replace(/^\[|\]$/g, ''), port: Number(did.slice(colon + 1)), since: e.since };
      }),
    });
  }
  virtualServers.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
  return { kind: 'DesiredState', version: DESIRED_VERSION, node, defaultScheduler, virtualServers };
}
