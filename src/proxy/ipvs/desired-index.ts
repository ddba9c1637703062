// The aggregate desired state: every service's contribution, merged. Shared objects (an address
// used by several services, an ipset entry) are refcounted; a virtual server has one owner.
// set() returns the delta it caused, so a sync compares only what changed.
import { destinationId, serviceId, type Destination, type VirtualService } from '../../kernel/ipvs/types.js';
import { canonicalIp } from '../../model/ip.js';
import type { ObjectError } from '../../model/service.js';
import { byAddress, sameDestinations, sameIn, sameService } from './desired-compare.js';
import type { DesiredVirtualServer, InternalRedirect, ServiceContribution, VirtualServerId } from './types.js';
import type { Family } from '../../model/ip.js';

/** What one or more set() calls touched: the objects a partial sync must compare. */
export interface DesiredDelta {
  /** Virtual servers whose desired state (destinations, parameters, owner, presence) changed. */
  virtualServers: Set<VirtualServerId>;
  /** Per set, entries that became wanted (first reference) or unwanted (last reference gone). */
  ipsetEntries: Map<string, Set<string>>;
  /** Dummy-link addresses that became wanted or unwanted. */
  addresses: Set<string>;
  /** Keys of the services whose health check (port or local endpoint count) changed. */
  healthChecks: Set<string>;
}

/** A desired virtual server with the service key that owns it. */
export type OwnedVirtualServer = DesiredVirtualServer & { owner: string };

/** A virtual server as a contribution stores it: with its id and the service key it is stored for (its owner while it owns it). */
type StoredServer = OwnedVirtualServer & { id: VirtualServerId };

/** A health-check node port of an externalTrafficPolicy: Local service. */
export type HealthCheck = NonNullable<ServiceContribution['healthCheck']>;

/** An empty delta. */
export function emptyDelta(): DesiredDelta {
  return { virtualServers: new Set(), ipsetEntries: new Map(), addresses: new Set(), healthChecks: new Set() };
}

/** Adds `from` into `into` (coalescing the deltas of several events before one sync); returns `into`. */
export function mergeDelta(into: DesiredDelta, from: DesiredDelta): DesiredDelta {
  for (const v of from.virtualServers) into.virtualServers.add(v);
  for (const [set, entries] of from.ipsetEntries) for (const e of entries) addEntry(into, set, e);
  for (const a of from.addresses) into.addresses.add(a);
  for (const h of from.healthChecks) into.healthChecks.add(h);
  return into;
}

/** True when the delta names nothing. */
export function isEmptyDelta(d: DesiredDelta): boolean {
  return d.virtualServers.size === 0 && d.ipsetEntries.size === 0 && d.addresses.size === 0 && d.healthChecks.size === 0;
}

function addEntry(d: DesiredDelta, set: string, entry: string): void {
  let s = d.ipsetEntries.get(set);
  if (!s) d.ipsetEntries.set(set, (s = new Set()));
  s.add(entry);
}

/** IPv6 text in canonical form (the kernel reports it so); IPv4 is left as is (already canonical). */
const canon = (a: string): string => (a.includes(':') ? canonicalIp(a) : a);

function canonService(s: VirtualService): VirtualService {
  return s.address !== null && s.address.includes(':') ? { ...s, address: canonicalIp(s.address) } : s;
}

function canonDestination(d: Destination): Destination {
  const address = d.address.includes(':') ? canonicalIp(d.address) : d.address;
  return address === d.address ? d : { address, port: d.port, forward: d.forward, weight: d.weight, upperThreshold: d.upperThreshold, lowerThreshold: d.lowerThreshold };
}

/**
 * One service port's contribution, deduplicated and canonical, in plain arrays: the index holds
 * one per port of every Service, and a Map or Set of one or two entries is about 180 bytes
 * (docs/decisions.md). Lookups scan: a port has a few virtual servers, entries and addresses.
 */
interface Stored {
  /** Also the objects `owned` holds for the ones this service port owns. */
  virtualServers: StoredServer[];
  /** Set names and entries, alternating: set, entry, set, entry, … */
  entries: string[];
  addresses: string[];
  healthCheck: HealthCheck | null;
  errors: ObjectError[];
}

/** The virtual server `id` of a stored contribution. */
function storedServer(s: Stored, id: VirtualServerId): StoredServer | undefined {
  return s.virtualServers.find((vs) => vs.id === id);
}

const NO_ERRORS: ObjectError[] = Object.freeze([]) as unknown as ObjectError[];

/** True when `entries` (set, entry pairs) holds `entry` in `set`. */
function hasPair(entries: readonly string[], set: string, entry: string): boolean {
  for (let i = 0; i < entries.length; i += 2) if (entries[i + 1] === entry && entries[i] === set) return true;
  return false;
}

/**
 * Stores a contribution. A destination equal to one `old` holds for the same virtual server is
 * stored as that object: after an endpoint change the unchanged real servers stay one object,
 * shared with the observed state (which keeps what was applied), not two (measured: 26,000 more
 * objects, 2.2 MiB of heap, after two minutes of churn at 3,000 Services x 10).
 */
function store(key: string, c: ServiceContribution, old: Stored): Stored {
  const virtualServers: StoredServer[] = [];
  for (const vs of c.virtualServers) {
    const service = canonService(vs.service);
    const id = serviceId(service);
    if (virtualServers.some((v) => v.id === id)) continue;
    const before = storedServer(old, id)?.destinations;
    const had = before?.length ? byAddress(before) : undefined;
    const dests = new Map<string, Destination>();
    let asGiven = true;
    for (const d of vs.destinations) {
      const dest = canonDestination(d);
      const did = destinationId(dest);
      const kept = dests.has(did) ? undefined : (sameIn(had, dest) ?? dest);
      if (kept !== undefined) dests.set(did, kept);
      asGiven &&= kept === d;
    }
    // The list as given when nothing in it changed (often the tracker's own endpoint list: one array, not two).
    virtualServers.push({ id, service, destinations: asGiven ? vs.destinations : [...dests.values()], owner: key });
  }
  const entries: string[] = [];
  const seen = c.ipsetEntries.length > 16 ? new Set<string>() : null;
  for (const { set, entry } of c.ipsetEntries) {
    if (seen === null ? hasPair(entries, set, entry) : seen.size === seen.add(`${set}\0${entry}`).size) continue;
    entries.push(set, entry);
  }
  const addresses = [...new Set(c.addresses.map(canon))];
  return { virtualServers: virtualServers.slice(), entries: entries.slice(), addresses, healthCheck: c.healthCheck, errors: c.errors.length > 0 ? c.errors : NO_ERRORS };
}

const EMPTY: Stored = { virtualServers: [], entries: [], addresses: [], healthCheck: null, errors: NO_ERRORS };

/** Pairs of `a` (set, entry pairs) that `b` does not hold; with a Set of `b` when both are long. */
function* pairsNotIn(a: readonly string[], b: readonly string[]): Generator<[string, string]> {
  const index = a.length > 32 && b.length > 32 ? new Set(Array.from({ length: b.length / 2 }, (_, i) => `${b[2 * i]}\0${b[2 * i + 1]}`)) : null;
  for (let i = 0; i < a.length; i += 2) {
    const set = a[i]!;
    const entry = a[i + 1]!;
    if (index !== null ? !index.has(`${set}\0${entry}`) : !hasPair(b, set, entry)) yield [set, entry];
  }
}

/** `Service ns/name` from a portNameKey `ns/name:port/protocol`. */
function serviceObject(key: string): string {
  const colon = key.indexOf(':');
  return `Service ${colon < 0 ? key : key.slice(0, colon)}`;
}

/**
 * The desired state of the node: contributions by service key, aggregated. A virtual server
 * claimed by two services belongs to the first claimant still claiming it; the others get an
 * ObjectError and take over, in claim order, when it lets go. Work per set() is proportional
 * to the old and new contributions of that one service.
 */
export class DesiredIndex {
  private readonly contributions = new Map<string, Stored>();
  /** The claimants of a virtual server besides its owner, in claim order (contested ones only). */
  private readonly waiting = new Map<VirtualServerId, string[]>();
  private readonly owned = new Map<VirtualServerId, OwnedVirtualServer>();
  /** Kept as `owned` changes, so metrics and the IPv6 check cost nothing per sync. */
  private readonly totals = { realServers: 0, ipv6: 0 };
  private readonly entryRefs = new Map<string, Map<string, number>>();
  private readonly addressRefs = new Map<string, number>();
  private readonly checks = new Map<string, HealthCheck>();
  /** Health checks by node port (ports are unique per cluster; on a clash the first service keeps it). */
  private readonly checkPorts = new Map<number, HealthCheck & { key: string }>();
  private readonly serviceErrors = new Map<string, ObjectError[]>();
  private readonly redirectsByKey = new Map<string, InternalRedirect[]>();
  /** Counts changes of the redirects, so the iptables rules are rebuilt only when they change. */
  private redirectChanges = 0;

  /** Replaces the contribution of service `key` (null removes it); returns what that touched. */
  set(key: string, c: ServiceContribution | null): DesiredDelta {
    const delta = emptyDelta();
    const old = this.contributions.get(key) ?? EMPTY;
    const next = c ? store(key, c, old) : EMPTY;
    if (c) this.contributions.set(key, next);
    else this.contributions.delete(key);

    for (const { id } of old.virtualServers) if (storedServer(next, id) === undefined) this.release(id, key, delta);
    for (const vs of next.virtualServers) {
      const { id } = vs;
      const before = storedServer(old, id);
      if (!before) this.claim(id, key, vs, delta);
      else if (this.owned.get(id)?.owner === key) {
        this.own(id, vs);
        if (!sameService(before.service, vs.service) || !sameDestinations(before.destinations, vs.destinations)) delta.virtualServers.add(id);
      }
    }

    for (const [set, e] of pairsNotIn(old.entries, next.entries)) this.unref(set, e, delta);
    for (const [set, e] of pairsNotIn(next.entries, old.entries)) this.ref(set, e, delta);

    for (const a of old.addresses) {
      if (next.addresses.includes(a)) continue;
      const n = this.addressRefs.get(a)! - 1;
      if (n === 0) {
        this.addressRefs.delete(a);
        delta.addresses.add(a);
      } else this.addressRefs.set(a, n);
    }
    for (const a of next.addresses) {
      if (old.addresses.includes(a)) continue;
      const n = (this.addressRefs.get(a) ?? 0) + 1;
      this.addressRefs.set(a, n);
      if (n === 1) delta.addresses.add(a);
    }

    if (JSON.stringify(old.healthCheck) !== JSON.stringify(next.healthCheck)) {
      delta.healthChecks.add(key);
      this.setHealthCheck(key, old.healthCheck, next.healthCheck);
    }
    if (next.errors.length > 0) this.serviceErrors.set(key, next.errors);
    else this.serviceErrors.delete(key);
    const redirects = c?.redirects ?? [];
    const before = this.redirectsByKey.get(key);
    if ((before !== undefined || redirects.length > 0) && JSON.stringify(before ?? []) !== JSON.stringify(redirects)) {
      this.redirectChanges++;
      if (redirects.length > 0) this.redirectsByKey.set(key, redirects);
      else this.redirectsByKey.delete(key);
    }
    return delta;
  }

  private setHealthCheck(key: string, old: HealthCheck | null, next: HealthCheck | null): void {
    if (next) this.checks.set(key, next);
    else this.checks.delete(key);
    if (old && this.checkPorts.get(old.port)?.key === key) {
      this.checkPorts.delete(old.port);
      for (const [k, hc] of this.checks) {
        if (k !== key && hc.port === old.port) {
          this.checkPorts.set(hc.port, { ...hc, key: k });
          break;
        }
      }
    }
    const held = next ? this.checkPorts.get(next.port) : undefined;
    if (next && (!held || held.key === key)) this.checkPorts.set(next.port, { ...next, key });
  }

  private claim(id: VirtualServerId, key: string, vs: StoredServer, delta: DesiredDelta): void {
    if (!this.owned.has(id)) {
      this.own(id, vs);
      delta.virtualServers.add(id);
      return;
    }
    const list = this.waiting.get(id);
    if (list) list.push(key);
    else this.waiting.set(id, [key]);
  }

  private release(id: VirtualServerId, key: string, delta: DesiredDelta): void {
    const list = this.waiting.get(id);
    if (this.owned.get(id)?.owner !== key) {
      list?.splice(list.indexOf(key), 1);
      if (list?.length === 0) this.waiting.delete(id);
      return;
    }
    delta.virtualServers.add(id);
    const heir = list?.shift();
    if (list?.length === 0) this.waiting.delete(id);
    if (heir === undefined) {
      this.disown(id);
      return;
    }
    this.own(id, storedServer(this.contributions.get(heir)!, id)!);
  }

  private own(id: VirtualServerId, v: OwnedVirtualServer): void {
    this.disown(id);
    this.owned.set(id, v);
    this.totals.realServers += v.destinations.length;
    if (v.service.family === 'ipv6') this.totals.ipv6++;
  }

  private disown(id: VirtualServerId): void {
    const v = this.owned.get(id);
    if (!v) return;
    this.owned.delete(id);
    this.totals.realServers -= v.destinations.length;
    if (v.service.family === 'ipv6') this.totals.ipv6--;
  }

  /** Desired virtual servers, their real servers, and how many of the servers are IPv6. */
  counts(): { virtualServers: number; realServers: number; ipv6VirtualServers: number } {
    return { virtualServers: this.owned.size, realServers: this.totals.realServers, ipv6VirtualServers: this.totals.ipv6 };
  }

  private ref(set: string, entry: string, delta: DesiredDelta): void {
    let refs = this.entryRefs.get(set);
    if (!refs) this.entryRefs.set(set, (refs = new Map()));
    const n = (refs.get(entry) ?? 0) + 1;
    refs.set(entry, n);
    if (n === 1) addEntry(delta, set, entry);
  }

  private unref(set: string, entry: string, delta: DesiredDelta): void {
    const refs = this.entryRefs.get(set)!;
    const n = refs.get(entry)! - 1;
    if (n > 0) return void refs.set(entry, n);
    refs.delete(entry);
    if (refs.size === 0) this.entryRefs.delete(set);
    addEntry(delta, set, entry);
  }

  /** Every programmed (owned) virtual server, by id. */
  virtualServers(): ReadonlyMap<VirtualServerId, OwnedVirtualServer> {
    return this.owned;
  }

  /** The entries wanted in `set`, each with the number of services wanting it. */
  ipsetEntries(set: string): ReadonlyMap<string, number> {
    return this.entryRefs.get(set) ?? new Map();
  }

  /** True when some service wants `entry` in `set`. */
  hasIpsetEntry(set: string, entry: string): boolean {
    return this.entryRefs.get(set)?.has(entry) ?? false;
  }

  /** Names of the sets that have at least one wanted entry. */
  allSets(): string[] {
    return [...this.entryRefs.keys()];
  }

  /** Addresses wanted on the dummy link, each with the number of services wanting it. */
  addresses(): ReadonlyMap<string, number> {
    return this.addressRefs;
  }

  /** Health-check node ports: port -> the service (`ns/name`) and its local endpoint count. */
  healthChecks(): ReadonlyMap<number, HealthCheck> {
    return this.checkPorts;
  }

  /** The internal-traffic redirects of one family, by service key; and a number that changes with them. */
  redirects(family: Family): InternalRedirect[] {
    return [...this.redirectsByKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).flatMap(([, rs]) => rs.filter((r) => r.family === family));
  }

  /** Changes whenever {@link redirects} may have changed. */
  get redirectVersion(): number {
    return this.redirectChanges;
  }

  /** Merges the deltas of several set() calls into one (a new object). */
  mergeDeltas(deltas: Iterable<DesiredDelta>): DesiredDelta {
    const out = emptyDelta();
    for (const d of deltas) mergeDelta(out, d);
    return out;
  }

  /** The services' own errors, then one per virtual server a service claimed but does not own. */
  errors(): ObjectError[] {
    const out = [...this.serviceErrors.values()].flat();
    for (const [id, others] of this.waiting) {
      const owner = this.owned.get(id)!.owner;
      for (const key of others) {
        out.push({ object: serviceObject(key), reason: `${key}: virtual server ${id} is already programmed for ${owner}; not programmed for this service`, event: 'VirtualServerConflict' });
      }
    }
    return out;
  }

  /** Keys of the services with a contribution. */
  keys(): IterableIterator<string> {
    return this.contributions.keys();
  }

  /** Number of services with a contribution. */
  get size(): number {
    return this.contributions.size;
  }
}
