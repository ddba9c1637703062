// Services, EndpointSlices and the Node in; the proxy's model (ServicePortInfo per port, merged
// endpoints per port) out, with the set of port keys that changed since the last sync. Work per
// event is proportional to the object (and, for a slice, to its service's slices).
import type { EndpointSlice, Node, Service } from '../model/k8s.js';
import { portNameKey, type EndpointInfo, type NodeInfo, type ObjectError, type ProxyState, type ServicePortInfo } from '../model/service.js';
import { heldPort, servicePortsOf } from './service-ports.js';
import { Endpoint, endpointFlags, endpointLists, mergeSlices, NO_ENDPOINTS, NO_HINTS, sameEndpoints, serviceOfSlice, sharedName, sliceEndpoints, sliceErrors } from './slice-endpoints.js';
import { nodeZone } from './topology.js';

/**
 * This module's file name: a bundle chunk's carries its content hash, so it names the code that
 * derived a snapshot's model (source/resume.ts; service-ports.ts and slice-endpoints.ts are only
 * imported here, so they share its chunk).
 */
export const TRACKER_BUILD = import.meta.url.slice(import.meta.url.lastIndexOf('/') + 1);

const same = (a: unknown, b: unknown): boolean => (a === undefined || b === undefined ? a === b : JSON.stringify(a) === JSON.stringify(b));

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
  const p: PackedEndpoint = [ep.address, ep.port, endpointFlags(ep.ready, ep.serving, ep.terminating, ep.isLocal, ep.family), ep.nodeName, ep.zone];
  const zoneHints = ep.zoneHints ?? NO_HINTS;
  const nodeHints = ep.nodeHints ?? NO_HINTS;
  if (zoneHints.length > 0 || nodeHints.length > 0) p.push(zoneHints, nodeHints);
  return p;
}

const unpackEndpoint = ([address, port, flags, nodeName, zone, zoneHints, nodeHints]: PackedEndpoint): EndpointInfo =>
  new Endpoint(address, port, flags, sharedName(nodeName ?? undefined), sharedName(zone ?? undefined), zoneHints, nodeHints);

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
  /** The slice keys of each Service: one key as itself (most Services have one slice), more as a Set. */
  readonly #slicesByService = new Map<string, string | Set<string>>();
  readonly #sliceErrors = new Map<string, ObjectError[]>();
  /** The port keys with endpoints of each Service (one as itself). */
  readonly #endpointKeys = new Map<string, string | string[]>();
  readonly #endpoints = new Map<string, readonly EndpointInfo[]>();
  #node: NodeInfo | null = null;
  #changed = new Set<string>();
  /** Services and EndpointSlices delivered since the last takeChanged() (kube-proxy's *_changes_pending). */
  #pendingServices = new Set<string>();
  #pendingSlices = new Set<string>();
  /** Each Service's uid (Events name the object by it: kubectl describe matches on it). */
  readonly #uids = new Map<string, string>();

  /** A tracker for the node named `nodeName` (endpoints there are local). */
  constructor(nodeName: string) {
    this.#nodeName = nodeName;
  }

  /** A Service was added or changed (`svc`) or deleted (null). `key` is `namespace/name`. */
  onService(key: string, svc: Service | null): void {
    this.#pendingServices.add(key);
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
    this.#pendingSlices.add(key);
    const prev = this.#slices.get(key);
    const service = slice === null ? null : serviceOfSlice(slice);
    const errors = slice === null ? [] : sliceErrors(slice);
    if (errors.length > 0) this.#sliceErrors.set(key, errors);
    else this.#sliceErrors.delete(key);
    if (prev?.service != null) this.#dropSlice(prev.service, key);
    if (slice === null) this.#slices.delete(key);
    else {
      const slash = service?.indexOf('/') ?? -1;
      const endpoints = service === null ? NO_ENDPOINTS : sliceEndpoints(service.slice(0, slash), service.slice(slash + 1), slice, this.#nodeName, prev?.endpoints);
      this.#slices.set(key, { service: service === prev?.service ? prev.service : service, endpoints });
    }
    if (service !== null) this.#addSlice(service, key);
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

  #addSlice(service: string, key: string): void {
    const had = this.#slicesByService.get(service);
    if (had === undefined) this.#slicesByService.set(service, key);
    else if (typeof had !== 'string') had.add(key);
    else if (had !== key) this.#slicesByService.set(service, new Set([had, key]));
  }

  #dropSlice(service: string, key: string): void {
    const had = this.#slicesByService.get(service);
    if (had === key) this.#slicesByService.delete(service);
    else if (typeof had === 'object' && had.delete(key) && had.size === 1) this.#slicesByService.set(service, had.values().next().value!);
  }

  #recompute(service: string): void {
    const held = this.#slicesByService.get(service);
    const keys = held === undefined ? [] : typeof held === 'string' ? [held] : [...held].sort();
    const next = keys.length === 0 ? NO_ENDPOINTS : mergeSlices(keys.map((k) => this.#slices.get(k)!.endpoints));
    const before = this.#endpointKeys.get(service) ?? [];
    for (const k of typeof before === 'string' ? [before] : before) {
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
    if (next.size === 0) this.#endpointKeys.delete(service);
    else this.#endpointKeys.set(service, next.size === 1 ? next.keys().next().value! : [...next.keys()]);
  }

  /** The current model (live maps; do not keep them across events). */
  state(): ProxyState {
    return { services: this.#ports, endpoints: this.#endpoints, node: this.#node };
  }

  /** Port keys whose ServicePortInfo or endpoints changed (or were removed) since the last call. */
  takeChanged(): Set<string> {
    const c = this.#changed;
    this.#changed = new Set();
    this.#pendingServices.clear();
    this.#pendingSlices.clear();
    return c;
  }

  /** How many Services (with ports accepted) and EndpointSlices are held. */
  counts(): { services: number; endpointSlices: number; pendingServices: number; pendingSlices: number } {
    return { services: this.#services.size, endpointSlices: this.#slices.size, pendingServices: this.#pendingServices.size, pendingSlices: this.#pendingSlices.size };
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
        case 'service': {
          const ports = e[2].map(heldPort);
          this.#services.set(e[1], ports);
          for (const p of ports) {
            const k = portNameKey(p.name);
            this.#ports.set(k, p);
            this.#changed.add(k);
          }
          break;
        }
        case 'serviceErrors':
          this.#serviceErrors.set(e[1], e[2]);
          break;
        case 'uid':
          this.#uids.set(e[1], e[2]);
          break;
        case 'slice': {
          const [, key, service, lists] = e;
          this.#slices.set(key, { service, endpoints: endpointLists(new Map(lists.map(([k, eps]) => [k, eps.map(unpackEndpoint)]))) });
          if (service !== null) this.#addSlice(service, key);
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
