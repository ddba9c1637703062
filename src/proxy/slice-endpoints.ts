// EndpointSlices → endpoints per service port key: one slice's lists, their merge, and the
// comparisons that keep unchanged endpoints as the same objects.
import { destinationId, type Destination } from '../kernel/ipvs/types.js';
import { canonicalIp, familyOf, type Family } from '../model/ip.js';
import { objectKey, SERVICE_NAME_LABEL, type EndpointSlice } from '../model/k8s.js';
import { portNameKey, type EndpointInfo, type ObjectError } from '../model/service.js';
import { lower } from './service-ports.js';

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

/** One shared (frozen) empty list for the endpoints without hints: two arrays fewer per endpoint. */
export const NO_HINTS = Object.freeze([]) as unknown as string[];

/** EndpointInfo's booleans and family as one number (Endpoint.flags): ready 1, serving 2, terminating 4, local 8, IPv6 16. */
export function endpointFlags(ready: boolean, serving: boolean, terminating: boolean, isLocal: boolean, family: Family): number {
  return (ready ? 1 : 0) | (serving ? 2 : 0) | (terminating ? 4 : 0) | (isLocal ? 8 : 0) | (family === 'ipv6' ? 16 : 0);
}

/**
 * An EndpointInfo in six fields: the booleans and the family are one number, the two hint lists
 * one field (null without hints). The tracker holds one per endpoint (half a million at 50,000
 * Services x 10), so each field less is 4 MiB of heap there. It is also the real server IPVS mode
 * programs for the endpoint (kube-proxy's: masquerade, weight 1, no thresholds; those four on the
 * prototype), so the desired and observed states hold no second object per endpoint.
 */
export class Endpoint implements EndpointInfo, Destination {
  readonly #hints: readonly [string[], string[]] | null;
  constructor(
    readonly address: string,
    readonly port: number,
    readonly flags: number,
    readonly nodeName: string | null,
    readonly zone: string | null,
    zoneHints: string[] = NO_HINTS,
    nodeHints: string[] = NO_HINTS,
  ) {
    this.#hints = zoneHints.length > 0 || nodeHints.length > 0 ? [zoneHints, nodeHints] : null;
  }
  get family(): Family {
    return this.flags & 16 ? 'ipv6' : 'ipv4';
  }
  get ready(): boolean {
    return (this.flags & 1) !== 0;
  }
  get serving(): boolean {
    return (this.flags & 2) !== 0;
  }
  get terminating(): boolean {
    return (this.flags & 4) !== 0;
  }
  get isLocal(): boolean {
    return (this.flags & 8) !== 0;
  }
  get zoneHints(): string[] {
    return this.#hints?.[0] ?? NO_HINTS;
  }
  get nodeHints(): string[] {
    return this.#hints?.[1] ?? NO_HINTS;
  }
  get forward(): 'masq' {
    return 'masq';
  }
  get weight(): number {
    return 1;
  }
  get upperThreshold(): number {
    return 0;
  }
  get lowerThreshold(): number {
    return 0;
  }
}

/** Sorted unique hint names ([] for none). */
function hintNames(hints: ReadonlyArray<{ name: string }> | undefined): string[] {
  return hints === undefined || hints.length === 0 ? NO_HINTS : [...new Set(hints.map((h) => h.name))].sort();
}

/**
 * Node and zone names, one string each: every endpoint names its node and zone, and a cluster has
 * a few thousand of each at most, where the objects that bring them (decoded lists, manifests)
 * carry one copy per endpoint. Cleared when it holds more than NAMES_MAX, so names of deleted nodes do not pile up.
 */
const NAMES = new Map<string, string>();
const NAMES_MAX = 20_000;

export function sharedName(name: string | undefined): string | null {
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

/**
 * The lists of a slice with one port (most slices): a Map's table for one entry is about 150
 * bytes, this is two fields.
 */
class OneList implements ReadonlyMap<string, EndpointInfo[]> {
  constructor(
    readonly key: string,
    readonly list: EndpointInfo[],
  ) {}
  get size(): number {
    return 1;
  }
  get(k: string): EndpointInfo[] | undefined {
    return k === this.key ? this.list : undefined;
  }
  has(k: string): boolean {
    return k === this.key;
  }
  forEach(f: (list: EndpointInfo[], key: string, map: ReadonlyMap<string, EndpointInfo[]>) => void, thisArg?: unknown): void {
    f.call(thisArg, this.list, this.key, this);
  }
  entries(): MapIterator<[string, EndpointInfo[]]> {
    return new Map([[this.key, this.list]]).entries();
  }
  keys(): MapIterator<string> {
    return [this.key].values() as unknown as MapIterator<string>;
  }
  values(): MapIterator<EndpointInfo[]> {
    return [this.list].values() as unknown as MapIterator<EndpointInfo[]>;
  }
  [Symbol.iterator](): MapIterator<[string, EndpointInfo[]]> {
    return this.entries();
  }
}

/** Endpoint lists by port key, each sorted by destination id; empty lists dropped. */
function sortedLists(byPort: Map<string, Map<string, EndpointInfo>>): ReadonlyMap<string, EndpointInfo[]> {
  const out = new Map<string, EndpointInfo[]>();
  for (const [key, set] of byPort) {
    if (set.size === 0) continue;
    out.set(key, [...set.entries()].sort(byId).map((p) => p[1]));
  }
  return endpointLists(out);
}

/** Lists by port key as the tracker holds them (one list in a OneList). */
export function endpointLists(lists: Map<string, EndpointInfo[]>): ReadonlyMap<string, EndpointInfo[]> {
  if (lists.size !== 1) return lists;
  const [key, list] = lists.entries().next().value!;
  return new OneList(key, list);
}

/** No endpoint lists (a slice of no Service, a Service with no slices). */
export const NO_ENDPOINTS: ReadonlyMap<string, EndpointInfo[]> = new Map();

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
export function sliceEndpoints(namespace: string, name: string, slice: EndpointSlice, nodeName: string, prev: ReadonlyMap<string, EndpointInfo[]> = NO_ENDPOINTS): ReadonlyMap<string, EndpointInfo[]> {
  if (slice.addressType === 'FQDN') return NO_ENDPOINTS;
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
      const flags = endpointFlags(ready, c.serving ?? ready, c.terminating ?? false, nodeName !== '' && ep.nodeName === nodeName, family);
      const info = new Endpoint(canonicalIp(raw), sp.port, flags, sharedName(ep.nodeName), sharedName(ep.zone), hintNames(ep.hints?.forZones), hintNames(ep.hints?.forNodes));
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
export function mergeSlices(perSlice: ReadonlyArray<ReadonlyMap<string, EndpointInfo[]>>): ReadonlyMap<string, EndpointInfo[]> {
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

/** Two endpoint lists are equal, element by element (no JSON of both per slice event). */
export const sameEndpoints = (a: readonly EndpointInfo[] | undefined, b: readonly EndpointInfo[]): boolean =>
  a === b || (a !== undefined && a.length === b.length && a.every((ep, i) => ep === b[i] || sameEndpoint(ep, b[i]!)));

/** `namespace/name` of the Service a slice belongs to, or null when it has none (or is FQDN). */
export function serviceOfSlice(slice: EndpointSlice): string | null {
  const name = slice.metadata.labels[SERVICE_NAME_LABEL];
  if (!name || slice.addressType === 'FQDN') return null;
  return [slice.metadata.namespace, name].join('/'); // one flat string, held per slice
}
