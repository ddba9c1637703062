// The periodic verification, in small steps: each step reads one slice of the kernel (the
// service list, the destinations of a chunk of virtual servers, one ipset, the dummy link's
// addresses) and folds it into the observed state (verify-fold.ts); the proxier then plans and
// applies the objects that differ. A read runs while partial syncs go on; whatever a partial sync
// touched during the read is left out of the fold (observed is newer than the read for it).
import { isNotFound } from '../../kernel/errors.js';
import type { IpsetClient } from '../../kernel/ipset/types.js';
import type { IpvsClient } from '../../kernel/ipvs/client.js';
import { serviceId, type ServiceKey } from '../../kernel/ipvs/types.js';
import type { AddressBinding } from '../../config.js';
import type { LinkClient } from '../../kernel/link.js';
import { boundForm } from './binding.js';
import { emptyDelta, mergeDelta, type DesiredDelta, type DesiredIndex } from './desired-index.js';
import type { IptablesKeeper, FamilyRules } from './iptables-keeper.js';
import { capacityOf, OWNED_SETS } from './ipsets.js';
import { element } from './observe.js';
import type { ObservedState, VirtualServerId } from './types.js';
import { emptyFold, foldAddresses, foldDestinations, foldScope, foldSet, isEmptyFold, ServiceListFold, SERVICE_SLICE, type Fold } from './verify-fold.js';

/** Virtual servers whose destinations one verification step reads. */
export const VERIFY_CHUNK = 128;

/** Slack for the step-vs-sync gate (verify()): timer lateness and the sync's start. */
const GATE_MARGIN_MS = 5;

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
