// Services, EndpointSlices and the Node in; the proxy's model (ServicePortInfo per port, merged
// endpoints per port) out, with the set of port keys that changed since the last sync. Work per
// event is proportional to the object (and, for a slice, to its service's slices).
import { destinationId } from '../kernel/ipvs/types.js';
import { canonicalIp, familyOf, type Family } from '../model/ip.js';
import { objectKey, SERVICE_NAME_LABEL, TOPOLOGY_ANNOTATIONS, type EndpointSlice, type Node, type Service } from '../model/k8s.js';
import {
  portNameKey,
  type EndpointInfo,
  type L4Protocol,
  type NodeInfo,
  type ObjectError,
  type ProxyState,
  type ServicePortInfo,
} from '../model/service.js';
import { formatCidr, parseCidr } from './ipvs/desired-net.js';
import { schedulerFromAnnotations } from './ipvs/desired-scheduler.js';
import { nodeZone } from './topology.js';

/**
 * This module's file name: a bundle chunk's carries its content hash, so it names the code that
 * derived a snapshot's model (source/resume.ts).
 */
export const TRACKER_BUILD = import.meta.url.slice(import.meta.url.lastIndexOf('/') + 1);

/** Session affinity timeout when the Service gives none (kube-proxy's DefaultClientIPServiceAffinitySeconds). */
export const DEFAULT_AFFINITY_SECONDS = 10800;

const lower = (p: 'TCP' | 'UDP' | 'SCTP'): L4Protocol => p.toLowerCase() as L4Protocol;

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

/** Problems with one EndpointSlice that make it (or some of its endpoints) ignored. */
export function sliceErrors(slice: EndpointSlice): ObjectError[] {
  const object = `EndpointSlice ${objectKey(slice)}`;
  if (slice.addressType === 'FQDN') return [];
  if (!slice.metadata.labels[SERVICE_NAME_LABEL]) return [{ object, reason: `no ${SERVICE_NAME_LABEL} label` }];
  const want: Family = slice.addressType === 'IPv4' ? 'ipv4' : 'ipv6';
  const errors: ObjectError[] = [];
  for (const ep of slice.endpoints) {
    const a = ep.addresses[0]!;
    if (familyOf(a) !== want) errors.push({ object, reason: `endpoint address ${JSON.stringify(a)} is not an ${slice.addressType} address` });
  }
  return errors;
}

/** Sorted unique hint names ([] for none). */
// One shared (frozen) empty list for the endpoints without hints: two arrays fewer per endpoint.
const NO_HINTS = Object.freeze([]) as unknown as string[];

function hintNames(hints: ReadonlyArray<{ name: string }> | undefined): string[] {
  return hints === undefined || hints.length === 0 ? NO_HINTS : [...new Set(hints.map((h) => h.name))].sort();
}

/**
 * Node and zone names, one string each: every endpoint names its node and zone, and a cluster has
 * a few thousand of each at most, where the objects that bring them (decoded lists, manifests)
 * carry one copy per endpoint (at 10,000 × 10 from manifests: 98,000 node-name strings, 2.2 MiB).
 * Cleared when it holds more than NAMES_MAX, so names of deleted nodes do not pile up.
 */
const NAMES = new Map<string, string>();
const NAMES_MAX = 20_000;

function sharedName(name: string | undefined): string | null {
  if (name === undefined) return null;
  const known = NAMES.get(name);
  if (known !== undefined) return known;
  if (NAMES.size >= NAMES_MAX) NAMES.clear();
  NAMES.set(name, name);
  return name;
}

/** Keeps `info` under `id` unless a non-terminating endpoint holds it already (kube-proxy's rule for duplicates). */
function keep(set: Map<string, EndpointInfo>, id: string, info: EndpointInfo): void {
  if (!set.has(id) || !info.terminating) set.set(id, info);
}

const byId = (a: [string, EndpointInfo], b: [string, EndpointInfo]): number => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0);

/** Endpoint lists by port key, each sorted by destination id; empty lists dropped. */
function sortedLists(byPort: Map<string, Map<string, EndpointInfo>>): Map<string, EndpointInfo[]> {
  const out = new Map<string, EndpointInfo[]>();
  for (const [key, set] of byPort) {
    if (set.size === 0) continue;
    out.set(key, [...set.entries()].sort(byId).map((p) => p[1]));
  }
  return out;
}

const NO_ENDPOINTS: ReadonlyMap<string, EndpointInfo[]> = new Map();

const sameHints = (a: readonly string[] | undefined, b: readonly string[] | undefined): boolean =>
  a === b || (a !== undefined && b !== undefined && a.length === b.length && a.every((h, i) => h === b[i]));

function sameEndpoint(a: EndpointInfo, b: EndpointInfo): boolean {
  return (
    a.address === b.address &&
    a.port === b.port &&
    a.family === b.family &&
    a.ready === b.ready &&
    a.serving === b.serving &&
    a.terminating === b.terminating &&
    a.nodeName === b.nodeName &&
    a.zone === b.zone &&
    a.isLocal === b.isLocal &&
    sameHints(a.zoneHints, b.zoneHints) &&
    sameHints(a.nodeHints, b.nodeHints)
  );
}

/**
 * The endpoints of one slice per port key of Service `namespace/name` (what the tracker keeps of a
 * slice). What did not change since `prev` (the slice's previous lists) is kept as it was: its
 * port-key strings and EndpointInfo objects. A slice update usually changes one endpoint of many;
 * without this every unchanged endpoint would be a fresh copy (and its address a fresh string)
 * beside the one the programmed state still holds.
 */
function sliceEndpoints(namespace: string, name: string, slice: EndpointSlice, nodeName: string, prev: ReadonlyMap<string, EndpointInfo[]> = NO_ENDPOINTS): Map<string, EndpointInfo[]> {
  if (slice.addressType === 'FQDN') return new Map();
  const byPort = new Map<string, Map<string, EndpointInfo>>();
  const family: Family = slice.addressType === 'IPv4' ? 'ipv4' : 'ipv6';
  for (const sp of slice.ports) {
    if (sp.port === undefined) continue;
    let key = portNameKey({ namespace, name, port: sp.name, protocol: lower(sp.protocol) });
    const before = prev.get(key);
    if (before !== undefined) for (const k of prev.keys()) if (k === key) key = k; // the string kept since, not a copy
    let set = byPort.get(key);
    if (set === undefined) byPort.set(key, (set = new Map()));
    // One list holds one port: its endpoints differ by address.
    let had: Map<string, EndpointInfo> | undefined;
    if (before !== undefined && before.length > 0) {
      had = new Map();
      for (const ep of before) had.set(ep.address, ep);
    }
    for (const ep of slice.endpoints) {
      const raw = ep.addresses[0]!;
      if (familyOf(raw) !== family) continue;
      const c = ep.conditions;
      const ready = c.ready ?? true;
      const info: EndpointInfo = {
        address: canonicalIp(raw),
        port: sp.port,
        family,
        ready,
        serving: c.serving ?? ready,
        terminating: c.terminating ?? false,
        nodeName: sharedName(ep.nodeName),
        zone: sharedName(ep.zone),
        isLocal: nodeName !== '' && ep.nodeName === nodeName,
        zoneHints: hintNames(ep.hints?.forZones),
        nodeHints: hintNames(ep.hints?.forNodes),
      };
      const h = had?.get(info.address);
      const kept = h !== undefined && sameEndpoint(h, info) ? h : info;
      keep(set, destinationId(kept), kept);
    }
  }
  return sortedLists(byPort);
}

/**
 * Merges per-slice endpoint lists (in slice key order) into one list per port key, sorted by
 * destination id. A single slice's lists are returned as they are (shared, not copied).
 */
function mergeSlices(perSlice: ReadonlyArray<ReadonlyMap<string, EndpointInfo[]>>): ReadonlyMap<string, EndpointInfo[]> {
  if (perSlice.length === 1) return perSlice[0]!;
  const byPort = new Map<string, Map<string, EndpointInfo>>();
  for (const lists of perSlice) {
    for (const [key, eps] of lists) {
      let set = byPort.get(key);
      if (set === undefined) byPort.set(key, (set = new Map()));
      for (const ep of eps) keep(set, destinationId(ep), ep);
    }
  }
  return sortedLists(byPort);
}

/**
 * Merges the slices of Service `namespace/name` into endpoints per port key: slice ports match
 * Service ports by name and protocol, the first address of each endpoint is used (as kube-proxy),
 * duplicates keep the non-terminating one. Conditions: ready defaults to true, serving to ready,
 * terminating to false. FQDN slices and addresses not of the slice's type are ignored.
 */
export function endpointsForService(
  namespace: string,
  name: string,
  slices: Iterable<EndpointSlice>,
  nodeName: string,
): Map<string, EndpointInfo[]> {
  return new Map(mergeSlices(Array.from(slices, (sl) => sliceEndpoints(namespace, name, sl, nodeName))));
}

const same = (a: unknown, b: unknown): boolean => (a === undefined || b === undefined ? a === b : JSON.stringify(a) === JSON.stringify(b));

/** Two endpoint lists are equal, element by element (no JSON of both per slice event). */
const sameEndpoints = (a: readonly EndpointInfo[] | undefined, b: readonly EndpointInfo[]): boolean =>
  a === b || (a !== undefined && a.length === b.length && a.every((ep, i) => ep === b[i] || sameEndpoint(ep, b[i]!)));

/** `namespace/name` of the Service a slice belongs to, or null when it has none (or is FQDN). */
function serviceOfSlice(slice: EndpointSlice): string | null {
  const name = slice.metadata.labels[SERVICE_NAME_LABEL];
  if (!name || slice.addressType === 'FQDN') return null;
  return `${slice.metadata.namespace}/${name}`;
}

/**
 * One endpoint in a tracker snapshot: address, port, flags (ready 1, serving 2, terminating 4,
 * local 8, IPv6 16), node, zone, then the zone and node hints when there are any.
 */
type PackedEndpoint = [string, number, number, string | null, string | null, string[]?, string[]?];

/**
 * What a ChangeTracker holds, as plain JSON values (see ChangeTracker.snapshot()): a head (the
 * build that took it, the Node) and one entry per Service, slice, problem and uid, so that a
 * restore can take them one by one (each parsed and taken while young: nothing is held twice).
 */
export interface TrackerSnapshot {
  /** TRACKER_BUILD of the tracker that took it: another build's model is not restored. */
  build: string;
  node: NodeInfo | null;
}

/** One entry of a snapshot: a Service's accepted ports or problems, a uid, a slice's endpoints or problems. */
export type TrackerEntry =
  | ['service', string, ServicePortInfo[]]
  | ['serviceErrors', string, ObjectError[]]
  | ['uid', string, string]
  | ['slice', string, string | null, Array<[string, PackedEndpoint[]]>]
  | ['sliceErrors', string, ObjectError[]];

function packEndpoint(ep: EndpointInfo): PackedEndpoint {
  const flags = (ep.ready ? 1 : 0) | (ep.serving ? 2 : 0) | (ep.terminating ? 4 : 0) | (ep.isLocal ? 8 : 0) | (ep.family === 'ipv6' ? 16 : 0);
  const p: PackedEndpoint = [ep.address, ep.port, flags, ep.nodeName, ep.zone];
  const zoneHints = ep.zoneHints ?? NO_HINTS;
  const nodeHints = ep.nodeHints ?? NO_HINTS;
  if (zoneHints.length > 0 || nodeHints.length > 0) p.push(zoneHints, nodeHints);
  return p;
}

function unpackEndpoint([address, port, flags, nodeName, zone, zoneHints, nodeHints]: PackedEndpoint): EndpointInfo {
  return {
    address,
    port,
    family: flags & 16 ? 'ipv6' : 'ipv4',
    ready: (flags & 1) !== 0,
    serving: (flags & 2) !== 0,
    terminating: (flags & 4) !== 0,
    nodeName: sharedName(nodeName ?? undefined),
    zone: sharedName(zone ?? undefined),
    isLocal: (flags & 8) !== 0,
    zoneHints: zoneHints?.length ? zoneHints : NO_HINTS,
    nodeHints: nodeHints?.length ? nodeHints : NO_HINTS,
  };
}

/**
 * Tracks Services, EndpointSlices and this Node (same calls as SourceHandler) and keeps the
 * proxy's model. `state()` returns live views, valid until the next event.
 */
export class ChangeTracker {
  readonly #nodeName: string;
  /** Accepted ports per Service key (the last good version when the current one has errors). */
  readonly #services = new Map<string, ServicePortInfo[]>();
  readonly #ports = new Map<string, ServicePortInfo>();
  readonly #serviceErrors = new Map<string, ObjectError[]>();
  /** Per slice: its Service and its endpoints per port key (the slice object itself is not kept). */
  readonly #slices = new Map<string, { service: string | null; endpoints: ReadonlyMap<string, EndpointInfo[]> }>();
  readonly #slicesByService = new Map<string, Set<string>>();
  readonly #sliceErrors = new Map<string, ObjectError[]>();
  readonly #endpointKeys = new Map<string, string[]>();
  readonly #endpoints = new Map<string, readonly EndpointInfo[]>();
  #node: NodeInfo | null = null;
  #changed = new Set<string>();
  /** Each Service's uid (Events name the object by it: kubectl describe matches on it). */
  readonly #uids = new Map<string, string>();

  /** A tracker for the node named `nodeName` (endpoints there are local). */
  constructor(nodeName: string) {
    this.#nodeName = nodeName;
  }

  /** A Service was added or changed (`svc`) or deleted (null). `key` is `namespace/name`. */
  onService(key: string, svc: Service | null): void {
    if (svc?.metadata.uid) this.#uids.set(key, svc.metadata.uid);
    else this.#uids.delete(key);
    const old = this.#services.get(key) ?? [];
    let ports: ServicePortInfo[] = [];
    if (svc !== null) {
      const r = servicePortsOf(svc);
      if (r.errors.length > 0) {
        this.#serviceErrors.set(key, r.errors);
        return; // the last good version (if any) stays programmed
      }
      ports = r.ports;
    }
    this.#serviceErrors.delete(key);
    const next = new Map(ports.map((p) => [portNameKey(p.name), p]));
    for (const p of old) {
      const k = portNameKey(p.name);
      if (!next.has(k)) {
        this.#ports.delete(k);
        this.#changed.add(k);
      }
    }
    for (const [k, p] of next) {
      if (!same(this.#ports.get(k), p)) {
        this.#ports.set(k, p);
        this.#changed.add(k);
      }
    }
    if (ports.length > 0) this.#services.set(key, [...next.values()]);
    else this.#services.delete(key);
  }

  /** An EndpointSlice was added or changed (`slice`) or deleted (null). `key` is `namespace/name`. */
  onEndpointSlice(key: string, slice: EndpointSlice | null): void {
    const prev = this.#slices.get(key);
    const service = slice === null ? null : serviceOfSlice(slice);
    const errors = slice === null ? [] : sliceErrors(slice);
    if (errors.length > 0) this.#sliceErrors.set(key, errors);
    else this.#sliceErrors.delete(key);
    if (prev?.service != null) this.#slicesByService.get(prev.service)?.delete(key);
    if (slice === null) this.#slices.delete(key);
    else {
      const slash = service?.indexOf('/') ?? -1;
      const endpoints = service === null ? NO_ENDPOINTS : sliceEndpoints(service.slice(0, slash), service.slice(slash + 1), slice, this.#nodeName, prev?.endpoints);
      this.#slices.set(key, { service: service === prev?.service ? prev.service : service, endpoints });
    }
    if (service !== null) {
      let set = this.#slicesByService.get(service);
      if (set === undefined) this.#slicesByService.set(service, (set = new Set()));
      set.add(key);
    }
    if (prev?.service != null && prev.service !== service) this.#recompute(prev.service);
    if (service !== null) this.#recompute(service);
  }

  /**
   * This node was added, changed or deleted; events for other nodes are ignored. A change of its
   * zone label marks every port whose endpoints carry zone hints (topology may now pick others).
   */
  onNode(node: Node | null): void {
    if (node !== null && node.metadata.name !== this.#nodeName) return;
    const zone = nodeZone(this.#node);
    this.#node =
      node === null
        ? null
        : { name: node.metadata.name, addresses: node.status.addresses.map((a) => a.address), labels: { ...node.metadata.labels } };
    if (nodeZone(this.#node) === zone) return;
    for (const [k, eps] of this.#endpoints) {
      if (eps.some((ep) => (ep.zoneHints ?? []).length > 0)) this.#changed.add(k);
    }
  }

  #recompute(service: string): void {
    const keys = [...(this.#slicesByService.get(service) ?? [])].sort();
    if (keys.length === 0) this.#slicesByService.delete(service);
    const next = keys.length === 0 ? NO_ENDPOINTS : mergeSlices(keys.map((k) => this.#slices.get(k)!.endpoints));
    for (const k of this.#endpointKeys.get(service) ?? []) {
      if (!next.has(k)) {
        this.#endpoints.delete(k);
        this.#changed.add(k);
      }
    }
    for (const [k, eps] of next) {
      if (!sameEndpoints(this.#endpoints.get(k), eps)) {
        this.#endpoints.set(k, eps);
        this.#changed.add(k);
      }
    }
    if (next.size > 0) this.#endpointKeys.set(service, [...next.keys()]);
    else this.#endpointKeys.delete(service);
  }

  /** The current model (live maps; do not keep them across events). */
  state(): ProxyState {
    return { services: this.#ports, endpoints: this.#endpoints, node: this.#node };
  }

  /** Port keys whose ServicePortInfo or endpoints changed (or were removed) since the last call. */
  takeChanged(): Set<string> {
    const c = this.#changed;
    this.#changed = new Set();
    return c;
  }

  /** How many Services (with ports accepted) and EndpointSlices are held. */
  counts(): { services: number; endpointSlices: number } {
    return { services: this.#services.size, endpointSlices: this.#slices.size };
  }

  /** The uid of the Service `key` (`namespace/name`) as last delivered, if it had one. */
  uidOf(key: string): string | undefined {
    return this.#uids.get(key);
  }

  /**
   * Everything the tracker holds, for a daemon that restarts (source/resume.ts): the head, and
   * the entries as they are read (plain JSON values). restore() takes them back.
   */
  snapshot(): { head: TrackerSnapshot; entries: Iterable<TrackerEntry> } {
    return { head: { build: TRACKER_BUILD, node: this.#node }, entries: this.#entries() };
  }

  *#entries(): Generator<TrackerEntry> {
    for (const [key, ports] of this.#services) yield ['service', key, ports];
    for (const [key, errors] of this.#serviceErrors) yield ['serviceErrors', key, errors];
    for (const [key, uid] of this.#uids) yield ['uid', key, uid];
    for (const [key, s] of this.#slices) yield ['slice', key, s.service, Array.from(s.endpoints, ([k, eps]) => [k, eps.map(packEndpoint)] as [string, PackedEndpoint[]])];
    for (const [key, errors] of this.#sliceErrors) yield ['sliceErrors', key, errors];
  }

  /**
   * Takes a snapshot() back into an empty tracker, entry by entry (add()), then done(): every
   * port key it holds counts as changed (the first sync compares them all with the kernel).
   * Throws on a tracker that has taken objects.
   */
  restore(head: TrackerSnapshot): { add(entry: TrackerEntry): void; done(): void } {
    if (this.#services.size + this.#slices.size + this.#serviceErrors.size + this.#sliceErrors.size > 0 || this.#node !== null) {
      throw new Error('ChangeTracker.restore: the tracker is not empty');
    }
    this.#node = head.node;
    const add = (e: TrackerEntry): void => {
      switch (e[0]) {
        case 'service':
          this.#services.set(e[1], e[2]);
          for (const p of e[2]) {
            const k = portNameKey(p.name);
            this.#ports.set(k, p);
            this.#changed.add(k);
          }
          break;
        case 'serviceErrors':
          this.#serviceErrors.set(e[1], e[2]);
          break;
        case 'uid':
          this.#uids.set(e[1], e[2]);
          break;
        case 'slice': {
          const [, key, service, lists] = e;
          this.#slices.set(key, { service, endpoints: new Map(lists.map(([k, eps]) => [k, eps.map(unpackEndpoint)])) });
          if (service === null) break;
          let set = this.#slicesByService.get(service);
          if (set === undefined) this.#slicesByService.set(service, (set = new Set()));
          set.add(key);
          break;
        }
        case 'sliceErrors':
          this.#sliceErrors.set(e[1], e[2]);
          break;
      }
    };
    return { add, done: () => this.#slicesByService.forEach((_, service) => this.#recompute(service)) };
  }

  /** Current per-object problems (Services not programmed, slices or endpoints ignored). */
  errors(): ObjectError[] {
    return [...this.#serviceErrors.values(), ...this.#sliceErrors.values()].flat();
  }
}
