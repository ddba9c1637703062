// plan(desired, observed) -> ordered kernel ops. Pure: reads the index, the observed state and
// the graceful state, changes none of them (apply.ts does, from acknowledged ops).
import type { IpvsOp } from '../../kernel/ipvs/client.js';
import { destinationId, type Destination, type DestinationKey, type Protocol, type VirtualService } from '../../kernel/ipvs/types.js';
import type { IpsetSetSpec } from '../../kernel/ipset/types.js';
import { inCidr } from '../../model/ip.js';
import type { GracefulState } from './graceful.js';
import { growName, MIN_MAXELEM, mustGrow, sizedSpec } from './ipsets.js';
import { sameDestination, sameService } from './desired-compare.js';
import type { DesiredDelta, DesiredIndex } from './desired-index.js';
import type { DestinationId, ObservedState, OwnedSet, VirtualServerId } from './types.js';

/** Inputs of plan() besides the states. Times in milliseconds. */
export interface PlanOptions {
  now: number;
  /** How long a removed TCP real server may drain before it is deleted anyway; <= 0 deletes at once. */
  gracefulTimeoutMs: number;
  /** --ipvs-exclude-cidrs: virtual servers and dummy addresses in these are never deleted. */
  excludeCIDRs: readonly string[];
  /** The ipsets the proxy owns: created when missing from `observed` (default: none, the caller creates them). */
  ownedSets?: readonly OwnedSet[];
}

/** A destination that starts draining once `op` (its weight-0 update; null = already 0) is acknowledged. */
export interface DrainStart {
  vs: VirtualServerId;
  dest: DestinationId;
  protocol: Protocol | null;
  since: number;
  op: number | null;
}

/** A draining destination to forget once `op` (its update or delete; null = none needed) is acknowledged. */
export interface DrainEnd {
  vs: VirtualServerId;
  dest: DestinationId;
  reason: 'restored' | 'drained' | 'timeout' | 'service-deleted' | 'gone';
  op: number | null;
}

/** What a plan does, counted (for logs and metrics). */
export interface PlanCounts {
  /** Virtual servers compared (the scope, plus those with draining destinations). */
  virtualServers: number;
  addService: number;
  updateService: number;
  deleteService: number;
  addDestination: number;
  updateDestination: number;
  deleteDestination: number;
  ipsetCreate: number;
  /** Sets replaced by a larger copy (IpsetGrow). */
  ipsetGrow: number;
  ipsetAdd: number;
  ipsetDel: number;
  addressAdd: number;
  addressDel: number;
  drainStart: number;
  drainEnd: number;
}

/**
 * A set that is to hold more than its capacity allows ahead of need (mustGrow): `spec` (larger) is
 * created as `temp`, filled with `entries` (every wanted one), swapped with the set (an atomic
 * rename: iptables rules refer to the set by index, so they match the new one at once) and the old
 * one, now `temp`, destroyed.
 */
export interface IpsetGrow {
  spec: IpsetSetSpec;
  temp: string;
  entries: string[];
  /** The capacity the set had. */
  from: number;
}

/** Ordered kernel changes. Apply order: sets, entries, addresses, IPVS ops (as listed), address and entry deletions. */
export interface Plan {
  /** Services added/updated, then destinations added/updated, then destinations deleted, then services deleted. */
  ipvs: IpvsOp[];
  /** Owned sets to create, sized for their entries (sizedSpec). */
  ipsetCreate: IpsetSetSpec[];
  /** Owned sets to replace by larger ones (before any entry is added). */
  ipsetGrow: IpsetGrow[];
  ipsetAdd: Map<string, string[]>;
  ipsetDel: Map<string, string[]>;
  addressAdd: string[];
  addressDel: string[];
  /** Graceful-termination bookkeeping that applyPlan records in `state` as the ops are acknowledged. */
  draining: { state: GracefulState; start: DrainStart[]; end: DrainEnd[] };
  counts: PlanCounts;
}

type ObservedVs = NonNullable<ReturnType<ObservedState['virtualServers']['get']>>;
type ObservedDest = NonNullable<ReturnType<ObservedVs['destinations']['get']>>;

function plainDestination(d: ObservedDest, weight: number): Destination {
  return { address: d.address, port: d.port, forward: d.forward, weight, upperThreshold: d.upperThreshold, lowerThreshold: d.lowerThreshold };
}

function emptyCounts(): PlanCounts {
  return {
    virtualServers: 0,
    addService: 0,
    updateService: 0,
    deleteService: 0,
    addDestination: 0,
    updateDestination: 0,
    deleteDestination: 0,
    ipsetCreate: 0,
    ipsetGrow: 0,
    ipsetAdd: 0,
    ipsetDel: 0,
    addressAdd: 0,
    addressDel: 0,
    drainStart: 0,
    drainEnd: 0,
  };
}

/** Builds one plan; see plan(). */
class Planner {
  private readonly services: IpvsOp[] = [];
  private readonly destinations: IpvsOp[] = [];
  private readonly destDeletes: IpvsOp[] = [];
  private readonly serviceDeletes: IpvsOp[] = [];
  private readonly starts: Array<Omit<DrainStart, 'op'> & { op: IpvsOp | null }> = [];
  private readonly ends: Array<Omit<DrainEnd, 'op'> & { op: IpvsOp | null }> = [];
  readonly counts = emptyCounts();

  constructor(
    private readonly index: DesiredIndex,
    private readonly observed: ObservedState,
    private readonly graceful: GracefulState,
    private readonly opts: PlanOptions,
  ) {}

  isExcluded(address: string | null): boolean {
    return address !== null && this.opts.excludeCIDRs.some((c) => inCidr(address, c));
  }

  private op(list: IpvsOp[], op: IpvsOp): IpvsOp {
    list.push(op);
    this.counts[op.kind]++;
    return op;
  }

  private end(vs: VirtualServerId, dest: DestinationId, reason: DrainEnd['reason'], op: IpvsOp | null): void {
    this.ends.push({ vs, dest, reason, op });
  }

  private endAll(vs: VirtualServerId, reason: DrainEnd['reason'], op: IpvsOp | null): void {
    for (const dest of this.graceful.draining.get(vs)?.keys() ?? []) this.end(vs, dest, reason, op);
  }

  /** Compares one virtual server: desired (owned) vs observed, with its draining destinations. */
  virtualServer(id: VirtualServerId): void {
    this.counts.virtualServers++;
    const d = this.index.virtualServers().get(id);
    const o = this.observed.virtualServers.get(id);
    if (!o) {
      this.endAll(id, 'gone', null);
      if (!d) return;
      this.op(this.services, { kind: 'addService', service: d.service });
      for (const destination of d.destinations) this.op(this.destinations, { kind: 'addDestination', service: d.service, destination });
      return;
    }
    if (!d) {
      if (this.isExcluded(o.service.address)) return this.endAll(id, 'gone', null);
      // Policy: a removed virtual server is deleted at once, draining destinations included (as
      // kube-proxy does). Keeping it to drain would be useless without also keeping its dummy
      // address (IPVS sees packets at LOCAL_IN only for a local VIP) and its ipset entries.
      const del = this.op(this.serviceDeletes, { kind: 'deleteService', service: o.service });
      this.endAll(id, 'service-deleted', del);
      return;
    }
    if (!sameService(d.service, o.service)) this.op(this.services, { kind: 'updateService', service: d.service });
    const draining = this.graceful.draining.get(id);
    const wanted = new Set<DestinationId>();
    for (const destination of d.destinations) {
      const did = destinationId(destination);
      wanted.add(did);
      const od = o.destinations.get(did);
      const isDraining = draining?.has(did) ?? false;
      if (!od) {
        const add = this.op(this.destinations, { kind: 'addDestination', service: d.service, destination });
        if (isDraining) this.end(id, did, 'gone', add);
      } else if (!sameDestination(destination, od)) {
        const update = this.op(this.destinations, { kind: 'updateDestination', service: d.service, destination });
        if (isDraining) this.end(id, did, 'restored', update);
      } else if (isDraining) this.end(id, did, 'restored', null);
    }
    // forEach, not for-of over entries: no [key, value] array per real server.
    o.destinations.forEach((od, did) => {
      if (!wanted.has(did)) this.removed(id, o.service, did, od);
    });
    if (draining) for (const did of draining.keys()) if (!wanted.has(did) && !o.destinations.has(did)) this.end(id, did, 'gone', null);
  }

  /** A real server in the kernel that is no longer wanted: drain (TCP, fwmark) or delete (UDP, SCTP). */
  private removed(id: VirtualServerId, service: VirtualService, did: DestinationId, od: ObservedDest): void {
    const entry = this.graceful.get(id, did);
    const del = (reason: DrainEnd['reason']): void => {
      const op = this.op(this.destDeletes, { kind: 'deleteDestination', service, destination: { address: od.address, port: od.port } });
      if (entry) this.end(id, did, reason, op);
    };
    if (service.protocol === 'udp' || service.protocol === 'sctp' || this.opts.gracefulTimeoutMs <= 0) return del('gone');
    if (entry) {
      const conns = (od.activeConns ?? 0) + (od.inactiveConns ?? 0);
      if (entry.countedAt !== null && entry.countedAt >= entry.since && conns === 0) return del('drained');
      if (this.opts.now - entry.since >= this.opts.gracefulTimeoutMs) return del('timeout');
      // Still draining; someone restored its weight: zero it again.
      if (od.weight !== 0) this.op(this.destinations, { kind: 'updateDestination', service, destination: plainDestination(od, 0) });
      return;
    }
    const op = od.weight !== 0 ? this.op(this.destinations, { kind: 'updateDestination', service, destination: plainDestination(od, 0) }) : null;
    this.starts.push({ vs: id, dest: did, protocol: service.protocol, since: this.opts.now, op });
  }

  finish(): Pick<Plan, 'ipvs' | 'draining'> {
    const ipvs = [...this.services, ...this.destinations, ...this.destDeletes, ...this.serviceDeletes];
    // Indexes of the ops drains refer to (few), not of every op (110,000 at a first sync of 10,000 Services).
    const at = new Map<IpvsOp, number>();
    for (const d of [...this.starts, ...this.ends]) if (d.op !== null) at.set(d.op, -1);
    if (at.size > 0) {
      for (let i = 0; i < ipvs.length; i++) if (at.has(ipvs[i]!)) at.set(ipvs[i]!, i);
    }
    const idx = (op: IpvsOp | null): number | null => (op === null ? null : at.get(op)!);
    const start = this.starts.map((s) => ({ ...s, op: idx(s.op) }));
    const end = this.ends.map((e) => ({ ...e, op: idx(e.op) }));
    this.counts.drainStart = start.length;
    this.counts.drainEnd = end.length;
    return { ipvs, draining: { state: this.graceful, start, end } };
  }
}

function push(m: Map<string, string[]>, key: string, value: string): void {
  const l = m.get(key);
  if (l) l.push(value);
  else m.set(key, [value]);
}

/**
 * The ops that make the kernel match the desired state, for the objects in `scope` ('full':
 * everything; kernel virtual servers not desired are deleted unless their address is in
 * excludeCIDRs). Virtual servers with draining destinations are always compared. Unchanged
 * objects cost no op; a changed service or destination is updated in place, never deleted and
 * re-added. Removed TCP (and fwmark) destinations drain at weight 0 until their connections
 * are gone (counted by refreshDraining) or gracefulTimeoutMs passes; UDP and SCTP ones are
 * deleted at once (their conntrack entries are cleared by UdpConntrack, src/proxy/conntrack.ts).
 */
export function plan(index: DesiredIndex, observed: ObservedState, scope: DesiredDelta | 'full', graceful: GracefulState, opts: PlanOptions): Plan {
  const p = new Planner(index, observed, graceful, opts);
  const full = scope === 'full';

  const vsIds = new Set<VirtualServerId>(full ? index.virtualServers().keys() : scope.virtualServers);
  if (full) for (const id of observed.virtualServers.keys()) vsIds.add(id);
  for (const id of graceful.draining.keys()) vsIds.add(id);
  for (const id of vsIds) p.virtualServer(id);

  // ipsets: owned sets missing from the kernel are created, sized for and filled with every wanted
  // entry; those that the wanted entries would fill (past mustGrow) are replaced by larger copies.
  // Every plan looks (a map size per set): a partial sync's entries are what fills a set.
  const ipsetCreate: IpsetSetSpec[] = [];
  const ipsetGrow: IpsetGrow[] = [];
  const ipsetAdd = new Map<string, string[]>();
  const ipsetDel = new Map<string, string[]>();
  const created = new Set<string>();
  for (const { spec } of opts.ownedSets ?? []) {
    const wanted = index.ipsetEntries(spec.name);
    if (observed.ipsets.has(spec.name)) {
      const capacity = observed.ipsetCapacity.get(spec.name) ?? spec.maxElem ?? MIN_MAXELEM;
      if (spec.type === 'bitmap:port' || !mustGrow(wanted.size, capacity)) continue;
      ipsetGrow.push({ spec: sizedSpec(spec, wanted.size), temp: growName(spec.name), entries: [...wanted.keys()], from: capacity });
      created.add(spec.name);
      continue;
    }
    ipsetCreate.push(sizedSpec(spec, wanted.size));
    created.add(spec.name);
    for (const e of wanted.keys()) push(ipsetAdd, spec.name, e);
  }
  const compareEntry = (set: string, e: string, have: ReadonlySet<string> | undefined): void => {
    const want = index.hasIpsetEntry(set, e);
    if (want && !have?.has(e)) push(ipsetAdd, set, e);
    else if (!want && have?.has(e)) push(ipsetDel, set, e);
  };
  if (full) {
    const sets = new Set([...(opts.ownedSets ?? []).map((o) => o.spec.name), ...index.allSets(), ...observed.ipsets.keys()]);
    for (const set of sets) {
      if (created.has(set)) continue;
      const have = observed.ipsets.get(set);
      for (const e of index.ipsetEntries(set).keys()) if (!have?.has(e)) push(ipsetAdd, set, e);
      if (have) for (const e of have) if (!index.hasIpsetEntry(set, e)) push(ipsetDel, set, e);
    }
  } else {
    for (const [set, entries] of scope.ipsetEntries) {
      if (created.has(set)) continue;
      const have = observed.ipsets.get(set);
      for (const e of entries) compareEntry(set, e, have);
    }
  }

  // Addresses on the dummy link; excluded and IPv6 link-local ones are never removed.
  const addressAdd: string[] = [];
  const addressDel: string[] = [];
  const wanted = index.addresses();
  const compareAddress = (a: string): void => {
    const want = wanted.has(a);
    const have = observed.addresses.has(a);
    if (want && !have) addressAdd.push(a);
    else if (!want && have && !p.isExcluded(a) && !a.toLowerCase().startsWith('fe80:')) addressDel.push(a);
  };
  if (full) {
    for (const a of wanted.keys()) compareAddress(a);
    for (const a of observed.addresses) if (!wanted.has(a)) compareAddress(a);
  } else for (const a of scope.addresses) compareAddress(a);

  const { ipvs, draining } = p.finish();
  const counts = p.counts;
  counts.ipsetCreate = ipsetCreate.length;
  counts.ipsetGrow = ipsetGrow.length;
  for (const l of ipsetAdd.values()) counts.ipsetAdd += l.length;
  for (const l of ipsetDel.values()) counts.ipsetDel += l.length;
  counts.addressAdd = addressAdd.length;
  counts.addressDel = addressDel.length;
  return { ipvs, ipsetCreate, ipsetGrow, ipsetAdd, ipsetDel, addressAdd, addressDel, draining, counts };
}

/** True when the plan changes nothing (draining bookkeeping without ops aside). */
export function isEmptyPlan(p: Plan): boolean {
  return p.ipvs.length === 0 && p.ipsetCreate.length === 0 && p.ipsetGrow.length === 0 && p.ipsetAdd.size === 0 && p.ipsetDel.size === 0 && p.addressAdd.length === 0 && p.addressDel.length === 0;
}

/** A destination's fields as plain data (a tracker Endpoint's own fields are not these). */
function shownDestination(d: DestinationKey | Destination): DestinationKey | Destination {
  return 'forward' in d ? { address: d.address, port: d.port, forward: d.forward, weight: d.weight, upperThreshold: d.upperThreshold, lowerThreshold: d.lowerThreshold } : { address: d.address, port: d.port };
}

/** A plan as text, for --dry-run. */
export function formatPlan(p: Plan): string {
  const lines = [
    ...p.ipvs.map((op) => `ipvs ${op.kind} ${JSON.stringify('destination' in op ? { service: op.service, destination: shownDestination(op.destination) } : op.service)}`),
    ...p.ipsetCreate.map((s) => `ipset create ${s.name} ${s.type}`),
    ...p.ipsetGrow.map((g) => `ipset grow ${g.spec.name} maxelem ${g.from} -> ${g.spec.maxElem} (${g.entries.length} entries)`),
    ...[...p.ipsetAdd].flatMap(([set, entries]) => entries.map((e) => `ipset add ${set} ${e}`)),
    ...[...p.ipsetDel].flatMap(([set, entries]) => entries.map((e) => `ipset del ${set} ${e}`)),
    ...p.addressAdd.map((a) => `address add ${a}`),
    ...p.addressDel.map((a) => `address del ${a}`),
  ];
  return `${lines.join('\n')}\n`;
}
