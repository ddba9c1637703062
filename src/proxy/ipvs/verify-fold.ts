// The folds of the periodic verification (verify.ts): each takes one slice of the kernel as
// read (the service list, the destinations of a chunk of virtual servers, one ipset, the dummy
// link's bound IPs) into the observed state, and marks in a Fold what differs from it. Whatever
// a partial sync touched during the read is left out (observed is newer than the read for it).
import { destinationId, observedDestination, serviceId, type Destination, type DestinationStatus, type ServiceKey, type ServiceStatus, type VirtualService } from '../../kernel/ipvs/types.js';
import { DestinationTable } from './destination-table.js';
import { byAddress, sameDestination, sameIn, sameService } from './desired-compare.js';
import type { DesiredDelta } from './desired-index.js';
import type { ObservedState, VirtualServerId } from './types.js';

/** What a verification touched: objects whose kernel state differed from observed (they are compared again). */
export interface Fold {
  virtualServers: Set<VirtualServerId>;
  ipsetEntries: Map<string, Set<string>>;
  addresses: Set<string>;
}

/** An empty fold. */
export function emptyFold(): Fold {
  return { virtualServers: new Set(), ipsetEntries: new Map(), addresses: new Set() };
}

/** The fold as a delta to plan over. */
export function foldScope(f: Fold): DesiredDelta {
  return { virtualServers: f.virtualServers, ipsetEntries: f.ipsetEntries, addresses: f.addresses, healthChecks: new Set() };
}

/** True when the fold found nothing to compare. */
export function isEmptyFold(f: Fold): boolean {
  return f.virtualServers.size === 0 && f.ipsetEntries.size === 0 && f.addresses.size === 0;
}

function withoutStats(s: ServiceStatus): VirtualService {
  if (s.stats === undefined) return s;
  const { stats: _stats, ...service } = s;
  return service;
}

/** Rows of the virtual-server list folded per hold of the sync queue (10,000 took 0.6–0.9 s in UML in one piece). */
export const SERVICE_SLICE = 1024;

/**
 * Folds the kernel's service list into `observed`, as it is read (one object at a time) and a
 * slice at a time (add()): services it lacks are dropped from observed (the plan re-adds them
 * whole), desired ones it lacks are compared (added), services only the kernel has are taken
 * into observed with no destinations yet (a foreign one is compared, i.e. deleted, at once; a
 * desired one waits for the chunk step that reads its destinations, so adopting a programmed
 * kernel costs no write), changed parameters are taken. Collects the kernel's service keys
 * (for the destination chunks) and the ids whose destinations are unread.
 */
export class ServiceListFold {
  readonly keys: ServiceKey[] = [];
  readonly unread = new Set<VirtualServerId>();
  private readonly seen = new Set<VirtualServerId>();

  constructor(
    private readonly observed: ObservedState,
    private readonly desired: ReadonlyMap<VirtualServerId, unknown>,
  ) {}

  /**
   * Folds up to `max` more rows; true once every row is folded and what the kernel lacks is
   * marked. Between two calls partial syncs may run: `touched` is what they compared since the
   * read (those objects are left alone). Stops (true) if `observed` was replaced meanwhile.
   */
  add(rows: Iterator<ServiceStatus>, observed: ObservedState, touched: DesiredDelta, fold: Fold, max = Infinity): boolean {
    if (observed !== this.observed) return true; // a full sync read everything anew
    if (this.missing === null) {
      for (let n = 0; n < max; n++) {
        const next = rows.next();
        if (next.done) {
          this.dropGone(touched, fold);
          this.missing = this.desired.keys();
          break;
        }
        this.one(withoutStats(next.value), touched, fold);
      }
      if (this.missing === null) return false;
    }
    return this.addMissing(touched, fold, max);
  }

  /** Once the rows are folded: the desired virtual servers the kernel lacks, iterated `max` per fold. */
  private missing: Iterator<VirtualServerId> | null = null;

  private one(service: VirtualService, touched: DesiredDelta, fold: Fold): void {
    const id = serviceId(service);
    this.seen.add(id);
    const o = this.observed.virtualServers.get(id);
    const same = o !== undefined && sameService(o.service, service);
    // The observed object when it reads the same: a no-change verification keeps none of the read.
    this.keys.push(same ? o.service : service);
    if (touched.virtualServers.has(id)) return;
    if (!o) {
      this.observed.virtualServers.set(id, { service, destinations: new DestinationTable() });
      if (this.desired.has(id)) this.unread.add(id);
      else fold.virtualServers.add(id);
    } else if (!same) {
      o.service = service;
      fold.virtualServers.add(id);
    }
  }

  private dropGone(touched: DesiredDelta, fold: Fold): void {
    for (const id of [...this.observed.virtualServers.keys()]) {
      if (this.seen.has(id) || touched.virtualServers.has(id)) continue;
      this.observed.virtualServers.delete(id);
      fold.virtualServers.add(id);
    }
  }

  /**
   * Up to `max` desired virtual servers the kernel lacks into the fold; true once there are no
   * more. On a new node that is every one: planned and written a slice at a time, the ops of
   * every virtual server are never held at once (docs/decisions.md).
   */
  private addMissing(touched: DesiredDelta, fold: Fold, max: number): boolean {
    for (let n = 0; n < max; ) {
      const next = this.missing!.next();
      if (next.done) return true;
      const id = next.value;
      if (this.seen.has(id) || touched.virtualServers.has(id)) continue;
      fold.virtualServers.add(id);
      n++;
    }
    return false;
  }
}

/**
 * Folds the destinations read for `keys` (same order) into `observed`; marks the virtual servers
 * that differed (and the unread ones). A destination that reads as observed keeps its observed
 * object (often the desired one, shared), and a virtual server whose destinations all do keeps
 * its map: a no-change verification allocates nothing that outlives the step. Connection counts
 * are not taken (refreshDraining reads them fresh for the destinations that need them). A
 * destination read as `desired` wants it is kept as the desired object (as apply keeps what it
 * wrote): a restarted daemon adopting a programmed kernel holds one object per real server, not two.
 */
export function foldDestinations(
  observed: ObservedState,
  keys: readonly ServiceKey[],
  reads: readonly DestinationStatus[][],
  unread: ReadonlySet<VirtualServerId>,
  touched: DesiredDelta,
  fold: Fold,
  desired?: ReadonlyMap<VirtualServerId, { destinations: readonly Destination[] }>,
): void {
  keys.forEach((key, i) => {
    const id = serviceId(key);
    const o = observed.virtualServers.get(id);
    if (!o || touched.virtualServers.has(id)) return; // deleted or re-compared by a partial sync meanwhile
    const read = reads[i]!;
    const had = o.destinations;
    const same = (d: DestinationStatus, did: string) => {
      const h = had.get(did);
      return h !== undefined && sameDestination(h, d) ? h : undefined;
    };
    if (!unread.has(id) && read.length === had.size && read.every((d) => same(d, destinationId(d)))) return;
    const want = desired?.get(id)?.destinations;
    const wanted = want?.length ? byAddress(want) : undefined;
    o.destinations = new DestinationTable(read.map((d) => same(d, destinationId(d)) ?? sameIn(wanted, d) ?? observedDestination(d)));
    fold.virtualServers.add(id);
  });
}

/**
 * Folds one ipset as read (null: the set is missing) into `observed`; marks the entries that
 * differ from observed, and the wanted ones the kernel lacks. `capacity` (capacityOf) as read
 * only raises the observed one: a partial sync may have grown the set since the read, and a
 * smaller set made by someone else shows as IPSET_ERR_HASH_FULL on an add (apply.ts).
 */
export function foldSet(
  observed: ObservedState,
  set: string,
  entries: readonly string[] | null,
  wanted: ReadonlyMap<string, number>,
  touched: DesiredDelta,
  fold: Fold,
  capacity: number | null = null,
): void {
  const had = observed.ipsets.get(set);
  const skip = touched.ipsetEntries.get(set);
  if (capacity !== null && (observed.ipsetCapacity.get(set) ?? 0) < capacity) observed.ipsetCapacity.set(set, capacity);
  if (entries === null) {
    observed.ipsetCapacity.delete(set);
    if (!had) return;
    observed.ipsets.delete(set); // the plan re-creates and fills an owned set
    fold.ipsetEntries.set(set, new Set(had));
    return;
  }
  const fresh = new Set(entries);
  const diff = new Set<string>();
  for (const e of fresh) if (!had?.has(e) && !skip?.has(e)) diff.add(e);
  for (const e of had ?? []) if (!fresh.has(e) && !skip?.has(e)) diff.add(e);
  for (const e of wanted.keys()) if (!fresh.has(e) && !skip?.has(e)) diff.add(e);
  if (had && diff.size === 0) return; // read as observed (skipped entries aside): keep observed's set, none of the read
  // Entries a partial sync changed during the read keep their observed (newer) state.
  for (const e of skip ?? []) {
    if (had?.has(e)) fresh.add(e);
    else fresh.delete(e);
  }
  observed.ipsets.set(set, fresh);
  if (diff.size > 0) fold.ipsetEntries.set(set, diff);
}

/** Folds the dummy link's addresses as read into `observed`; marks those that differ from observed, and the wanted ones the kernel lacks. */
export function foldAddresses(observed: ObservedState, addresses: readonly string[], wanted: ReadonlyMap<string, number>, touched: DesiredDelta, fold: Fold): void {
  const fresh = new Set(addresses);
  const before = fold.addresses.size;
  for (const a of fresh) if (!observed.addresses.has(a) && !touched.addresses.has(a)) fold.addresses.add(a);
  for (const a of observed.addresses) if (!fresh.has(a) && !touched.addresses.has(a)) fold.addresses.add(a);
  for (const a of wanted.keys()) if (!fresh.has(a) && !touched.addresses.has(a)) fold.addresses.add(a);
  if (fold.addresses.size === before) return; // read as observed: keep observed's set
  for (const a of touched.addresses) {
    if (observed.addresses.has(a)) fresh.add(a);
    else fresh.delete(a);
  }
  observed.addresses = fresh;
}
