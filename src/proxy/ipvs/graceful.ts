// Graceful termination: a removed TCP real server is set to weight 0 and kept until its
// connections drain or a timeout passes; UDP and SCTP ones are deleted at once (plan.ts decides).
// Unlike kube-proxy's graceful_termination.go: draining servers are read per virtual server
// (one dump per VS with draining servers, not one per server), deletion is bounded by a
// timeout (a long-lived connection cannot pin a server forever), and a server that comes back
// while draining gets its weight back instead of being deleted and re-added.
import type { IpvsClient } from '../../kernel/ipvs/client.js';
import { destinationId, observedDestination, type DestinationStatus, type Protocol } from '../../kernel/ipvs/types.js';
import { sameDestination } from './desired-compare.js';
import type { DestinationId, ObservedState, VirtualServerId } from './types.js';

/** One draining real server. Times are milliseconds of the clock plan() is given. */
export interface DrainingEntry {
  /** When it was set to weight 0. */
  since: number;
  /** The virtual server's protocol (null for a fwmark service). */
  protocol: Protocol | null;
  /** When its connection counts were last read from the kernel after `since`; null until then. */
  countedAt: number | null;
}

/** The real servers being drained: VS id -> destination id -> entry. Updated only from acknowledged ops. */
export class GracefulState {
  readonly draining = new Map<VirtualServerId, Map<DestinationId, DrainingEntry>>();

  /** The entry of one destination, if draining. */
  get(vs: VirtualServerId, dest: DestinationId): DrainingEntry | undefined {
    return this.draining.get(vs)?.get(dest);
  }

  /** Records a destination as draining (its weight-0 update was acknowledged). */
  start(vs: VirtualServerId, dest: DestinationId, entry: DrainingEntry): void {
    let m = this.draining.get(vs);
    if (!m) this.draining.set(vs, (m = new Map()));
    m.set(dest, entry);
  }

  /** Forgets a destination (restored, deleted, or gone). */
  end(vs: VirtualServerId, dest: DestinationId): void {
    const m = this.draining.get(vs);
    if (!m) return;
    m.delete(dest);
    if (m.size === 0) this.draining.delete(vs);
  }

  /** True when a destination has drained for `timeoutMs` (--graceful-termination-timeout) or longer. */
  timedOut(timeoutMs: number, now: number = Date.now()): boolean {
    for (const m of this.draining.values()) for (const e of m.values()) if (now - e.since >= timeoutMs) return true;
    return false;
  }

  /** Number of draining destinations. */
  get size(): number {
    let n = 0;
    for (const m of this.draining.values()) n += m.size;
    return n;
  }
}

/** What a refresh read. */
export interface RefreshResult {
  /** listDestinations calls made (one per virtual server with draining destinations). */
  reads: number;
  /** Draining destinations found with no connections left. */
  drained: number;
  /** Draining destinations no longer in the kernel (forgotten). */
  gone: number;
  errors: Array<{ object: string; error: Error }>;
}

/**
 * Reads the destinations of the virtual servers that have draining destinations, and only
 * those (one dump each, all in one call: cost proportional to what drains, never a full dump). Updates
 * `observed` with what it read (weights and connection counts; destinations gone from the
 * kernel are removed) and stamps each draining entry with `countedAt = now`, so the next
 * plan() deletes the drained ones. A virtual server not in `observed` ends its entries.
 */
export async function refreshDraining(ipvs: IpvsClient, observed: ObservedState, graceful: GracefulState, now: number = Date.now()): Promise<RefreshResult> {
  const result: RefreshResult = { reads: 0, drained: 0, gone: 0, errors: [] };
  const targets = [...graceful.draining.keys()].flatMap((id) => {
    const o = observed.virtualServers.get(id);
    if (!o) {
      for (const dest of graceful.draining.get(id)!.keys()) graceful.end(id, dest);
      return [];
    }
    return [{ id, o }];
  });
  // One trip to the addon for all of them (each a dump of its own): a trip costs more than a
  // small dump, and under churn tens of virtual servers drain at once.
  const reads = await ipvs.listDestinationsMany(targets.map(({ o }) => o.service)).then(
    (all) => all.map((dests) => ({ ok: true as const, dests })),
    (error: Error) => targets.map(() => ({ ok: false as const, error })),
  );
  result.reads = targets.length;
  targets.forEach(({ id, o }, i) => {
    const r = reads[i]!;
    if (!r.ok) {
      result.errors.push({ object: id, error: r.error });
      return;
    }
    // Runs after every sync that drains (each endpoint change): forEach and index loops, not
    // for-of and spreads, whose iterator objects this rarely-optimized code would allocate.
    const fresh = new Map<DestinationId, DestinationStatus>();
    for (let k = 0; k < r.dests.length; k++) fresh.set(destinationId(r.dests[k]!), r.dests[k]!);
    o.destinations.forEach((_, did) => fresh.has(did) || o.destinations.delete(did));
    // A destination that reads as observed, counts included (mostly: weight 1, no connections)
    // keeps its object, often the desired state's own: re-reading a virtual server for its one
    // draining destination must not turn the other real servers into copies of themselves
    // (measured: 26,000 copies, 2.2 MiB of heap, after two minutes of churn at 3,000 x 10).
    fresh.forEach((d, did) => {
      const h = o.destinations.get(did);
      if (h === undefined || !sameDestination(h, d) || (h.activeConns ?? 0) !== d.activeConns || (h.inactiveConns ?? 0) !== d.inactiveConns) o.destinations.set(did, observedDestination(d));
    });
    graceful.draining.get(id)?.forEach((entry, did) => {
      const d = fresh.get(did);
      if (!d) {
        graceful.end(id, did); // deletes the entry being visited: Map.forEach carries on with the next
        result.gone++;
        return;
      }
      entry.countedAt = now;
      if (d.activeConns + d.inactiveConns === 0) result.drained++;
    });
  });
  return result;
}
