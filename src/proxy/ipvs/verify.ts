// The periodic verification, in small steps: each step reads one slice of the kernel (the
// service list, the destinations of a chunk of virtual servers, one ipset, the dummy link's
// addresses) and folds it into the observed state here; the proxier then plans and applies the
// objects that differ. A read runs while partial syncs go on; whatever a partial sync touched
// during the read is left out of the fold (observed is newer than the read for it).
import { isNotFound } from '../../kernel/errors.js';
import type { IpsetClient } from '../../kernel/ipset/types.js';
import type { IpvsClient } from '../../kernel/ipvs/client.js';
import { destinationId, observedDestination, serviceId, type Destination, type DestinationStatus, type ServiceKey, type ServiceStatus, type VirtualService } from '../../kernel/ipvs/types.js';
import type { AddressBinding } from '../../config.js';
import type { LinkClient } from '../../kernel/link.js';
import { boundForm } from './binding.js';
import { DestinationTable } from './destination-table.js';
import { byAddress, sameDestination, sameIn, sameService } from './desired-compare.js';
import { emptyDelta, mergeDelta, type DesiredDelta, type DesiredIndex } from './desired-index.js';
import type { IptablesKeeper, FamilyRules } from './iptables-keeper.js';
import { capacityOf, OWNED_SETS } from './ipsets.js';
import { element } from './observe.js';
import type { ObservedState, VirtualServerId } from './types.js';

/** Virtual servers whose destinations one verification step reads. */
export const VERIFY_CHUNK = 128;

/** Slack for the step-vs-sync gate (verify()): timer lateness and the sync's start. */
const GATE_MARGIN_MS = 5;

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

/** What one periodic verification did. */
export interface VerifyReport {
  durationMs: number;
  /** Steps (reads) taken; partial syncs may run between any two. */
  steps: number;
  /** Objects found to differ from what the proxier believed, and compared again. */
  repaired: number;
  ops: number;
  iptablesRestores: number;
  /** iptables-save runs: none while the kernel's token of the tables stays (IptablesKeeper). */
  iptablesSaves: number;
  errors: number;
  /** Ops that found the kernel changed since the step's read (ApplyResult.drift): compared again by the next sync. */
  drift: number;
  /** The longest time one step held the sync queue (what a change could wait for, at most). */
  maxHoldMs: number;
  /** The step that held it (`node`, `services`, `destinations`, `set:<name>`, `addresses`, `iptables`). */
  maxHoldStep?: string;
  /** Virtual servers whose destinations were read before the others (run()'s `first`), when any. */
  readFirst?: number;
}

/** The node's addresses as one read finds them: those NodePorts listen on, and every one but the dummy link's. */
export interface NodeAddresses {
  nodePort: string[];
  local: string[];
}

/** What the verification needs of the proxier. */
export interface VerifyHost {
  /** The sockets reads go through (separate from the writers'). */
  read: { ipvs: IpvsClient; ipset: IpsetClient; link: LinkClient };
  dummyName: string;
  /** How Service IPs are bound on the dummy link (binding.ts). */
  binding: AddressBinding;
  index: DesiredIndex;
  iptables: IptablesKeeper;
  now(): number;
  observed(): ObservedState;
  /** Runs `fn` in the sync queue (after the syncs that asked before). */
  serial<T>(fn: () => Promise<T>): Promise<T>;
  readNodePortAddresses(link: LinkClient): Promise<NodeAddresses>;
  /** Re-ensures the node objects and takes the node-port addresses read; adds what that changed to `scope`. */
  node(scope: DesiredDelta, addresses: NodeAddresses): Promise<void>;
  /** Plans and applies `scope`. */
  repair(scope: DesiredDelta): Promise<{ ops: number; errors: number; drift: number }>;
  /** The wanted rules; waits for the iptables drivers (backend detection) at a daemon's start. */
  rules(): Promise<FamilyRules[]>;
  /** Milliseconds until the next partial sync may start, 0 while one runs, below 0: no constraint (runner.nextSyncIn). */
  nextSyncIn(): number;
}

/**
 * Runs verifications: node objects, the service list, destinations VERIFY_CHUNK virtual servers
 * at a time, each ipset, the dummy addresses, the iptables rules. Reads run outside the sync
 * queue (on the read sockets), so a change waits for at most one fold-and-repair, never for
 * the whole read; what partial syncs touch meanwhile (touch()) is left out of the fold.
 */
export class Verifier {
  private touched: DesiredDelta | null = null;
  /**
   * How long each kind of step took last time (`services`, `destinations`, `set:<name>`,
   * `addresses`, `iptables`): the gate's estimate for the next one of its kind. Without it a
   * step's estimate is the step before it, and the first large read of a verification (the whole
   * virtual-server list, after the small node step) would start however close the next sync is.
   */
  readonly #stepMs = new Map<string, number>();

  constructor(private readonly host: VerifyHost) {}

  /** A partial sync compared `scope` (and the draining virtual servers): newer than any read in flight. */
  touch(scope: DesiredDelta, draining: Iterable<VirtualServerId>): void {
    if (!this.touched) return;
    mergeDelta(this.touched, scope);
    for (const id of draining) this.touched.virtualServers.add(id);
  }

  /**
   * One verification; throws when a read fails. `paced`: after each step, wait as long as it
   * took (at most 250 ms), so it leaves at least half of the CPU (UML has one) to partial syncs;
   * and a step that would still be reading when the next partial sync may start (nextSyncIn)
   * waits for that sync to be done first, so reads fill the gaps between syncs instead of
   * competing with them for the CPU. The destinations of the virtual servers in `first` (a
   * restart's handoff.ts) are read before the others.
   */
  async run(paced: boolean, first?: ReadonlySet<VirtualServerId>): Promise<VerifyReport> {
    const h = this.host;
    const t0 = h.now();
    const r: VerifyReport = { durationMs: 0, steps: 0, repaired: 0, ops: 0, iptablesRestores: 0, iptablesSaves: 0, errors: 0, drift: 0, maxHoldMs: 0 };
    const held = (kind: string, fn: () => Promise<void>): Promise<void> =>
      h.serial(async () => {
        const t = h.now();
        try {
          await fn();
        } finally {
          const ms = Math.round(h.now() - t);
          if (ms > r.maxHoldMs || r.maxHoldStep === undefined) [r.maxHoldMs, r.maxHoldStep] = [ms, kind];
        }
      });
    const repair = async (scope: DesiredDelta): Promise<void> => {
      const { ops, errors, drift } = await h.repair(scope);
      r.ops += ops;
      r.errors += errors;
      r.drift += drift;
    };
    let stepAt = h.now();
    let lastStepMs = 0;
    let lastKind: string | undefined;
    const sleep = (ms: number): Promise<void> => new Promise<void>((res) => (ms >= 1 ? setTimeout(res, ms) : setImmediate(res)));
    const pause = async (kind: string): Promise<void> => {
      lastStepMs = Math.max(0, h.now() - stepAt);
      if (lastKind !== undefined) this.#stepMs.set(lastKind, lastStepMs);
      lastKind = kind;
      await sleep(paced ? Math.min(250, lastStepMs) : 0);
      const expected = this.#stepMs.get(kind) ?? lastStepMs;
      const until = paced ? h.nextSyncIn() : -1;
      if (until >= 0 && until < expected * 1.5 + GATE_MARGIN_MS) {
        await sleep(until + GATE_MARGIN_MS); // the sync's timer fires first...
        await h.serial(async () => {}); // ...and this waits until it is done
      }
      stepAt = h.now();
    };
    /** A read, then its fold and repair in the sync queue; a fold that returns false is called again (a slice at a time). */
    const step = async <T>(kind: string, readFn: () => Promise<T>, fold: (value: T, touched: DesiredDelta, f: Fold) => boolean | void): Promise<void> => {
      await pause(kind);
      await h.serial(async () => void (this.touched = emptyDelta())); // no partial sync is half-way
      const value = await readFn();
      r.steps++;
      for (let done = false; !done; ) {
        await held(kind, async () => {
          const touched = this.touched ?? emptyDelta();
          const f = emptyFold();
          done = fold(value, touched, f) !== false;
          if (done) this.touched = null;
          if (isEmptyFold(f)) return;
          r.repaired += f.virtualServers.size + f.addresses.size + [...f.ipsetEntries.values()].reduce((n, s) => n + s.size, 0);
          await repair(foldScope(f));
        });
        if (!done) await sleep(0); // the event loop turns: watch events, and syncs asked for meanwhile go first
      }
    };
    try {
      const addresses = await h.readNodePortAddresses(h.read.link); // outside the queue
      await held('node', async () => {
        const scope = emptyDelta();
        await h.node(scope, addresses);
        await repair(scope);
      });
      const listed = new ServiceListFold(h.observed(), h.index.virtualServers());
      const rows = async () => (await h.read.ipvs.readServices())[Symbol.iterator]();
      await step('services', rows, (it, touched, f) => listed.add(it, h.observed(), touched, f, SERVICE_SLICE));
      const { unread } = listed;
      let keys = listed.keys;
      if (first?.size) {
        const ahead: ServiceKey[] = [];
        const rest: ServiceKey[] = [];
        for (const k of keys) (first.has(serviceId(k)) ? ahead : rest).push(k);
        r.readFirst = ahead.length;
        keys = [...ahead, ...rest];
      }
      for (let i = 0; i < keys.length; i += VERIFY_CHUNK) {
        const chunk = keys.slice(i, i + VERIFY_CHUNK);
        await step('destinations', () => h.read.ipvs.listDestinationsMany(chunk), (dests, touched, f) => foldDestinations(h.observed(), chunk, dests, unread, touched, f, h.index.virtualServers()));
      }
      for (const set of new Set([...OWNED_SETS.map((s) => s.spec.name), ...h.index.allSets()])) {
        const list = async (): Promise<{ entries: string[]; capacity: number | null } | null> => {
          try {
            const [info] = await h.read.ipset.list(set);
            return info ? { entries: info.entries.map(element), capacity: capacityOf(info) } : null;
          } catch (e) {
            if (isNotFound(e)) return null;
            throw e;
          }
        };
        await step(`set:${set}`, list, (read, touched, f) => foldSet(h.observed(), set, read?.entries ?? null, h.index.ipsetEntries(set), touched, f, read?.capacity ?? null));
      }
      const addrs = (): Promise<string[]> => boundForm(h.binding).list(h.read.link, h.dummyName).catch((e) => (isNotFound(e) ? [] : Promise.reject(e)));
      await step('addresses', addrs, (list, touched, f) => foldAddresses(h.observed(), list, h.index.addresses(), touched, f));
      await pause('iptables');
      const prints = await h.iptables.read(await h.rules()); // iptables-save outside the queue
      await held('iptables', async () => {
        const done = await h.iptables.sync(await h.rules(), true, prints);
        r.iptablesRestores += done.restores;
        r.iptablesSaves += done.saves;
      });
      this.#stepMs.set('iptables', Math.max(0, h.now() - stepAt));
    } finally {
      this.touched = null;
    }
    r.durationMs = Math.round(h.now() - t0);
    return r;
  }
}
