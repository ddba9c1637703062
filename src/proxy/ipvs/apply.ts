// apply(plan): one batched call per client and kind, results folded back into the observed
// state. The only place where idempotency is decided: EEXIST on add and "not found" on delete
// are successes; everything else is an error naming its object, and the rest still applies.
// The IPVS ops are apply-ipvs.ts's; the sets and addresses are here.
import { NetlinkError, isExist, isNotFound } from '../../kernel/errors.js';
import { IpvsApplier, type ApplyLog } from './apply-ipvs.js';
import { classify } from './errors.js';
import { emptyDelta, type DesiredDelta } from './desired-index.js';
import type { KernelClients } from './observe.js';
import type { IpsetGrow, Plan } from './plan.js';
import { capacityOf } from './ipsets.js';
import type { ObservedState } from './types.js';
import { boundForm } from './binding.js';

/** What apply did, counted. */
export interface ApplyCounts {
  /** IPVS ops sent (follow-up updates included). */
  ipvsOps: number;
  ipvsCalls: number;
  /** ipset entries sent (adds and deletes). */
  ipsetEntries: number;
  ipsetCalls: number;
  /** Addresses sent (adds and deletes). */
  addresses: number;
  linkCalls: number;
  /** Adds answered EEXIST, turned into updates of the existing object. */
  followUps: number;
}

/** The outcome of one apply. */
export interface ApplyResult {
  /** Every failed object, named (`tcp/10.96.0.10:80 -> 10.244.1.2:8080`, `KUBE-CLUSTER-IP 10.96.0.10,tcp:80`, …). */
  errors: Array<{ object: string; error: Error }>;
  counts: ApplyCounts;
  /** Something failed that may succeed if tried again (or needs comparing again): sync again soon, with retryScope. */
  retry: boolean;
  /** The objects to compare on the retry (failed ones, and virtual servers found in an unexpected state). */
  retryScope: DesiredDelta;
  /** Objects the kernel refused for good (see errors.ts): not retried before the next full sync. */
  refused: Array<{ object: string; error: Error }>;
  /**
   * Ops whose answer showed the kernel had lost what observed held (missing(): a service flushed
   * behind the proxy, a real server gone before its update). Not errors: observed is repaired
   * and the retry compares the virtual server again (re-adds it whole). An `ipvsadm -C` between a
   * verification's read of the service list and of the destinations ends here, once per real server.
   */
  drift: Array<{ object: string; error: Error }>;
  /** The dummy link was missing (ENODEV) or down (ENETDOWN: setting it down drops its routes): the next sync re-ensures it and binds every address again. */
  linkMissing: boolean;
  /** Sets replaced by larger copies: name, capacity before and after, entries. */
  grown: Array<{ set: string; from: number; to: number; entries: number }>;
}

/**
 * IPVS ops (or ipset entries) per batch call. A first sync at 10,000 x 10 is 110,000 IPVS ops
 * and 100,000 loop-back entries: sent in one call, all their request objects and results are
 * alive at once and end up in the old generation (tens of MiB of heap touched once, slow page
 * faults in UML); in batches of this size they die young. The kernel side is the same (the addon
 * splits every batch into sendmsg chunks anyway).
 */
export const BATCH_SIZE = 4096;

/** ENODEV: the dummy link is missing; ENETDOWN: it is down, so holds no route (an IPv6 one is refused). */
function linkGone(e: unknown): boolean {
  return e instanceof NetlinkError && (e.code === 'ENODEV' || e.code === 'ENETDOWN');
}

/** Applies one plan's sets and addresses, and keeps the record the IPVS part adds to. */
class Applier implements ApplyLog {
  readonly errors: ApplyResult['errors'] = [];
  readonly counts: ApplyCounts = { ipvsOps: 0, ipvsCalls: 0, ipsetEntries: 0, ipsetCalls: 0, addresses: 0, linkCalls: 0, followUps: 0 };
  readonly retryScope = emptyDelta();
  readonly refused: ApplyResult['refused'] = [];
  readonly drift: ApplyResult['drift'] = [];
  retry = false;
  linkMissing = false;
  readonly grown: ApplyResult['grown'] = [];

  constructor(
    private readonly clients: KernelClients,
    private readonly observed: ObservedState,
  ) {}

  /** Records a failure; returns its class (a refusal is not retried before the next full sync). */
  fail(object: string, error: Error, op: string): ReturnType<typeof classify> {
    this.errors.push({ object, error });
    const c = classify(op, error);
    if (c === 'refused') this.refused.push({ object, error });
    else this.retry = true;
    return c;
  }

  private retryEntry(set: string, entry: string): void {
    let s = this.retryScope.ipsetEntries.get(set);
    if (!s) this.retryScope.ipsetEntries.set(set, (s = new Set()));
    s.add(entry);
  }

  async createSets(plan: Plan): Promise<void> {
    for (const spec of plan.ipsetCreate) {
      this.counts.ipsetCalls++;
      try {
        await this.clients.ipset.create(spec);
      } catch (e) {
        if (!isExist(e)) {
          this.fail(spec.name, e as Error, 'ipset.create');
          continue;
        }
      }
      if (!this.observed.ipsets.has(spec.name)) this.observed.ipsets.set(spec.name, new Set());
      // What an already existing set holds is read by the next verification; until then assume the spec's.
      const capacity = capacityOf({ maxElem: spec.maxElem ?? null, range: spec.range ?? null });
      if (capacity !== null) this.observed.ipsetCapacity.set(spec.name, capacity);
    }
  }

  /** Replaces each set of plan.ipsetGrow by a larger copy (see IpsetGrow); a failure leaves the old set as it was. */
  async growSets(plan: Plan): Promise<void> {
    for (const g of plan.ipsetGrow) {
      const { ipset } = this.clients;
      const name = g.spec.name;
      let step = 'ipset.create';
      try {
        await ipset.destroy(g.temp, { exist: true }); // left by a daemon that died half-way
        await ipset.create({ ...g.spec, name: g.temp });
        step = 'ipset.add';
        const have = await this.fill(g);
        step = 'ipset.swap';
        await ipset.swap(name, g.temp);
        this.observed.ipsets.set(name, have);
        this.observed.ipsetCapacity.set(name, g.spec.maxElem!);
        this.grown.push({ set: name, from: g.from, to: g.spec.maxElem!, entries: have.size });
        step = 'ipset.destroy';
        await ipset.destroy(g.temp);
      } catch (e) {
        if (this.fail(name, e as Error, step) === 'stale' && step === 'ipset.swap') this.observed.ipsets.delete(name);
        this.retry = true; // the set stays as it was (full, or soon): try again next sync
        if (step !== 'ipset.destroy') await ipset.destroy(g.temp, { exist: true }).catch(() => {});
      }
    }
  }

  /** Adds a growing set's entries to its temporary copy; the entries it holds (refused ones reported). */
  private async fill(g: IpsetGrow): Promise<Set<string>> {
    const have = new Set<string>();
    for (let from = 0; from < g.entries.length; from += BATCH_SIZE) {
      const entries = g.entries.slice(from, from + BATCH_SIZE);
      this.counts.ipsetCalls++;
      this.counts.ipsetEntries += entries.length;
      const results = await this.clients.ipset.add(g.temp, entries);
      results.forEach((r, i) => {
        const entry = entries[i]!;
        if (r.ok || isExist(r.error)) have.add(entry);
        else if (this.fail(`${g.spec.name} ${entry}`, r.error, 'ipset.add') !== 'refused') this.retryEntry(g.spec.name, entry);
      });
    }
    return have;
  }

  async entries(kind: 'add' | 'del', batches: Map<string, string[]>): Promise<void> {
    for (const [set, all] of batches) {
      for (let from = 0; from < all.length; from += BATCH_SIZE) {
        if (!(await this.entryBatch(kind, set, all.slice(from, from + BATCH_SIZE)))) {
          for (const entry of all.slice(from + BATCH_SIZE)) this.retryEntry(set, entry);
          break;
        }
      }
    }
  }

  /** One batch of entries of one set; false when the call failed as a whole (reported). */
  private async entryBatch(kind: 'add' | 'del', set: string, entries: string[]): Promise<boolean> {
    this.counts.ipsetCalls++;
    this.counts.ipsetEntries += entries.length;
    let results;
    try {
      results = await this.clients.ipset[kind](set, entries);
    } catch (e) {
      // A missing set (someone destroyed it): forget it, so the next plan creates and fills it.
      if (this.fail(set, e as Error, `ipset.${kind}`) === 'stale') this.observed.ipsets.delete(set);
      for (const entry of entries) this.retryEntry(set, entry);
      return false;
    }
    let have = this.observed.ipsets.get(set);
    if (!have && kind === 'add') this.observed.ipsets.set(set, (have = new Set()));
    results.forEach((r, i) => {
      const entry = entries[i]!;
      if (r.ok || (kind === 'add' ? isExist(r.error) : isNotFound(r.error))) {
        if (kind === 'add') have!.add(entry);
        else have?.delete(entry);
        return;
      }
      if (r.error instanceof NetlinkError && r.error.code === 'IPSET_ERR_HASH_FULL') {
        // Smaller than observed says (made by someone else): an error, not a refusal: the next plan grows it.
        this.observed.ipsetCapacity.set(set, Math.min(this.observed.ipsetCapacity.get(set) ?? Infinity, have?.size ?? 0));
        this.errors.push({ object: `${set} ${entry}`, error: r.error });
        this.retry = true;
        return this.retryEntry(set, entry);
      }
      if (this.fail(`${set} ${entry}`, r.error, `ipset.${kind}`) !== 'refused') this.retryEntry(set, entry);
    });
    return true;
  }

  async addresses(kind: 'add' | 'delete', addresses: readonly string[]): Promise<void> {
    if (addresses.length === 0) return;
    this.counts.linkCalls++;
    this.counts.addresses += addresses.length;
    const { link, dummyName, binding } = this.clients;
    const op = binding === 'route' ? `link.${kind}LocalRoute` : `link.${kind}Address`;
    let results;
    try {
      results = await boundForm(binding).change(link, kind, dummyName, addresses);
    } catch (e) {
      this.fail(`${dummyName}`, e as Error, op);
      if (linkGone(e)) this.missingLink();
      for (const a of addresses) this.retryScope.addresses.add(a);
      return;
    }
    results.forEach((r, i) => {
      const a = addresses[i]!;
      if (!r.ok && linkGone(r.error)) this.missingLink();
      if (r.ok || (kind === 'add' ? isExist(r.error) : isNotFound(r.error))) {
        if (kind === 'add') this.observed.addresses.add(a);
        else this.observed.addresses.delete(a);
        return;
      }
      if (this.fail(`${a} dev ${dummyName}`, r.error, op) !== 'refused') this.retryScope.addresses.add(a);
    });
  }

  /** The dummy link is gone (or was set down), and every address with it. */
  private missingLink(): void {
    this.linkMissing = true;
    this.observed.addresses.clear();
  }
}

/**
 * Executes a plan: owned sets created, entries added, `beforeVirtualServers` (the proxier's
 * iptables rules: they match those sets, and a virtual server must never take a connection
 * before its masquerade rule is there, kubernetes#133773), addresses bound, the IPVS ops (one
 * batch, in the plan's order), then addresses and entries removed. `observed` and the plan's
 * graceful state (draining starts and ends) change only for acknowledged ops. A failed op is reported with its object and
 * does not stop the others; `retry` asks the runner for another sync over `retryScope`.
 */
export async function applyPlan(plan: Plan, clients: KernelClients, observed: ObservedState, beforeVirtualServers?: () => Promise<void>): Promise<ApplyResult> {
  const a = new Applier(clients, observed);
  await a.createSets(plan);
  await a.growSets(plan);
  await a.entries('add', plan.ipsetAdd);
  await beforeVirtualServers?.();
  await a.addresses('add', plan.addressAdd);
  const done = await new IpvsApplier(a, clients.ipvs, observed, BATCH_SIZE).apply(plan.ipvs);
  await a.addresses('delete', plan.addressDel);
  await a.entries('del', plan.ipsetDel);
  const { state, start, end } = plan.draining;
  const acked = (op: number | null): boolean => op === null || done[op] === true;
  for (const s of start) if (acked(s.op)) state.start(s.vs, s.dest, { since: s.since, protocol: s.protocol, countedAt: null });
  for (const e of end) if (acked(e.op)) state.end(e.vs, e.dest);
  return { errors: a.errors, counts: a.counts, retry: a.retry, retryScope: a.retryScope, refused: a.refused, drift: a.drift, linkMissing: a.linkMissing, grown: a.grown };
}
