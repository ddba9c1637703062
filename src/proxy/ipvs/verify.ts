// The periodic verification, in small steps: each step reads one slice of the kernel (the
// service list, the destinations of a chunk of virtual servers, one ipset, the dummy link's
// addresses) and folds it into the observed state here; the proxier then plans and applies the
// objects that differ. A read runs while partial syncs go on; whatever a partial sync touched
// during the read is left out of the fold (observed is newer than the read for it).
import { destinationId, observedDestination, serviceId, type DestinationStatus, type ServiceKey, type ServiceStatus } from '../../kernel/ipvs/types.js';
import { sameDestination, sameService, type DesiredDelta } from './desired-index.js';
import type { ObservedState, VirtualServerId } from './types.js';

/** Virtual servers whose destinations one verification step reads. */
export const VERIFY_CHUNK = 128;

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

/**
 * Folds the kernel's service list into `observed`: services it lacks are dropped from observed
 * (the plan re-adds them whole), desired ones it lacks are compared (added), services only the
 * kernel has are taken into observed with no destinations yet (a foreign one is compared, i.e.
 * deleted, at once; a desired one waits for the chunk step that reads its destinations, so
 * adopting a programmed kernel costs no write), changed parameters are taken. Returns the
 * kernel's service keys (for the destination chunks) and the ids whose destinations are unread.
 */
export function foldServices(
  observed: ObservedState,
  kernel: readonly ServiceStatus[],
  desired: ReadonlyMap<VirtualServerId, unknown>,
  touched: DesiredDelta,
  fold: Fold,
): { keys: ServiceKey[]; unread: Set<VirtualServerId> } {
  const seen = new Set<VirtualServerId>();
  const keys: ServiceKey[] = [];
  const unread = new Set<VirtualServerId>();
  for (const s of kernel) {
    const { stats: _stats, ...service } = s;
    const id = serviceId(service);
    seen.add(id);
    keys.push(service);
    if (touched.virtualServers.has(id)) continue;
    const o = observed.virtualServers.get(id);
    if (!o) {
      observed.virtualServers.set(id, { service, destinations: new Map() });
      if (desired.has(id)) unread.add(id);
      else fold.virtualServers.add(id);
    } else if (!sameService(o.service, service)) {
      o.service = service;
      fold.virtualServers.add(id);
    }
  }
  for (const id of [...observed.virtualServers.keys()]) {
    if (seen.has(id) || touched.virtualServers.has(id)) continue;
    observed.virtualServers.delete(id);
    fold.virtualServers.add(id);
  }
  for (const id of desired.keys()) if (!seen.has(id) && !touched.virtualServers.has(id)) fold.virtualServers.add(id);
  return { keys, unread };
}

/** Folds the destinations read for `keys` (same order) into `observed`; marks the virtual servers that differed (and the unread ones). */
export function foldDestinations(
  observed: ObservedState,
  keys: readonly ServiceKey[],
  reads: readonly DestinationStatus[][],
  unread: ReadonlySet<VirtualServerId>,
  touched: DesiredDelta,
  fold: Fold,
): void {
  keys.forEach((key, i) => {
    const id = serviceId(key);
    const o = observed.virtualServers.get(id);
    if (!o || touched.virtualServers.has(id)) return; // deleted or re-compared by a partial sync meanwhile
    const fresh = new Map(reads[i]!.map((d) => [destinationId(d), observedDestination(d)]));
    let differs = unread.has(id) || fresh.size !== o.destinations.size;
    for (const [did, d] of fresh) {
      const had = o.destinations.get(did);
      if (!had || !sameDestination(had, d)) differs = true;
    }
    o.destinations = fresh;
    if (differs) fold.virtualServers.add(id);
  });
}

/**
 * Folds one ipset as read (null: the set is missing) into `observed`; marks the entries that
 * differ from observed, and the wanted ones the kernel lacks.
 */
export function foldSet(
  observed: ObservedState,
  set: string,
  entries: readonly string[] | null,
  wanted: ReadonlyMap<string, number>,
  touched: DesiredDelta,
  fold: Fold,
): void {
  const had = observed.ipsets.get(set);
  const skip = touched.ipsetEntries.get(set);
  if (entries === null) {
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
  for (const a of fresh) if (!observed.addresses.has(a) && !touched.addresses.has(a)) fold.addresses.add(a);
  for (const a of observed.addresses) if (!fresh.has(a) && !touched.addresses.has(a)) fold.addresses.add(a);
  for (const a of wanted.keys()) if (!fresh.has(a) && !touched.addresses.has(a)) fold.addresses.add(a);
  for (const a of touched.addresses) {
    if (observed.addresses.has(a)) fresh.add(a);
    else fresh.delete(a);
  }
  observed.addresses = fresh;
}
