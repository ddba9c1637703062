// When desired and observed virtual servers and real servers are the same, as the kernel would
// store them: the comparisons the index, the plan and the verification share.
import { destinationId, type Destination, type ServiceFlag, type VirtualService } from '../../kernel/ipvs/types.js';

/**
 * Flag names -> comparable bits. NOTE: the kernel keeps scheduler flags as three anonymous bits
 * (IP_VS_SVC_F_SCHED1..3) and the client names them after the scheduler (codec.ts bitsToFlags),
 * so `sh-fallback`, `mh-fallback` and `flag-1` are the same flag.
 */
const FLAG_SLOT: Record<ServiceFlag, number> = {
  persistent: 1,
  ops: 2,
  'sh-fallback': 4,
  'mh-fallback': 4,
  'flag-1': 4,
  'sh-port': 8,
  'mh-port': 8,
  'flag-2': 8,
  'flag-3': 16,
};

/** The flags as the kernel stores them (see FLAG_SLOT): equal for flag lists the kernel cannot tell apart. */
export function flagSlots(flags: readonly ServiceFlag[]): number {
  let bits = 0;
  for (const f of flags) bits |= FLAG_SLOT[f];
  return bits;
}

/** True when two services (of the same key) have the same parameters, as the kernel would store them. */
export function sameService(a: VirtualService, b: VirtualService): boolean {
  return (
    a.scheduler === b.scheduler &&
    a.timeout === b.timeout &&
    a.netmask === b.netmask &&
    (a.pe || null) === (b.pe || null) &&
    flagSlots(a.flags) === flagSlots(b.flags)
  );
}

/** True when two destinations (of the same key) have the same parameters. */
export function sameDestination(a: Destination, b: Destination): boolean {
  return a.forward === b.forward && a.weight === b.weight && a.upperThreshold === b.upperThreshold && a.lowerThreshold === b.lowerThreshold;
}

/**
 * One virtual server's destinations by address, for finding a destination's counterpart without
 * building an id string per destination; an address held on several ports (rare) is looked up
 * by destination id instead.
 */
export interface ByAddress {
  one: Map<string, Destination>;
  byId?: Map<string, Destination>;
}

export function byAddress(list: readonly Destination[]): ByAddress {
  const m: ByAddress = { one: new Map() };
  for (const d of list) {
    const first = m.one.get(d.address);
    if (first === undefined) m.one.set(d.address, d);
    else (m.byId ??= new Map([[destinationId(first), first]])).set(destinationId(d), d);
  }
  return m;
}

/** The destination of `m` with `d`'s address and port, if it has the same parameters. */
export function sameIn(m: ByAddress | undefined, d: Destination): Destination | undefined {
  let o = m?.one.get(d.address);
  if (o !== undefined && o.port !== d.port) o = m!.byId?.get(destinationId(d));
  return o !== undefined && sameDestination(o, d) ? o : undefined;
}

/** True when two destination lists hold the same real servers with the same parameters. */
export function sameDestinations(a: readonly Destination[], b: readonly Destination[]): boolean {
  if (a.length !== b.length) return false;
  if (a.every((d, i) => d === b[i])) return true; // the index's store() kept every object: nothing changed
  // Both lists hold each (address, port) once (store() dedupes): a match for every one of `a` is a bijection.
  const m = byAddress(b);
  return a.every((d) => sameIn(m, d) !== undefined);
}
